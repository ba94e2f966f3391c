/**
 * The agent's parts, stopped in the reverse order they were built, each
 * by name and within a bound. AsyncDisposableStack waits for every
 * disposer for as long as it takes: one that waits on in-flight work (a
 * container stop with a long grace period, an API request, a CRI call)
 * holds every part after it open, and the agent does not exit on SIGTERM.
 *
 * Here each part's disposal is logged at v2 with its duration; one that
 * takes longer than `partTimeoutMs` is logged by name and left behind
 * while the next one stops; once `totalTimeoutMs` passed, the parts not
 * reached are all told to stop at once and dispose() rejects with a
 * StopTimeout naming what has not stopped. Pods are never touched by a
 * stop: what a part left in flight is done again by the next start.
 */
import type { Clock } from "./clock.ts";
import { errorMessage } from "./errors.ts";
import type { Logger } from "./log.ts";

export interface DisposalLimits {
  /** How long one part may take before the next one stops anyway. */
  partTimeoutMs: number;
  /** How long stopping every part may take; then dispose() rejects with StopTimeout. */
  totalTimeoutMs: number;
}

/** The agent's defaults: upstream's kubelet exits on SIGTERM at once, and systemd waits 90 s before SIGKILL. */
export const DEFAULT_DISPOSAL_LIMITS: DisposalLimits = { partTimeoutMs: 5_000, totalTimeoutMs: 15_000 };

/** Stopping did not finish within its deadline: `stuck` are still stopping, `unreached` were told to stop at the deadline. */
export class StopTimeout extends Error {
  constructor(
    readonly stuck: readonly string[],
    readonly unreached: readonly string[],
    readonly totalTimeoutMs: number,
  ) {
    super(
      `stopping took longer than ${totalTimeoutMs / 1000}s; still stopping: ${stuck.join(", ") || "(none)"}` +
        (unreached.length ? `; stopped without waiting: ${unreached.join(", ")}` : ""),
    );
    this.name = "StopTimeout";
  }
}

/** Some parts failed to stop (each was logged); the others were stopped. */
export class StopFailed extends Error {
  constructor(readonly failures: readonly { part: string; err: string }[]) {
    super(`stopping failed: ${failures.map((f) => `${f.part}: ${f.err}`).join("; ")}`);
    this.name = "StopFailed";
  }
}

interface Part {
  name: string;
  stop: () => unknown;
}

export class DisposalStack implements AsyncDisposable {
  private readonly parts: Part[] = [];
  /** Parts whose disposal started and has not settled: what a timeout names. */
  private readonly stopping = new Set<Part>();
  private disposed: Promise<void> | undefined;

  constructor(private readonly opts: { clock: Clock; logger: Logger; limits?: Partial<DisposalLimits> }) {}

  /** Registers `value` to be disposed under `name`; returns it. */
  use<T extends AsyncDisposable | Disposable>(name: string, value: T): T {
    const stop = Symbol.asyncDispose in value ? () => (value as AsyncDisposable)[Symbol.asyncDispose]() : () => (value as Disposable)[Symbol.dispose]();
    this.add(name, stop);
    return value;
  }

  /** Registers `fn` to run under `name` when the stack is disposed. */
  defer(name: string, fn: () => unknown): void {
    this.add(name, fn);
  }

  /** Parts still stopping (started, not settled). */
  pending(): string[] {
    return [...this.stopping].map((p) => p.name);
  }

  /** Stops every part, last registered first; idempotent. Rejects with StopTimeout or StopFailed. */
  dispose(): Promise<void> {
    this.disposed ??= this.run();
    return this.disposed;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose();
  }

  private add(name: string, stop: () => unknown): void {
    if (this.disposed) throw new Error(`cannot register ${name}: the stack is already disposed`);
    this.parts.push({ name, stop });
  }

  /** Starts one part's disposal: the promise settles when it did, with its error when it failed. */
  private start(part: Part): Promise<string | undefined> {
    this.stopping.add(part);
    const settled = (async () => {
      try {
        await part.stop();
        return undefined;
      } catch (err) {
        return errorMessage(err);
      }
    })();
    void settled.then(() => this.stopping.delete(part));
    return settled;
  }

  private async run(): Promise<void> {
    const { clock, logger } = this.opts;
    const limits = { ...DEFAULT_DISPOSAL_LIMITS, ...this.opts.limits };
    const log = logger.with({ component: "stop" });
    const started = clock.now();
    let cancelTotal = () => {};
    const total = new Promise<"total">((resolve) => (cancelTotal = clock.setTimer(limits.totalTimeoutMs, () => resolve("total"))));
    const failures: { part: string; err: string }[] = [];
    const parts = this.parts.splice(0).reverse();
    try {
      while (parts.length) {
        const part = parts.shift()!;
        const partStarted = clock.now();
        const settled = this.start(part);
        let cancelPart = () => {};
        const partTimeout = new Promise<"part">((resolve) => (cancelPart = clock.setTimer(limits.partTimeoutMs, () => resolve("part"))));
        const outcome = await Promise.race([settled.then((err) => ({ err })), partTimeout, total]);
        cancelPart();
        if (outcome === "total") {
          // Whatever is left is told to stop now, in no order, without waiting: the deadline is the deadline.
          const stuck = this.pending();
          for (const rest of parts) void this.start(rest).then((err) => err && log.v(2).info("a part failed to stop", { part: rest.name, err }));
          throw new StopTimeout(
            stuck,
            parts.map((p) => p.name),
            limits.totalTimeoutMs,
          );
        }
        if (outcome === "part") {
          log.warn("a part did not stop in time; stopping the next ones without it", { part: part.name, waitedMs: limits.partTimeoutMs });
          void settled.then((err) => log.info("a part left behind stopped", { part: part.name, ms: clock.now() - partStarted, ...(err ? { err } : {}) }));
          continue;
        }
        if (outcome.err !== undefined) {
          log.error("a part failed to stop", { part: part.name, err: outcome.err });
          failures.push({ part: part.name, err: outcome.err });
          continue;
        }
        log.v(2).info("stopped", { part: part.name, ms: clock.now() - partStarted });
      }
    } finally {
      cancelTotal();
    }
    const stuck = this.pending();
    log.v(2).info("every part was told to stop", { ms: clock.now() - started, ...(stuck.length ? { stillStopping: stuck.join(", ") } : {}) });
    if (failures.length) throw new StopFailed(failures);
  }
}
