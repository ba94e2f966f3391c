/**
 * The systemd-logind side of graceful node shutdown, as upstream's
 * nodeshutdown/systemd: a "delay" inhibitor lock on "shutdown" held while
 * the node runs, logind's PrepareForShutdown(true) as the signal, the lock
 * released once pods are stopped, and taken again when the shutdown is
 * cancelled (PrepareForShutdown(false)).
 *
 * Bun cannot receive the lock's file descriptor over D-Bus (no SCM_RIGHTS
 * on its sockets), so systemd's own tools do the bus work: `systemd-inhibit`
 * holds the lock for as long as it runs, and `busctl monitor --json=short`
 * streams the signal; `busctl get-property` reads InhibitDelayMaxUSec. All
 * of them talk to the system bus, or to DBUS_SYSTEM_BUS_ADDRESS when set.
 */
import type { Subprocess } from "bun";
import * as v from "valibot";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { ShutdownHandler, ShutdownTrigger } from "./index.ts";

export interface LogindInhibitor {
  /** logind's InhibitDelayMaxUSec, in milliseconds: how long a delay lock may hold a shutdown. */
  inhibitDelayMaxMs(): Promise<number>;
  /** Takes the delay lock on shutdown; resolves once it is held. Idempotent. */
  acquire(): Promise<void>;
  /** Lets the shutdown go on. Idempotent. */
  release(): Promise<void>;
  /** Calls `onPrepare` for every PrepareForShutdown signal until closed. */
  watch(onPrepare: (active: boolean) => void): void;
  close(): Promise<void>;
}

const INHIBIT_WHY = "Kubelet needs time to handle node shutdown";
const MATCH = "type='signal',sender='org.freedesktop.login1',interface='org.freedesktop.login1.Manager',member='PrepareForShutdown'";
const SignalMessage = v.looseObject({ member: v.literal("PrepareForShutdown"), payload: v.looseObject({ data: v.tuple([v.boolean()]) }) });

async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of stream) {
    buffer += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      yield buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
    }
  }
}

/** systemd-inhibit and busctl as child processes. */
export function logindTools(opts: { logger: Logger }): LogindInhibitor {
  let lock: Subprocess<"ignore", "pipe", "pipe"> | undefined;
  let monitor: Subprocess<"ignore", "pipe", "pipe"> | undefined;
  const stop = async (p: Subprocess | undefined) => {
    if (!p) return;
    p.kill("SIGTERM");
    await p.exited;
  };
  return {
    async inhibitDelayMaxMs() {
      const p = Bun.spawn(["busctl", "--system", "get-property", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "InhibitDelayMaxUSec"], {
        stdout: "pipe",
        stderr: "pipe",
      });
      const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
      const m = /^t (\d+)/.exec(out.trim());
      if (code !== 0 || !m) throw new Error(`reading logind's InhibitDelayMaxUSec failed: ${err.trim() || out.trim()}`);
      return Number(m[1]) / 1000;
    },
    async acquire() {
      if (lock) return;
      // The command runs only once the lock is held; its "locked" line says so. systemd-inhibit keeps the lock's descriptor itself.
      const p = Bun.spawn(["systemd-inhibit", "--what=shutdown", "--who=kubelet", `--why=${INHIBIT_WHY}`, "--mode=delay", "sh", "-c", "echo locked; exec sleep infinity"], {
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
      lock = p;
      const first = await lines(p.stdout).next();
      if (first.value !== "locked") {
        lock = undefined;
        const err = await new Response(p.stderr).text();
        await stop(p);
        throw new Error(`taking logind's shutdown delay lock failed: ${err.trim() || "systemd-inhibit ended"}`);
      }
    },
    async release() {
      const p = lock;
      lock = undefined;
      await stop(p);
    },
    watch(onPrepare) {
      const p = Bun.spawn(["busctl", "--system", "monitor", "--json=short", `--match=${MATCH}`], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
      monitor = p;
      void (async () => {
        for await (const line of lines(p.stdout)) {
          if (!line.startsWith("{")) continue; // "Monitoring bus message stream."
          let parsed: unknown;
          try {
            parsed = JSON.parse(line);
          } catch {
            continue;
          }
          const signal = v.safeParse(SignalMessage, parsed);
          if (signal.success) onPrepare(signal.output.payload.data[0]);
        }
        if (monitor === p) opts.logger.error("the PrepareForShutdown monitor ended; node shutdown is no longer handled", { err: (await new Response(p.stderr).text()).trim() });
      })();
    },
    async close() {
      const p = monitor;
      monitor = undefined;
      await Promise.all([stop(p), this.release()]);
    },
  };
}

/**
 * Upstream's systemd shutdown manager start(): check InhibitDelayMaxSec
 * against the grace period (upstream rewrites logind's configuration when
 * it is too short; this agent only warns), take the lock, then on
 * PrepareForShutdown(true) stop the pods and release the lock; on
 * PrepareForShutdown(false) take it again and admit pods again.
 */
export class LogindShutdownTrigger implements ShutdownTrigger {
  private shuttingDown = false;

  constructor(private readonly opts: { inhibitor: LogindInhibitor; gracePeriodMs: number; logger: Logger }) {}

  onShutdown(handler: ShutdownHandler): void {
    void this.start(handler).catch((err) => this.opts.logger.error("Failed to start node shutdown manager", { err: errorMessage(err) }));
  }

  private async start(handler: ShutdownHandler): Promise<void> {
    const { inhibitor, logger, gracePeriodMs } = this.opts;
    const delayMs = await inhibitor.inhibitDelayMaxMs();
    if (delayMs < gracePeriodMs) {
      logger.warn("logind's InhibitDelayMaxSec is less than the shutdown grace period: shutdown will not wait that long (raise InhibitDelayMaxSec in logind.conf)", {
        inhibitDelayMaxSec: delayMs / 1000,
        shutdownGracePeriodSec: gracePeriodMs / 1000,
      });
    }
    inhibitor.watch((active) => {
      if (active && !this.shuttingDown) {
        this.shuttingDown = true;
        logger.info("Shutdown manager detected new shutdown event, isNodeShuttingDownNow", { active });
        void handler
          .shutdown()
          .catch((err) => logger.error("stopping pods for the node shutdown failed", { err: errorMessage(err) }))
          .finally(() => inhibitor.release().catch((err) => logger.error("releasing the shutdown delay lock failed", { err: errorMessage(err) })));
      } else if (!active && this.shuttingDown) {
        this.shuttingDown = false;
        logger.info("Shutdown manager detected that the shutdown was cancelled");
        handler.cancel();
        void inhibitor.acquire().catch((err) => logger.error("taking the shutdown delay lock again failed", { err: errorMessage(err) }));
      }
    });
    await inhibitor.acquire();
    logger.info("Creating node shutdown manager", { shutdownGracePeriodRequested: `${gracePeriodMs / 1000}s`, inhibitDelayMaxSec: delayMs / 1000 });
  }

  close(): Promise<void> {
    return this.opts.inhibitor.close();
  }
}
