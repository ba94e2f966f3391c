/**
 * One probe of one container instance (upstream pkg/kubelet/prober/worker.go).
 * A new container ID gets new workers (the manager's job), so counters and
 * the on-hold state reset on restart as upstream's containerID check does.
 *
 * Timeline of a worker:
 *   start(): the cached result is set to the initial value (liveness success,
 *   readiness failure, startup unknown), then the first attempt runs at
 *   once (or after firstAttemptDelayMs) and later ones every periodSeconds, counted from the start of the
 *   previous attempt, on the injected clock's timer. An attempt is skipped while:
 *   - the container started less than initialDelaySeconds ago;
 *   - the pod is being deleted (liveness and startup report success and stop);
 *   - the container has not started (liveness, readiness) or has (startup);
 *   - a liveness or startup failure put it on hold: the container is to be
 *     killed, probing it again could race the kill (upstream #21751).
 *   A result moves the cache only after successThreshold equal successes or
 *   failureThreshold equal failures in a row; an error ("unknown": the probe
 *   could not run; or an errored failure) is retried up to 3 times and then
 *   thrown away, never counted.
 *
 * Each worker awaits only its own probe; workers never wait for each other.
 */
import type { CriService } from "../cri/index.ts";
import { podEventRef, type EventRecorder } from "../events/recorder.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { runProbe, type ProbeTarget } from "./probes.ts";
import type { ResultsCache } from "./results.ts";
import { probeTitle, type ProbeSpec, type ProbeType } from "./schema.ts";
import { probeErrored, type ProbeOutcome, type ProbeResult } from "./types.ts";
import { podUid } from "../pods/identity.ts";

/** Upstream's maxProbeRetries: attempts per period when the probe errors. */
export const MAX_PROBE_RETRIES = 3;

export const initialResult = { liveness: "success", readiness: "failure", startup: "unknown" } as const satisfies Record<ProbeType, ProbeResult>;

export interface ProbeWorkerOptions {
  type: ProbeType;
  spec: ProbeSpec;
  /** Read at every attempt: the pod object and IP may be updated while the container runs. */
  target: () => ProbeTarget;
  /** When the container started (ms since the epoch), for initialDelaySeconds. */
  startedAt: number;
  /** How long start() waits before the first attempt (the manager's jitter after the agent started); 0 runs it at once. */
  firstAttemptDelayMs?: number;
  /** Whether the container's startup probe (if any) has succeeded. */
  isStarted: () => boolean;
  results: ResultsCache;
  cri: Pick<CriService, "execSync">;
  clock: Clock;
  logger: Logger;
  recorder?: EventRecorder;
  /**
   * The cached result before the first attempt, instead of the type's usual
   * one: a container the API's status already shows ready (or started) keeps
   * that until its probe says otherwise (a kubelet restart or switch).
   */
  initial?: ProbeResult;
  /** Called once when a liveness or startup failure reaches failureThreshold; the worker then holds. */
  onFailureThreshold?: () => void;
  /** Runs one probe; defaults to runProbe. Tests inject outcomes here. */
  probe?: (spec: ProbeSpec, target: ProbeTarget, signal: AbortSignal) => Promise<ProbeOutcome>;
}

export class ProbeWorker {
  private lastResult: ProbeResult | undefined;
  private resultRun = 0;
  private onHold = false;
  private stopped = false;
  private cancelTimer: (() => void) | undefined;
  private inFlight: Promise<void> | undefined;
  private triggered = false;
  private readonly abort = new AbortController();
  private readonly probe: NonNullable<ProbeWorkerOptions["probe"]>;

  constructor(private readonly opts: ProbeWorkerOptions) {
    this.probe = opts.probe ?? ((spec, target, signal) => runProbe(spec, target, { cri: opts.cri, signal }));
  }

  get containerId(): string {
    return this.opts.target().containerId;
  }

  /** Sets the initial result and runs the first attempt. Called once, by the manager. */
  start(): void {
    const t = this.opts.target();
    this.opts.results.set(t.containerId, this.opts.initial ?? initialResult[this.opts.type], podUid(t.pod));
    const delay = this.opts.firstAttemptDelayMs ?? 0;
    if (delay <= 0) {
      this.run();
      return;
    }
    this.cancelTimer = this.opts.clock.setTimer(delay, () => {
      this.cancelTimer = undefined;
      if (!this.stopped) this.run();
    });
  }

  /** Runs an attempt now instead of at the next period (upstream manualTriggerCh); one is queued if one is running. */
  trigger(): void {
    if (this.stopped) return;
    if (this.inFlight) {
      this.triggered = true;
      return;
    }
    this.cancelTimer?.();
    this.run();
  }

  /** Stops the schedule, cancels a running network probe and resolves when it has ended. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.abort.abort(new Error("probe worker stopped"));
    await this.inFlight;
  }

  private run(): void {
    const began = this.opts.clock.now();
    this.inFlight = this.attempt()
      .catch((err) => this.opts.logger.error("probe attempt failed", { err: errorMessage(err) }))
      .finally(() => {
        this.inFlight = undefined;
        if (this.stopped) return;
        if (this.triggered) {
          this.triggered = false;
          return this.run();
        }
        const wait = Math.max(0, began + this.opts.spec.periodSeconds * 1000 - this.opts.clock.now());
        this.cancelTimer = this.opts.clock.setTimer(wait, () => {
          this.cancelTimer = undefined;
          if (!this.stopped) this.run();
        });
      });
  }

  private async attempt(): Promise<void> {
    const { type, spec } = this.opts;
    if (this.onHold) return;
    const target = this.opts.target();
    const uid = podUid(target.pod);
    if (target.pod.metadata.deletionTimestamp && type !== "readiness") {
      // Upstream: a terminating pod is not restarted for failing probes.
      this.opts.results.set(target.containerId, "success", uid);
      this.stopped = true;
      return;
    }
    if (Math.floor((this.opts.clock.now() - this.opts.startedAt) / 1000) < spec.initialDelaySeconds) return;
    if ((type === "startup") === this.opts.isStarted()) return;

    let outcome: ProbeOutcome = { result: "unknown", output: "" };
    for (let i = 0; i < MAX_PROBE_RETRIES && !this.stopped; i++) {
      outcome = await this.probe(spec, target, this.abort.signal);
      if (!probeErrored(outcome)) break;
    }
    if (this.stopped) return;
    this.report(target, outcome);
    if (probeErrored(outcome)) return; // upstream worker.go:313-316: a probe error's result is thrown away

    if (this.lastResult === outcome.result) this.resultRun++;
    else {
      this.lastResult = outcome.result;
      this.resultRun = 1;
    }
    const threshold = outcome.result === "failure" ? spec.failureThreshold : spec.successThreshold;
    if (this.resultRun < threshold) return;
    this.opts.results.set(target.containerId, outcome.result, uid);
    if (type !== "readiness" && outcome.result === "failure") {
      this.onHold = true;
      this.resultRun = 0;
      this.opts.onFailureThreshold?.();
    }
  }

  /** Events and logs as upstream's prober.probe records them, for every attempt. */
  private report(target: ProbeTarget, outcome: ProbeOutcome): void {
    const title = probeTitle[this.opts.type];
    const ref = podEventRef(target.pod, target.container.name);
    if (probeErrored(outcome)) {
      this.opts.logger.v(1).info("probe errored", { output: outcome.output, probeResult: outcome.result });
      // Upstream prober.go:105: the state is the probe's own result beside its error (Failure for an HTTP body's read).
      this.opts.recorder?.event(ref, "Warning", "Unhealthy", `${title} probe errored and resulted in ${outcome.result} state: ${outcome.output}`);
    } else if (outcome.result === "failure") {
      this.opts.logger.v(1).info("probe failed", { output: outcome.output });
      this.opts.recorder?.event(ref, "Warning", "Unhealthy", `${title} probe failed: ${outcome.output}`);
    } else if (outcome.warning) {
      this.opts.recorder?.event(ref, "Warning", "ProbeWarning", `${title} probe warning: ${outcome.output}`);
    } else {
      this.opts.logger.v(4).info("probe succeeded");
    }
  }
}
