/**
 * The plugin registration watcher (upstream pkg/kubelet/pluginmanager): a
 * plugin registers with the node agent by creating a unix socket below
 * `<root-dir>/plugins_registry` and serving pluginregistration.v1
 * Registration on it (for CSI drivers, node-driver-registrar does). The
 * directory is scanned at start and whenever inotify reports a change below
 * it (upstream's pluginwatcher: fsnotify, and a walk of the directory at
 * start); a slow rescan is the safety net for a missed event, and without
 * inotify the scan runs every second (upstream's reconciler period). A new
 * socket, or one replaced since (its mtime changed), is dialed; GetInfo says
 * the plugin's type, name, endpoint and versions; the handler for the type
 * validates and registers it, and the outcome goes back to the plugin with
 * NotifyRegistrationStatus; a failed registration is retried with a
 * back-off. A socket that is gone (or replaced) deregisters its plugin.
 */
import { type FSWatcher, mkdirSync, readdirSync, statSync, watch } from "node:fs";
import { join } from "node:path";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import { dialUnix } from "../util/grpc.ts";
import type { Logger } from "../util/log.ts";
import { RegistrationClient } from "./gen/pluginregistration/api.client.ts";

/** What a plugin type's handler does (upstream PluginHandler): CSI drivers are one type. */
export interface PluginHandler {
  /** Throws with the reason the plugin is refused (sent back to it). */
  validate(name: string, endpoint: string, versions: string[]): void;
  /** Throws when registration fails (sent back to the plugin; retried with a back-off). */
  register(name: string, endpoint: string, versions: string[]): Promise<void>;
  deregister(name: string): Promise<void>;
}

export const CSI_PLUGIN_TYPE = "CSIPlugin";

export interface PluginWatcherOptions {
  /** `<root-dir>/plugins_registry`. */
  dir: string;
  handlers: Record<string, PluginHandler>;
  clock: Clock;
  logger: Logger;
  /** Scan period when inotify cannot watch the directory; upstream's reconciler runs every second. */
  periodMs?: number;
  /** Scan period while inotify watches the directory: only a safety net for a missed event. */
  resyncPeriodMs?: number;
  /** Watches the directory and everything below it; node:fs `watch` (inotify) unless a test injects one. */
  watchDir?: (dir: string, onChange: () => void, onError: (err: unknown) => void) => { close(): void };
}

/** Without inotify, upstream's reconciler period. */
const POLL_PERIOD_MS = 1000;
/**
 * With inotify a change is seen at once; the rescan only catches an event the
 * kernel dropped (its queue overflowed), so once a minute is plenty and a
 * quiet node does not read the directory every second.
 */
const RESYNC_PERIOD_MS = 60_000;

function watchRecursively(dir: string, onChange: () => void, onError: (err: unknown) => void): FSWatcher {
  // Bun adds a watch for each directory created below, as upstream's pluginwatcher does for fsnotify.
  const watcher = watch(dir, { recursive: true }, () => onChange());
  watcher.on("error", onError);
  return watcher;
}

/** Upstream dials a plugin and asks GetInfo within 10 s. */
const CALL_TIMEOUT_MS = 10_000;

interface Registered {
  type: string;
  name: string;
  mtimeMs: number;
}

export class PluginWatcher implements AsyncDisposable {
  /** Socket path → what registered through it. */
  private readonly registered = new Map<string, Registered>();
  /** Socket path → a failed registration: retried with a doubling back-off, or at once when the socket is replaced. */
  private readonly failed = new Map<string, { mtimeMs: number; retryAt: number; delayMs: number }>();
  private stopTimer: (() => void) | undefined;
  private stopped = false;
  private started = false;
  private running: Promise<void> = Promise.resolve();
  /** A scan is queued behind the running one: further events need no other. */
  private scanQueued = false;
  private watcher: { close(): void } | undefined;

  constructor(private readonly opts: PluginWatcherOptions) {}

  /** Creates the directory, watches it and runs the first scan; then scans on each change (or every period without a watch) until disposed. */
  async start(): Promise<void> {
    mkdirSync(this.opts.dir, { recursive: true, mode: 0o750 });
    // Watching before the first scan, so that nothing created meanwhile is missed.
    this.startWatch();
    this.started = true;
    await this.scanNow();
  }

  /** Whether inotify watches the directory (otherwise it is scanned every `periodMs`). */
  watching(): boolean {
    return this.watcher !== undefined;
  }

  private startWatch() {
    const watchDir = this.opts.watchDir ?? watchRecursively;
    try {
      this.watcher = watchDir(
        this.opts.dir,
        () => void this.scanSoon(),
        (err) => this.watchFailed(err),
      );
    } catch (err) {
      this.watchFailed(err);
    }
  }

  private watchFailed(err: unknown) {
    this.watcher?.close();
    this.watcher = undefined;
    if (this.stopped) return;
    // Not silent: registration still works, only by scanning every period.
    this.opts.logger.warn("cannot watch the plugin registration directory; scanning it every period instead", {
      dir: this.opts.dir,
      periodMs: this.opts.periodMs ?? POLL_PERIOD_MS,
      err: errorMessage(err),
    });
    this.schedule();
  }

  /** The next timed scan: a failed registration's retry when due sooner, else the period (short without a watch, a safety net with one). */
  private schedule() {
    this.stopTimer?.();
    this.stopTimer = undefined;
    if (this.stopped || !this.started) return;
    let delayMs = this.watcher ? (this.opts.resyncPeriodMs ?? RESYNC_PERIOD_MS) : (this.opts.periodMs ?? POLL_PERIOD_MS);
    const now = this.opts.clock.now();
    for (const f of this.failed.values()) delayMs = Math.min(delayMs, Math.max(0, f.retryAt - now));
    this.stopTimer = this.opts.clock.setTimer(delayMs, () => {
      this.stopTimer = undefined;
      void this.scanNow();
    });
  }

  /** A scan after the running one, shared by every change reported meanwhile. */
  private scanSoon(): Promise<void> {
    if (this.scanQueued || this.stopped) return this.running;
    return this.scanNow();
  }

  /** One reconciliation of the directory against what is registered (serialised); the next timed scan is planned after it. */
  scanNow(): Promise<void> {
    this.scanQueued = true;
    this.running = this.running.then(async () => {
      this.scanQueued = false;
      try {
        await this.reconcile();
      } catch (err) {
        this.opts.logger.warn("plugin registration directory scan failed", { dir: this.opts.dir, err: errorMessage(err) });
      }
      this.schedule();
    });
    return this.running;
  }

  /** Plugins registered, by socket path (for tests and logs). */
  plugins(): { socket: string; type: string; name: string }[] {
    return [...this.registered].map(([socket, r]) => ({ socket, type: r.type, name: r.name }));
  }

  private sockets(dir: string, out = new Map<string, number>()): Map<string, number> {
    let entries: import("node:fs").Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return out;
    }
    for (const e of entries) {
      // Upstream ignores hidden files and directories.
      if (e.name.startsWith(".")) continue;
      const path = join(dir, e.name);
      if (e.isDirectory()) this.sockets(path, out);
      else if (e.isSocket()) {
        try {
          out.set(path, statSync(path).mtimeMs);
        } catch {
          // gone meanwhile
        }
      }
    }
    return out;
  }

  private async reconcile(): Promise<void> {
    if (this.stopped) return;
    const desired = this.sockets(this.opts.dir);
    for (const [path, r] of [...this.registered]) {
      if (desired.get(path) === r.mtimeMs) continue;
      this.registered.delete(path);
      this.opts.logger.info("plugin socket removed or replaced; deregistering", { socket: path, type: r.type, name: r.name });
      await this.opts.handlers[r.type]?.deregister(r.name).catch((err) => this.opts.logger.warn("plugin deregistration failed", { name: r.name, err: errorMessage(err) }));
    }
    for (const path of this.failed.keys()) if (!desired.has(path)) this.failed.delete(path);
    for (const [path, mtimeMs] of desired) {
      if (this.registered.has(path)) continue;
      const failed = this.failed.get(path);
      if (failed?.mtimeMs === mtimeMs && this.opts.clock.now() < failed.retryAt) continue;
      if (this.stopped) return;
      if (await this.register(path, mtimeMs)) this.failed.delete(path);
      else {
        // Upstream's operation back-off: 500 ms doubling to 2 min 2 s.
        const delayMs = failed?.mtimeMs === mtimeMs ? Math.min(failed.delayMs * 2, 122_000) : 500;
        this.failed.set(path, { mtimeMs, retryAt: this.opts.clock.now() + delayMs, delayMs });
      }
    }
  }

  private async register(path: string, mtimeMs: number): Promise<boolean> {
    const { logger } = this.opts;
    const transport = dialUnix(path);
    const client = new RegistrationClient(transport);
    const notify = async (registered: boolean, error: string) => {
      try {
        await client.notifyRegistrationStatus({ pluginRegistered: registered, error }, { timeout: CALL_TIMEOUT_MS });
      } catch (err) {
        logger.warn("could not tell the plugin its registration status", { socket: path, err: errorMessage(err) });
      }
    };
    try {
      let info: Awaited<ReturnType<RegistrationClient["getInfo"]>>["response"];
      try {
        ({ response: info } = await client.getInfo({}, { timeout: CALL_TIMEOUT_MS }));
      } catch (err) {
        logger.warn("GetInfo failed on a plugin registration socket", { socket: path, err: errorMessage(err) });
        return false;
      }
      const handler = this.opts.handlers[info.type];
      if (!handler) {
        const error = `no handler registered for plugin type: ${info.type} at socket ${path}`;
        logger.warn(error);
        await notify(false, error);
        return false;
      }
      // An empty endpoint means the plugin serves its own API on the registration socket.
      const endpoint = info.endpoint || path;
      try {
        handler.validate(info.name, endpoint, info.supportedVersions);
      } catch (err) {
        const error = `RegisterPlugin error -- plugin validation failed with err: ${errorMessage(err)}`;
        logger.warn(error, { socket: path, name: info.name });
        await notify(false, error);
        return false;
      }
      try {
        await handler.register(info.name, endpoint, info.supportedVersions);
      } catch (err) {
        const error = `RegisterPlugin error -- plugin registration failed with err: ${errorMessage(err)}`;
        logger.warn(error, { socket: path, name: info.name });
        await notify(false, error);
        return false;
      }
      this.registered.set(path, { type: info.type, name: info.name, mtimeMs });
      logger.info("plugin registered", { socket: path, type: info.type, name: info.name, endpoint, versions: info.supportedVersions });
      await notify(true, "");
      return true;
    } finally {
      transport.close();
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stopped = true;
    this.stopTimer?.();
    this.watcher?.close();
    this.watcher = undefined;
    await this.running;
  }
}
