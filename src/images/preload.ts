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
