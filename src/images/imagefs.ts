import { statSync } from "node:fs";
import type { CriService } from "../cri/index.ts";

/** Whether the runtime's image filesystem is another filesystem than the one holding rootDir (nodefs). */
export async function dedicatedImageFs(cri: CriService, rootDir: string): Promise<boolean> {
  const mountpoint = (await cri.imageFsInfo()).imageFilesystems[0]?.fsId?.mountpoint;
  return mountpoint ? statSync(mountpoint).dev !== statSync(rootDir).dev : false;
}
