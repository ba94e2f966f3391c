/** What the agent asks the runtime once at start: is it up, and which sandbox (pause) image it uses. */
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { CriService } from "./index.ts";

/** Waits until the runtime answers Version; the agent cannot do anything before that. */
export async function waitForRuntime(cri: CriService, opts: { clock: Clock; logger: Logger; signal: AbortSignal }): Promise<void> {
  for (let attempt = 0; !opts.signal.aborted; attempt++) {
    try {
      const v = await cri.version();
      opts.logger.info("container runtime ready", { runtime: v.runtimeName, version: v.runtimeVersion, criVersion: v.runtimeApiVersion });
      return;
    } catch (err) {
      if (attempt % 10 === 0) opts.logger.warn("container runtime not ready; retrying", { err: errorMessage(err) });
      await opts.clock.sleep(1000, opts.signal).catch(() => {});
    }
  }
}

/** containerd's sandbox (pause) image, from its verbose status; image GC must never remove it. */
export async function sandboxImageOf(cri: CriService): Promise<string | undefined> {
  try {
    const config = (await cri.status(true)).info["config"];
    return config ? ((JSON.parse(config) as { sandboxImage?: string }).sandboxImage ?? undefined) : undefined;
  } catch {
    return undefined;
  }
}
