/**
 * Image garbage collection, after upstream's realImageGCManager
 * (pkg/kubelet/images/image_gc_manager.go).
 *
 * The manager keeps one record per image id: when it was first detected,
 * when a container was last seen using it, its size, and whether it is
 * protected (pinned by the runtime, or the sandbox image). `detectImages`
 * refreshes the records (upstream every 5 minutes, and before every
 * collection). Candidates for removal are the images that no container uses
 * (running or not) and that are not protected, least recently used first.
 * A candidate younger than `minimumAgeMs` (since first detected) is never
 * removed: it may have just been pulled for a container about to start.
 *
 *   garbageCollect  (every 5 minutes, from start())
 *     1. with maximumAgeMs: remove candidates unused for longer than that,
 *        once the manager has run that long (upstream's freeOldImages);
 *     2. statfs the image filesystem (CRI ImageFsInfo names its mountpoint);
 *        usage% = 100 - available*100/capacity (integer, as upstream);
 *        at or above highThresholdPercent, free down to lowThresholdPercent.
 *     Not enough freed: a FreeDiskSpaceFailed warning on the node, and an error.
 *   freeSpace(bytes): the eviction manager's node-level reclaim.
 *
 * highThresholdPercent 100 without maximumAgeMs disables collection (the
 * kubelet's StartGarbageCollection returns early); detection still runs,
 * so freeSpace works for the eviction manager.
 */
import { statfsSync } from "node:fs";
import type { CriService, Image } from "../cri/index.ts";
import { normalizeImageRef } from "../cri/image-ref.ts";
import { nodeRef, type EventRecorder } from "../events/recorder.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";

/** Upstream ImageGCPeriod: how often garbageCollect runs. */
export const IMAGE_GC_PERIOD_MS = 5 * 60_000;
/** Upstream: detectImages runs every 5 minutes. */
export const IMAGE_DETECT_PERIOD_MS = 5 * 60_000;

export interface FsBytes {
  capacityBytes: number;
  availableBytes: number;
}

/** The real `statfs` for `ImageGCOptions.statfs`: bytes for unprivileged users (bavail), as cadvisor reports. */
export function statfsBytes(path: string): FsBytes {
  const s = statfsSync(path);
  return { capacityBytes: Number(s.blocks) * Number(s.bsize), availableBytes: Number(s.bavail) * Number(s.bsize) };
}

export interface ImageGCOptions {
  cri: Pick<CriService, "listImages" | "listContainers" | "removeImage" | "imageFsInfo">;
  /** imageGCHighThresholdPercent, 0..100; 100 (without maximumAgeMs) disables collection. */
  highThresholdPercent: number;
  /** imageGCLowThresholdPercent, 0..highThresholdPercent. */
  lowThresholdPercent: number;
  /** imageMinimumGCAge: an image first detected less than this ago is never removed. */
  minimumAgeMs: number;
  /** imageMaximumGCAge: unused for longer than this, an image goes regardless of disk usage. 0/undefined: off. */
  maximumAgeMs?: number;
  /** The sandbox (pause) image: never removed, even if the runtime does not pin it (containerd 1.6 does not). */
  pauseImage?: string;
  /** Capacity and available bytes of the filesystem holding `path`; `statfsBytes` in production. */
  statfs: (path: string) => FsBytes;
  clock: Clock;
  logger: Logger;
  /** Node warnings (FreeDiskSpaceFailed, InvalidDiskCapacity, ImageGCFailed); needs `nodeName`. */
  recorder?: EventRecorder;
  nodeName?: string;
}

export interface ImageGC extends AsyncDisposable {
  /**
   * Lists images and containers and refreshes the records: new images get
   * first-detected = now, images used by any container get last-used = now,
   * vanished images are forgotten. Rejects when a CRI list fails.
   */
  detectImages(): Promise<void>;
  /**
   * One collection pass (see the file comment). Rejects when the runtime or
   * the filesystem cannot be read, when a removal fails, or when less than
   * the required amount could be freed. A no-op when disabled.
   */
  garbageCollect(): Promise<void>;
  /**
   * Removes unused, unprotected images old enough, least recently used
   * first, until at least `bytes` are freed (`Infinity`: all of them).
   * Resolves to the bytes freed (image sizes as the runtime reports them),
   * which may be less than asked; a failed removal is logged and skipped.
   * Rejects only when the runtime cannot be listed.
   */
  freeSpace(bytes: number): Promise<number>;
  /** Starts detection and (unless disabled) collection, each every 5 minutes, the first run at once. */
  start(): void;
}

interface ImageRecord {
  firstDetected: number;
  /** Last time a container was seen using it; undefined if never. */
  lastUsed: number | undefined;
  size: number;
  /** Pinned by the runtime or the sandbox image. */
  protected: boolean;
}

interface Candidate extends ImageRecord {
  id: string;
}

/** When "last used" counts for ordering and the age limit: the last use, else the first sighting. */
const lastActive = (r: ImageRecord) => r.lastUsed ?? r.firstDetected;

export function createImageGC(opts: ImageGCOptions): ImageGC {
  const { cri, clock, highThresholdPercent: high, lowThresholdPercent: low, minimumAgeMs } = opts;
  const maxAge = opts.maximumAgeMs ?? 0;
  // Upstream NewImageGCManager's policy checks.
  if (!(high >= 0 && high <= 100)) throw new Error(`invalid HighThresholdPercent ${high}, must be in range [0-100]`);
  if (!(low >= 0 && low <= 100)) throw new Error(`invalid LowThresholdPercent ${low}, must be in range [0-100]`);
  if (low > high) throw new Error(`LowThresholdPercent ${low} can not be higher than HighThresholdPercent ${high}`);
  if (!(minimumAgeMs >= 0) || !(maxAge >= 0)) throw new Error("image GC ages must not be negative");
  if (opts.recorder && !opts.nodeName) throw new Error("image GC: a recorder needs nodeName");

  const log = opts.logger.with({ component: "imageGC" });
  const disabled = high === 100 && maxAge === 0;
  const pauseRefs = opts.pauseImage ? new Set([opts.pauseImage, normalizeImageRef(opts.pauseImage)]) : new Set<string>();
  const records = new Map<string, ImageRecord>();
  let beganGC = clock.now();

  const warn = (reason: string, message: string) => opts.recorder?.event(nodeRef(opts.nodeName!), "Warning", reason, message);

  // garbageCollect, freeSpace and detection never interleave: each reads
  // and changes the records across awaits.
  let chain: Promise<unknown> = Promise.resolve();
  const serialized = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = chain.then(fn, fn);
    chain = run.catch(() => {});
    return run;
  };

  const matches = (image: Image, refs: Set<string>) => refs.has(image.id) || image.repoTags.some((t) => refs.has(t)) || image.repoDigests.some((d) => refs.has(d));

  /** Upstream detectImages; returns the ids of images in use. */
  async function detect(detectTime: number): Promise<Set<string>> {
    const images = await cri.listImages();
    const containers = await cri.listContainers();
    // Containers name their image by id (imageRef / imageId) and by the
    // reference they were created with; any of them marks the image used.
    const used = new Set<string>();
    for (const c of containers) {
      for (const ref of [c.imageRef, c.imageId, c.image?.image]) {
        if (!ref) continue;
        used.add(ref);
        used.add(normalizeImageRef(ref));
      }
    }
    const now = clock.now();
    const inUse = new Set<string>();
    const present = new Set<string>();
    for (const image of images) {
      present.add(image.id);
      let record = records.get(image.id);
      if (!record) {
        log.v(5).info("image is new", { image: image.id });
        record = { firstDetected: detectTime, lastUsed: undefined, size: 0, protected: false };
        records.set(image.id, record);
      }
      if (matches(image, used)) {
        inUse.add(image.id);
        record.lastUsed = now;
      }
      record.size = Number(image.size);
      record.protected = image.pinned || matches(image, pauseRefs);
    }
    for (const id of records.keys()) if (!present.has(id)) records.delete(id);
    return inUse;
  }

  /** Upstream imagesInEvictionOrder: unused, unprotected images, least recently active first. */
  async function evictionOrder(freeTime: number): Promise<Candidate[]> {
    const inUse = await detect(freeTime);
    const candidates: Candidate[] = [];
    for (const [id, r] of records) if (!inUse.has(id) && !r.protected) candidates.push({ id, ...r });
    return candidates.sort((a, b) => lastActive(a) - lastActive(b) || a.firstDetected - b.firstDetected);
  }

  /** Removes one image; the record goes with it. */
  async function remove(image: Candidate, why: string): Promise<void> {
    log.info("removing image", { image: image.id, size: image.size, reason: why });
    await cri.removeImage({ image: image.id });
    records.delete(image.id);
  }

  /** Upstream freeSpace over candidates in eviction order. */
  async function freeFrom(candidates: Candidate[], bytes: number, freeTime: number): Promise<{ freed: number; errors: string[] }> {
    let freed = 0;
    const errors: string[] = [];
    if (bytes <= 0) return { freed, errors };
    for (const image of candidates) {
      // Used during this pass's detection (lastUsed = now): not a candidate.
      if (image.lastUsed !== undefined && image.lastUsed >= freeTime) continue;
      if (freeTime - image.firstDetected < minimumAgeMs) {
        log.v(5).info("image younger than the minimum GC age", { image: image.id, ageMs: freeTime - image.firstDetected });
        continue;
      }
      try {
        await remove(image, "space");
      } catch (err) {
        errors.push(`${image.id}: ${errorMessage(err)}`);
        continue;
      }
      freed += image.size;
      if (freed >= bytes) break;
    }
    return { freed, errors };
  }

  /** Upstream freeOldImages: candidates unused for longer than maximumAgeMs. Returns those left. */
  async function freeOld(candidates: Candidate[], freeTime: number): Promise<Candidate[]> {
    // Wait until maximumAge has passed since the manager started, or images
    // seen for the first time at start would all look old.
    if (maxAge === 0 || freeTime - beganGC <= maxAge) return candidates;
    const remaining: Candidate[] = [];
    const errors: string[] = [];
    for (const image of candidates) {
      if (freeTime - lastActive(image) > maxAge && freeTime - image.firstDetected >= minimumAgeMs) {
        try {
          await remove(image, "age");
          continue;
        } catch (err) {
          errors.push(`${image.id}: ${errorMessage(err)}`);
        }
      }
      remaining.push(image);
    }
    if (errors.length) throw new Error(`wanted to free images older than ${maxAge / 1000}s, encountered errors in image deletion: ${errors.join("; ")}`);
    return remaining;
  }

  async function imageFs(): Promise<FsBytes> {
    const info = await cri.imageFsInfo();
    const mountpoint = info.imageFilesystems[0]?.fsId?.mountpoint;
    if (!mountpoint) throw new Error("the runtime reported no image filesystem (ImageFsInfo)");
    return opts.statfs(mountpoint);
  }

  async function collect(): Promise<void> {
    const freeTime = clock.now();
    let candidates = await evictionOrder(freeTime);
    candidates = await freeOld(candidates, freeTime);

    let { capacityBytes: capacity, availableBytes: available } = await imageFs();
    if (available > capacity) {
      log.info("availability is larger than capacity", { available, capacity });
      available = capacity;
    }
    if (capacity === 0) {
      const message = "invalid capacity 0 on image filesystem";
      warn("InvalidDiskCapacity", message);
      throw new Error(message);
    }
    const usage = 100 - Math.trunc((available * 100) / capacity);
    if (usage < high) return;
    const amount = Math.trunc((capacity * (100 - low)) / 100) - available;
    log.info("disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold", {
      usage,
      highThreshold: high,
      amountToFree: amount,
      lowThreshold: low,
    });
    const { freed, errors } = await freeFrom(candidates, amount, freeTime);
    if (errors.length) throw new Error(`wanted to free ${amount} bytes, but freed ${freed} bytes space with errors in image deletion: ${errors.join("; ")}`);
    if (freed < amount) {
      const message = `Failed to garbage collect required amount of images. Attempted to free ${amount} bytes, but only found ${freed} bytes eligible to free.`;
      warn("FreeDiskSpaceFailed", message);
      throw new Error(message);
    }
  }

  // --- periodic loops -------------------------------------------------------
  let stopped = false;
  const cancels = new Set<() => void>();
  const running = new Set<Promise<void>>();
  /** Runs `fn` now, then `periodMs` after each run ends (wait.Until's sliding period). */
  function every(periodMs: number, fn: () => Promise<void>): void {
    const tick = () => {
      const run = fn().finally(() => {
        running.delete(run);
        if (stopped) return;
        const cancel = clock.setTimer(periodMs, () => {
          cancels.delete(cancel);
          tick();
        });
        cancels.add(cancel);
      });
      running.add(run);
    };
    tick();
  }

  let prevGCFailed = false;
  async function gcTick(): Promise<void> {
    try {
      await gc.garbageCollect();
      log.v(prevGCFailed ? 1 : 4).info("image garbage collection succeeded");
      prevGCFailed = false;
    } catch (err) {
      if (prevGCFailed) {
        log.error("image garbage collection failed multiple times in a row", { err: errorMessage(err) });
        // Only repeated failures become an event, as upstream.
        warn("ImageGCFailed", errorMessage(err));
      } else {
        log.error("image garbage collection failed once; stats initialization may not have completed yet", { err: errorMessage(err) });
      }
      prevGCFailed = true;
    }
  }

  const gc: ImageGC = {
    detectImages: () => serialized(async () => void (await detect(clock.now()))),
    garbageCollect: () => (disabled ? Promise.resolve() : serialized(collect)),
    freeSpace: (bytes) =>
      serialized(async () => {
        const freeTime = clock.now();
        const { freed, errors } = await freeFrom(await evictionOrder(freeTime), bytes, freeTime);
        if (errors.length) log.warn("some unused images could not be removed", { freed, errors });
        return freed;
      }),
    start() {
      if (stopped) throw new Error("image GC is disposed");
      every(IMAGE_DETECT_PERIOD_MS, () => gc.detectImages().catch((err) => log.info("failed to monitor images", { err: errorMessage(err) })));
      if (disabled) {
        log.v(2).info("imageGCHighThresholdPercent is 100 and imageMaximumGCAge is 0: image GC disabled");
        return;
      }
      beganGC = clock.now();
      every(IMAGE_GC_PERIOD_MS, gcTick);
    },
    async [Symbol.asyncDispose]() {
      stopped = true;
      for (const cancel of cancels) cancel();
      cancels.clear();
      await Promise.all([...running]);
    },
  };
  return gc;
}
