/**
 * The plugin registration watcher (upstream pkg/kubelet/pluginmanager): a
 * plugin registers with the node agent by creating a unix socket below
 * `<root-dir>/plugins_registry` and serving pluginregistration.v1
 * Registration on it (for CSI drivers, node-driver-registrar does). Every
 * second the directory is scanned (upstream's reconciler period): a new
 * socket, or one replaced since (its mtime changed), is dialed; GetInfo says
 * the plugin's type, name, endpoint and versions; the handler for the type
 * validates and registers it, and the outcome goes back to the plugin with
 * NotifyRegistrationStatus; a failed registration is retried with a
 * back-off. A socket that is gone (or replaced) deregisters its plugin.
 */
import { mkdirSync, readdirSync, statSync } from "node:fs";
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
  /** Rescan period; upstream's reconciler runs every second. */
  periodMs?: number;
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
  private running: Promise<void> = Promise.resolve();

  constructor(private readonly opts: PluginWatcherOptions) {}

  /** Creates the directory and runs the first scan; then scans every period until disposed. */
  async start(): Promise<void> {
    mkdirSync(this.opts.dir, { recursive: true, mode: 0o750 });
    await this.scanNow();
    this.schedule();
  }

  private schedule() {
    if (this.stopped) return;
    this.stopTimer = this.opts.clock.setTimer(this.opts.periodMs ?? 1000, () => {
      this.scanNow().finally(() => this.schedule());
    });
  }

  /** One reconciliation of the directory against what is registered (serialised). */
  scanNow(): Promise<void> {
    this.running = this.running.then(() => this.reconcile());
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
    await this.running;
  }
}
