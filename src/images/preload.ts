/**
 * Air-gapped nodes: imports every image tarball in a directory into the
 * runtime before any pod starts (`--image-preload-dir`, a bunlet
 * extension), so one binary and a directory of tarballs is a complete
 * install. An image already there with the same target is skipped, so
 * every start after the first costs one lookup per image; a bad tarball is
 * reported by name and the others still load.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { errorMessage } from "../util/errors.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { planArchive } from "./archive.ts";
import type { ImageStore } from "./containerd/client.ts";

export interface PreloadResult {
  file: string;
  imported: string[];
  unchanged: string[];
  error?: string;
}

export async function preloadImages(dir: string, store: ImageStore, logger: Logger): Promise<PreloadResult[]> {
  let files: string[];
  try {
    files = readdirSync(dir)
      .filter((f) => f.endsWith(".tar"))
      .sort();
  } catch (err) {
    logger.warn("cannot read the image preload directory", { dir, err: errorMessage(err) });
    return [];
  }
  const results: PreloadResult[] = [];
  for (const name of files) {
    const file = join(dir, name);
    const result: PreloadResult = { file, imported: [], unchanged: [] };
    results.push(result);
    try {
      const plan = await planArchive(file);
      const todo: typeof plan.images = [];
      for (const image of plan.images) {
        if ((await store.imageTarget(image.name))?.digest === image.target.digest) result.unchanged.push(image.name);
        else todo.push(image);
      }
      if (todo.length) {
        await store.withLease(async () => {
          for (const blob of plan.blobs) {
            if (await store.hasBlob(blob.digest)) {
              if (Object.keys(blob.labels).length) await store.addLabels(blob.digest, blob.labels);
            } else {
              await store.writeBlob(blob);
            }
          }
          for (const image of todo) await store.putImage(image.name, image.target);
        });
        result.imported.push(...todo.map((i) => i.name));
      }
      logger.info("preloaded images", { file, format: plan.format, imported: result.imported, unchanged: result.unchanged });
    } catch (err) {
      result.error = errorMessage(err);
      logger.error("could not preload an image tarball; continuing with the others", { file, err: result.error });
    }
  }
  return results;
}

/** How long the agent waits after a preload for the runtime's CRI image service to list what it preloaded. */
export const PRELOAD_LISTED_TIMEOUT_MS = 30_000;
const PRELOAD_LISTED_POLL_MS = 100;

/**
 * Waits until the CRI lists every preloaded image, and returns those it
 * still does not after `timeoutMs` (logged by name). containerd's CRI learns
 * of an image written through containerd's own API from containerd's image
 * event, a moment after the write (a test saw an image `ctr` had just
 * imported not listed yet, containerd 2.x under load): a pod with
 * imagePullPolicy Never synced before that fails
 * with ErrImageNeverPull, so "preloaded before any pod starts" has to mean
 * "listed by the CRI".
 */
export async function awaitImagesListed(
  names: readonly string[],
  isListed: (name: string) => Promise<boolean>,
  o: { clock: Clock; logger: Logger; signal?: AbortSignal; timeoutMs?: number },
): Promise<string[]> {
  const started = o.clock.now();
  const timeoutMs = o.timeoutMs ?? PRELOAD_LISTED_TIMEOUT_MS;
  let waiting = [...names];
  let lastError: string | undefined;
  for (let round = 0; ; round++) {
    const still: string[] = [];
    for (const name of waiting) {
      try {
        if (!(await isListed(name))) still.push(name);
      } catch (err) {
        lastError = errorMessage(err);
        still.push(name);
      }
    }
    waiting = still;
    const waitedMs = o.clock.now() - started;
    if (!waiting.length) {
      if (round > 0) o.logger.info("the runtime lists the preloaded images", { images: names, waitedMs });
      return waiting;
    }
    if (o.signal?.aborted) return waiting;
    if (waitedMs >= timeoutMs) {
      o.logger.warn("the runtime's image service does not list preloaded images; pods using them with imagePullPolicy Never fail until it does", {
        images: waiting,
        waitedMs,
        ...(lastError ? { lastError } : {}),
      });
      return waiting;
    }
    try {
      await o.clock.sleep(PRELOAD_LISTED_POLL_MS, o.signal);
    } catch {
      return waiting;
    }
  }
}
