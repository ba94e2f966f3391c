/**
 * Run-once mode (`--runonce`), after upstream pkg/kubelet/runonce.go: the
 * static pods of the first source snapshots (none within
 * runOnceManifestDelay is an error) are started once, and each is checked
 * up to runOnceMaxRetries times, 1 s then twice as long each time
 * (runOnceRetryDelay, runOnceRetryDelayBackoff), until every container
 * runs. The pods keep running after the agent exits.
 *
 * Where this differs from upstream, on purpose, so that the exit status
 * says whether every pod is up: a pod that reaches phase Failed (or that
 * admission rejects) counts as failed at once, instead of upstream's
 * "terminal, so done" with a nil error; Succeeded counts as success; and a
 * pod counts as running only when two checks a retry delay apart both see
 * every container running with the same restart counts, so that a
 * container that exits right after starting is not reported as started.
 */
import type { Pod } from "../pods/schema.ts";
import type { PodSource, SourceSnapshot } from "../sources/types.ts";
import type { PodStatusView } from "../status/index.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { podUid } from "../pods/identity.ts";

export const RUN_ONCE_MANIFEST_DELAY_MS = 1000;
export const RUN_ONCE_MAX_RETRIES = 10;
export const RUN_ONCE_RETRY_DELAY_MS = 1000;
export const RUN_ONCE_RETRY_DELAY_BACKOFF = 2;

export interface RunPodResult {
  /** Upstream format.Pod: `name_namespace(uid)`. */
  pod: string;
  ok: boolean;
  /** What the pod reached (Running, Succeeded) or why it failed. */
  detail: string;
}

export interface RunOnceReport {
  results: RunPodResult[];
  /** `error running pods: [...]` as upstream words it, when any failed. */
  error?: string;
}

export const formatPod = (pod: Pod): string => `${pod.metadata.name}_${pod.metadata.namespace ?? "default"}(${podUid(pod)})`;

/**
 * Wraps sources so that the first snapshot of each is known: run-once
 * starts what the sources hold at start and nothing that comes later.
 */
export function recordFirstSnapshots(sources: PodSource[], opts: { clock: Clock; delayMs?: number }): { sources: PodSource[]; firstPods: () => Promise<Pod[]> } {
  const first = new Map<string, Pod[]>();
  let arrived: () => void = () => {};
  const all = new Promise<void>((resolve) => (arrived = resolve));
  const wrapped = sources.map(
    (source): PodSource => ({
      name: source.name,
      start: (emit) =>
        source.start((snapshot: SourceSnapshot) => {
          if (!first.has(source.name)) {
            first.set(source.name, snapshot.pods);
            if (first.size === sources.length) arrived();
          }
          emit(snapshot);
        }),
      [Symbol.asyncDispose]: () => source[Symbol.asyncDispose](),
    }),
  );
  const firstPods = async (): Promise<Pod[]> => {
    if (!sources.length) throw new Error("no pod sources: run-once needs staticPodPath or staticPodURL");
    let cancel = () => {};
    const timedOut = new Promise<"timeout">((resolve) => (cancel = opts.clock.setTimer(opts.delayMs ?? RUN_ONCE_MANIFEST_DELAY_MS, () => resolve("timeout"))));
    const outcome = await Promise.race([all.then(() => "ok" as const), timedOut]);
    cancel();
    if (outcome === "timeout") throw new Error(`no pod manifest update after ${(opts.delayMs ?? RUN_ONCE_MANIFEST_DELAY_MS) / 1000}s`);
    return [...first.values()].flat();
  };
  return { sources: wrapped, firstPods };
}

/** Upstream isPodRunning: every app container of the spec is running. Their restart counts, or undefined when not. */
function runningRestarts(pod: Pod, status: PodStatusView): string | undefined {
  const counts: number[] = [];
  for (const c of pod.spec.containers) {
    const s = status.containerStatuses.find((cs) => cs.name === c.name);
    if (!s || !("running" in s.state)) return undefined;
    counts.push(s.restartCount);
  }
  return counts.join(",");
}

function failureOf(status: PodStatusView): string {
  if (status.reason) return `${status.reason}: ${status.message ?? ""}`.trim();
  const failed = status.containerStatuses.find((c) => "terminated" in c.state && c.state.terminated.exitCode !== 0);
  if (failed && "terminated" in failed.state) return `container "${failed.name}" failed: ${failed.state.terminated.reason} (exit code ${failed.state.terminated.exitCode})`;
  return "pod failed";
}

export interface RunOnceOptions {
  pods: Pod[];
  /** Each pod's latest status as the pod workers computed it (status/: LocalStatusStore). */
  statuses: { get(uid: string): PodStatusView | undefined };
  clock: Clock;
  logger: Logger;
  maxRetries?: number;
  retryDelayMs?: number;
  signal?: AbortSignal;
}

/** Upstream runPod for one pod, with the retry schedule; never throws. */
async function waitForPod(pod: Pod, opts: RunOnceOptions): Promise<RunPodResult> {
  const name = formatPod(pod);
  const maxRetries = opts.maxRetries ?? RUN_ONCE_MAX_RETRIES;
  let delay = opts.retryDelayMs ?? RUN_ONCE_RETRY_DELAY_MS;
  let seenRunning: string | undefined;
  for (let retry = 0; ; retry++) {
    const status = opts.statuses.get(podUid(pod));
    if (status?.phase === "Failed") return { pod: name, ok: false, detail: failureOf(status) };
    if (status?.phase === "Succeeded") return { pod: name, ok: true, detail: "Succeeded" };
    const running = status && runningRestarts(pod, status);
    if (running !== undefined && running === seenRunning) {
      opts.logger.info("Pod's containers running", { pod: name });
      return { pod: name, ok: true, detail: "Running" };
    }
    seenRunning = running;
    if (retry >= maxRetries) return { pod: name, ok: false, detail: `timeout error: pod "${name}" containers not running after ${maxRetries} retries` };
    if (opts.signal?.aborted) return { pod: name, ok: false, detail: "interrupted" };
    opts.logger.info("Pod's containers not running yet, waiting", { pod: name, delayMs: delay });
    await opts.clock.sleep(delay, opts.signal).catch(() => {});
    delay *= RUN_ONCE_RETRY_DELAY_BACKOFF;
  }
}

/** Waits for every pod in parallel, as upstream's runOnce; the report names the failed ones. */
export async function runOnce(opts: RunOnceOptions): Promise<RunOnceReport> {
  opts.logger.info("Waiting for pods", { numPods: opts.pods.length });
  const results = await Promise.all(opts.pods.map((p) => waitForPod(p, opts)));
  const failed = results.filter((r) => !r.ok).map((r) => r.pod);
  return { results, ...(failed.length ? { error: `error running pods: [${failed.join(" ")}]` } : {}) };
}
