/**
 * The OOM watcher (upstream pkg/kubelet/oom): kernel OOM kills become
 * events. A system-wide OOM (the limit hit is the root cgroup's) is a
 * Warning `SystemOOM` on the Node, with upstream's message. A kill inside
 * one of this node's pods (bunlet extension; upstream records no event for
 * it) is a Warning `OOMKilling` on the pod; the container's own
 * termination reason `OOMKilled` comes from the runtime, as upstream.
 *
 * The kernel log is read from /dev/kmsg without blocking, once a second;
 * what it held before the watcher started is skipped (upstream replays the
 * whole buffer and re-reports old kills after a restart).
 */
import { closeSync, constants, openSync, readSync } from "node:fs";
import { nodeRef, podEventRef, type EventRecorder } from "../events/recorder.ts";
import type { Pod } from "../pods/schema.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { OomParser, parseKmsgRecord, podUidOfCgroup, type OomInstance } from "./parser.ts";

export { OomParser, parseKmsgRecord, podUidOfCgroup, type OomInstance } from "./parser.ts";

/** Where kernel records come from; `read` never blocks. */
export interface KernelLog {
  /** Records written since the last call (raw /dev/kmsg records). */
  read(): string[];
  close(): void;
}

/** /dev/kmsg, non-blocking; opened at the end of what the kernel holds now. */
export function openKmsg(path = "/dev/kmsg"): KernelLog {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  const buffer = Buffer.alloc(16 * 1024); // one record per read; a record is at most about 8 KiB
  const drain = (): string[] => {
    const out: string[] = [];
    for (;;) {
      try {
        const n = readSync(fd, buffer, 0, buffer.length, null);
        if (n <= 0) return out;
        out.push(buffer.toString("utf8", 0, n));
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "EAGAIN" || code === "EWOULDBLOCK") return out;
        if (code === "EPIPE") continue; // records were overwritten before we read them; go on with the next
        throw err;
      }
    }
  };
  drain(); // skip the kills from before this start
  return { read: drain, close: () => closeSync(fd) };
}

/** /dev/kmsg when this process may read it; upstream logs and runs without an OOM watcher otherwise. */
export function tryOpenKmsg(logger: Logger, path = "/dev/kmsg"): KernelLog | undefined {
  try {
    return openKmsg(path);
  } catch (err) {
    logger.warn("Failed to start OOM watcher: cannot read the kernel log", { path, err: errorMessage(err) });
    return undefined;
  }
}

/**
 * The pods this node has a status for (the local status store), terminal
 * ones included: a pod whose only container was killed may be terminal by
 * the next poll. Kills in other cgroups are not reported on a pod.
 */
export interface ReportedPods {
  reportedPod(uid: string): Pod | undefined;
}

export interface OomWatcherOptions {
  kernelLog: KernelLog;
  recorder: EventRecorder;
  nodeName: string;
  pods: ReportedPods;
  clock: Clock;
  logger: Logger;
  pollMs?: number;
}

export class OomWatcher implements Disposable {
  private readonly parser = new OomParser();
  private cancel: (() => void) | undefined;
  private stopped = false;

  constructor(private readonly opts: OomWatcherOptions) {}

  start(): this {
    const tick = () => {
      if (this.stopped) return;
      this.poll();
      this.cancel = this.opts.clock.setTimer(this.opts.pollMs ?? 1000, tick);
    };
    tick();
    return this;
  }

  /** Reads what the kernel wrote since the last poll; exposed for tests. */
  poll(): void {
    let raw: string[];
    try {
      raw = this.opts.kernelLog.read();
    } catch (err) {
      this.opts.logger.warn("reading the kernel log failed; OOM kills are not reported", { err: errorMessage(err) });
      this.stop();
      return;
    }
    for (const line of raw) {
      const record = parseKmsgRecord(line);
      const oom = record && this.parser.feed(record);
      if (oom) this.report(oom);
    }
  }

  private report(oom: OomInstance): void {
    const { recorder, logger } = this.opts;
    if (oom.oomCgroup === "/") {
      logger.v(1).info("Got sys oom event", { pid: oom.pid, process: oom.processName });
      const victim = oom.processName && oom.pid ? `, victim process: ${oom.processName}, pid: ${oom.pid}` : "";
      recorder.event(nodeRef(this.opts.nodeName), "Warning", "SystemOOM", `System OOM encountered${victim}`);
      return;
    }
    const uid = podUidOfCgroup(oom.taskCgroup);
    const pod = uid ? this.opts.pods.reportedPod(uid) : undefined;
    if (!pod) return;
    const ref = podEventRef(pod);
    logger.info("container OOM kill", { pod: `${ref.namespace}/${ref.name}`, pid: oom.pid, process: oom.processName, cgroup: oom.oomCgroup });
    recorder.event(ref, "Warning", "OOMKilling", `Memory cgroup out of memory: Killed process ${oom.pid} (${oom.processName})`);
  }

  private stop(): void {
    this.stopped = true;
    this.cancel?.();
  }

  [Symbol.dispose](): void {
    this.stop();
    this.opts.kernelLog.close();
  }
}
