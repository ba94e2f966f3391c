import { statSync } from "node:fs";
import type { CriService } from "../cri/index.ts";

/** Whether the runtime's image filesystem is another filesystem than the one holding rootDir (nodefs): upstream's HasDedicatedImageFs, asked by eviction. */
export class RuntimeImageFs {
  constructor(
    private readonly cri: Pick<CriService, "imageFsInfo">,
    private readonly rootDir: string,
  ) {}

  async hasDedicatedImageFs(): Promise<boolean> {
    const mountpoint = (await this.cri.imageFsInfo()).imageFilesystems[0]?.fsId?.mountpoint;
    return mountpoint ? statSync(mountpoint).dev !== statSync(this.rootDir).dev : false;
  }
}
