/**
 * Container log rotation, after upstream's containerLogManager
 * (pkg/kubelet/logs/container_log_manager.go).
 *
 * Every 10 s, for each running container, the log file the runtime writes
 * (ContainerStatus.logPath, e.g. `.../0.log`) is checked; at or over
 * `maxSizeBytes` it is rotated:
 *   1. leftovers of an interrupted rotation go: `X.log.*.tmp`, and any
 *      `X.log.<ts>` whose `X.log.<ts>.gz` exists;
 *   2. the oldest rotated files go until `maxFiles - 2` remain (the current
 *      file and the one about to be rotated make `maxFiles`);
 *   3. rotated files not yet compressed are gzipped (`.tmp`, then renamed);
 *   4. `X.log` is renamed `X.log.<YYYYMMDD-hhmmss>` (local time, as Go's
 *      Format) and the runtime is asked to reopen its log
 *      (ReopenContainerLog), which makes a fresh `X.log`. If that fails the
 *      file is renamed back, so the next round retries.
 * So at rest: the current file, the newest rotated file uncompressed (the
 * runtime may have been writing to it until the reopen, and readers such as
 * `kubectl logs -f` may still be on it), older ones `.gz`.
 *
 * A running container whose log file is missing (an earlier reopen was lost)
 * gets a reopen to recover it, as upstream.
 */
import { createReadStream, createWriteStream } from "node:fs";
import { readdir, rename, rm, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import { ContainerState, isNotFound, type CriService } from "../cri/index.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";

/** Upstream logMonitorPeriod (containerLogMonitorInterval's default). */
export const LOG_MONITOR_PERIOD_MS = 10_000;
const COMPRESS_SUFFIX = ".gz";
const TMP_SUFFIX = ".tmp";

export interface LogRotationOptions {
  cri: Pick<CriService, "listContainers" | "containerStatus" | "reopenContainerLog">;
  /** containerLogMaxSize in bytes: a log this big or bigger is rotated. Negative disables rotation (upstream). */
  maxSizeBytes: number;
  /** containerLogMaxFiles: the current file plus rotated ones, at most; must be at least 2. */
  maxFiles: number;
  clock: Clock;
  logger: Logger;
}

export interface LogRotation extends AsyncDisposable {
  /**
   * One round over the running containers. A failure with one container is
   * logged and does not stop the others; rejects only when the containers
   * cannot be listed. Rounds never overlap (a second call waits).
   */
  rotateAll(): Promise<void>;
  /** A round now and then `periodMs` (default 10 s) after each round ends. */
  start(periodMs?: number): void;
}

/** `20060102-150405` in Go's layout: the clock's local time. */
export function rotationTimestamp(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}`;
}

const isENOENT = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code === "ENOENT";

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if (isENOENT(err)) return false;
    throw err;
  }
}

/** `X.log.*` beside `log`, by listing the directory (no glob: paths may hold glob characters). */
async function rotatedFiles(log: string): Promise<string[]> {
  const prefix = basename(log) + ".";
  const dir = dirname(log);
  return (await readdir(dir)).filter((n) => n.startsWith(prefix)).map((n) => join(dir, n));
}

/** Upstream isInUse: temporaries are not, compressed files are, a file whose `.gz` exists is not. */
function splitUnused(logs: string[]): { inuse: string[]; unused: string[] } {
  const all = new Set(logs);
  const inuse: string[] = [];
  const unused: string[] = [];
  for (const l of logs) {
    if (l.endsWith(TMP_SUFFIX) || (!l.endsWith(COMPRESS_SUFFIX) && all.has(l + COMPRESS_SUFFIX))) unused.push(l);
    else inuse.push(l);
  }
  return { inuse, unused };
}

/** gzip `log` to `log.gz` through `log.tmp` (upstream's names), then remove `log`. */
async function compress(log: string): Promise<void> {
  const tmp = log + TMP_SUFFIX;
  try {
    await pipeline(createReadStream(log), createGzip(), createWriteStream(tmp, { mode: 0o644 }));
    await rename(tmp, log + COMPRESS_SUFFIX);
  } finally {
    await rm(tmp, { force: true });
  }
  await rm(log);
}

export function createLogRotation(opts: LogRotationOptions): LogRotation {
  const { cri, clock, maxSizeBytes, maxFiles } = opts;
  if (!Number.isInteger(maxFiles) || maxFiles <= 1) throw new Error(`invalid MaxFiles ${maxFiles}, must be > 1`);
  const log = opts.logger.with({ component: "logRotation" });
  const disabled = maxSizeBytes < 0;

  async function rotateLog(id: string, path: string): Promise<void> {
    const rotated = `${path}.${rotationTimestamp(clock.now())}`;
    // Two rotations within one second would reuse the name and replace the
    // first rotated file (upstream's rename would); wait for the next round.
    if ((await exists(rotated)) || (await exists(rotated + COMPRESS_SUFFIX))) {
      log.v(2).info("rotated log name taken; rotating next round", { containerID: id, path: rotated });
      return;
    }
    const { inuse, unused } = splitUnused(await rotatedFiles(path));
    for (const l of unused) await rm(l, { force: true });
    // Oldest first: the timestamp suffix sorts by time.
    inuse.sort();
    const keep = Math.max(0, maxFiles - 2);
    const excess = inuse.length - keep;
    for (const l of inuse.slice(0, Math.max(0, excess))) await rm(l, { force: true });
    for (const l of inuse.slice(Math.max(0, excess))) if (!l.endsWith(COMPRESS_SUFFIX)) await compress(l);

    await rename(path, rotated);
    try {
      await cri.reopenContainerLog(id);
    } catch (err) {
      // Put it back so that the next round tries again; the runtime still
      // writes to this file (by descriptor), so nothing is lost.
      await rename(rotated, path).catch((renameErr) =>
        log.error("failed to rename rotated log back", { rotatedLog: rotated, newLog: path, containerID: id, err: errorMessage(renameErr) }),
      );
      throw new Error(`failed to reopen container log ${id}: ${errorMessage(err)}`);
    }
    log.v(2).info("rotated container log", { containerID: id, path, rotated });
  }

  // A container's log path never changes: each running container's status is read once, not every round (upstream
  // reads it every 10 s; with 110 pods that was the agent's most frequent CRI call when idle).
  const logPaths = new Map<string, string>();

  async function logPathOf(id: string): Promise<string | undefined> {
    const known = logPaths.get(id);
    if (known !== undefined) return known;
    let path: string | undefined;
    try {
      path = (await cri.containerStatus(id)).status?.logPath;
    } catch (err) {
      // Gone since the list: nothing to rotate.
      if (isNotFound(err)) return undefined;
      throw err;
    }
    if (path) logPaths.set(id, path);
    return path;
  }

  async function processContainer(id: string): Promise<void> {
    const path = await logPathOf(id);
    if (!path) return;
    let size: number;
    try {
      size = (await stat(path)).size;
    } catch (err) {
      if (!isENOENT(err)) throw err;
      // A rotation whose reopen was lost (e.g. the agent restarted between
      // rename and reopen): have the runtime make the file again.
      await cri.reopenContainerLog(id);
      size = (await stat(path)).size;
    }
    if (size < maxSizeBytes) return;
    await rotateLog(id, path);
  }

  async function round(): Promise<void> {
    if (disabled) return;
    const containers = await cri.listContainers({ state: { state: ContainerState.CONTAINER_RUNNING } });
    const running = new Set(containers.map((c) => c.id));
    for (const id of logPaths.keys()) if (!running.has(id)) logPaths.delete(id);
    for (const c of containers) {
      // Non-running containers write nothing more; upstream skips them too.
      if (c.state !== ContainerState.CONTAINER_RUNNING) continue;
      try {
        await processContainer(c.id);
      } catch (err) {
        log.error("failed to rotate log for container", { containerID: c.id, err: errorMessage(err) });
      }
    }
  }

  let chain: Promise<unknown> = Promise.resolve();
  const rotateAll = (): Promise<void> => {
    const run = chain.then(round, round);
    chain = run.catch(() => {});
    return run;
  };

  let stopped = false;
  let cancel: (() => void) | undefined;
  let inFlight: Promise<void> | undefined;

  return {
    rotateAll,
    start(periodMs = LOG_MONITOR_PERIOD_MS) {
      if (stopped) throw new Error("log rotation is disposed");
      if (disabled) {
        log.v(2).info("containerLogMaxSize is negative: container log rotation disabled");
        return;
      }
      const tick = () => {
        inFlight = rotateAll()
          .catch((err) => log.error("failed to rotate container logs", { err: errorMessage(err) }))
          .finally(() => {
            inFlight = undefined;
            if (!stopped) cancel = clock.setTimer(periodMs, tick);
          });
      };
      tick();
    },
    async [Symbol.asyncDispose]() {
      stopped = true;
      cancel?.();
      await inFlight;
    },
  };
}
