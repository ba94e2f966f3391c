/**
 * The eviction manager (upstream pkg/kubelet/eviction/eviction_manager.go):
 * every period it reads a Summary, updates node conditions, and when a
 * threshold has been met past its grace period it first reclaims at node
 * level (container and image GC, for disk signals) and, if that was not
 * enough, evicts at most one pod, the first in the ranking for the starved
 * resource. Pods over their local ephemeral storage limits are evicted
 * first, all of them, whatever the thresholds say.
 *
 * The decision up to "what to act on" is the pure `evaluate` (evaluate.ts);
 * this file fetches, executes and keeps the state between passes.
 */
import type { KubeletConfiguration } from "../config/index.ts";
import { nodeRef, podEventRef, type EventRecorder } from "../events/recorder.ts";
import type { Pod } from "../pods/schema.ts";
import type { StatsProvider } from "../stats/types.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { admitUnderPressure, type EvictionAdmitResult } from "./admit.ts";
import { taintsFor, type PressureTaint } from "./conditions.ts";
import { evaluate, initialEvictionState, type EvictionState } from "./evaluate.ts";
import { localStorageViolations } from "./local-storage.ts";
import { evictionMessage } from "./message.ts";
import { makeSignalObservations, podStatsLookup, type PodStatsLookup } from "./observations.ts";
import { rankFuncFor } from "./rank.ts";
import { parseThresholdConfig, thresholdsMet } from "./thresholds.ts";
import { IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS, isHard, REASON, SIGNAL_TO_RESOURCE, type NodeConditionType, type Signal, type StarvedResource, type Threshold } from "./types.ts";
import { isCriticalPod } from "../pods/source.ts";
import type { ActivePods, PodStopper } from "../pods/active.ts";
import { podUid } from "../pods/identity.ts";

/**
 * What eviction asks of the pod workers: the candidates (pods admitted and
 * not terminating), stopping one, and whether a stopped one is gone.
 * `evict` is true when the pod is being evicted; false when it cannot be
 * (not running here), and the next pod in the ranking is tried. A throw is
 * logged and counts as this pass's eviction, as upstream counts a failed
 * kill. After an eviction the loop waits (polling every second, up to
 * 30 s) until the pod's worker took the eviction (its stage is no longer
 * `syncing`) before the next pass, where upstream waits for podCleanedUp.
 */
export type EvictionPods = Pick<ActivePods, "activePods"> & Pick<PodStopper, "evict" | "stageOf">;

/** What node-level reclaim frees before a pod is evicted for disk (upstream's nodeReclaimFuncs): dead containers first, then unused images. */
export interface NodeReclaim {
  containers?: ContainerGarbage;
  images?: UnusedImages;
}

/** Dead containers and sandboxes (the runtime's garbage collection). */
export interface ContainerGarbage {
  garbageCollect(): Promise<void>;
}

/** Unused images (the image GC): deleted until `bytes` are free, Infinity for all of them; resolves with the bytes freed. */
export interface UnusedImages {
  freeSpace(bytes: number): Promise<number>;
}

/** Whether images and container writable layers live on a filesystem of their own (upstream HasDedicatedImageFs). */
export interface ImageFsLayout {
  hasDedicatedImageFs(): boolean | Promise<boolean>;
}

export interface EvictionManagerOptions {
  config: KubeletConfiguration;
  stats: StatsProvider;
  pods: EvictionPods;
  /** Node-level reclaim tried before evicting for disk signals. */
  reclaim: NodeReclaim;
  clock: Clock;
  logger: Logger;
  recorder?: EventRecorder;
  /** The node's name, for the EvictionThresholdMet event; without it that event is not recorded. */
  nodeName?: string;
  /** Asked once, at the first pass (retried while it throws); default: one filesystem for everything. */
  imageFs?: ImageFsLayout;
  /** Pods never evicted and always admitted; default upstream's IsCriticalPod (static, mirror, priority ≥ 2000000000). */
  isCriticalPod?: (pod: Pod) => boolean;
}

export interface EvictionManager extends AsyncDisposable {
  /**
   * Starts the monitoring loop: a pass, then a wait of `periodMs` (upstream
   * 10 s) or, after an eviction, until the pod is gone (`EvictionPods`).
   * Called once by the agent after its pod workers run; later calls (and
   * calls after dispose) are ignored with a warning.
   */
  start(periodMs: number): void;
  /**
   * One pass: observe, update conditions, reclaim or evict. Resolves with
   * the pods evicted: at most one for a threshold, every offender for local
   * storage limits. Never rejects (failures are logged and evict nothing);
   * overlapping calls run one after another.
   */
  synchronize(): Promise<Pod[]>;
  /** The node's pressure conditions as of the last pass; all false before the first. */
  conditions(): { memoryPressure: boolean; diskPressure: boolean; pidPressure: boolean };
  /** The NoSchedule taints matching conditions() (upstream leaves them to the node lifecycle controller). */
  taints(): PressureTaint[];
  /** Whether a new pod may start under the current pressure; called by node admission, no side effect but a log line. */
  admitPod(pod: Pod): EvictionAdmitResult;
  /** Stops the loop and waits for a pass in flight; idempotent. */
  [Symbol.asyncDispose](): Promise<void>;
}

const POD_CLEANUP_TIMEOUT_MS = 30_000;
const POD_CLEANUP_POLL_MS = 1_000;

const podName = (pod: Pod) => `${pod.metadata.namespace ?? "default"}/${pod.metadata.name ?? ""}`;

/** Throws EvictionConfigError when the eviction settings are invalid (upstream fails kubelet start). */
export function createEvictionManager(opts: EvictionManagerOptions): EvictionManager {
  const { config, logger: log } = opts;
  const { thresholds, ignored } = parseThresholdConfig(config);
  if (ignored.length) log.warn("eviction manager: containerfs thresholds are derived from nodefs/imagefs; ignoring", { settings: ignored.join(",") });
  const isCritical = opts.isCriticalPod ?? isCriticalPod;
  let state: EvictionState = initialEvictionState();
  let dedicatedImageFs: boolean | undefined;
  const reportedMissing = new Set<Signal>();
  let queue: Promise<unknown> = Promise.resolve();
  const abort = new AbortController();
  let loop: Promise<void> | undefined;

  /** upstream evictPod: never a critical pod; the Evicted event on the pod. */
  async function evict(pod: Pod, grace: number, message: string, annotations?: Record<string, string>): Promise<boolean> {
    if (isCritical(pod)) {
      log.error("eviction manager: cannot evict a critical pod", { pod: podName(pod) });
      return false;
    }
    // The annotations are those upstream puts on the Evicted event; the event here carries the message only.
    log.v(3).info("evicting pod", { pod: podName(pod), podUID: pod.metadata.uid, message, ...annotations });
    try {
      const ok = opts.pods.evict(podUid(pod), message, grace);
      if (!ok) {
        log.info("eviction manager: pod is not running here; trying the next", { pod: podName(pod) });
        return false;
      }
      log.info("eviction manager: pod is evicted successfully", { pod: podName(pod) });
    } catch (err) {
      log.error("eviction manager: pod failed to evict", { pod: podName(pod), err: errorMessage(err) });
    }
    opts.recorder?.event(podEventRef(pod), "Warning", REASON, message);
    return true;
  }

  /** upstream: soft evictions get min(evictionMaxPodGracePeriod, the pod's own); a negative maximum defers to the pod. */
  function softGrace(pod: Pod): number {
    const max = config.evictionMaxPodGracePeriod;
    const own = pod.spec.terminationGracePeriodSeconds;
    if (max < 0) return own ?? 30;
    return own === undefined || own === null ? max : Math.min(max, own);
  }

  /** upstream buildSignalToNodeReclaimFuncs: container GC then image GC, unless nodefs holds neither. */
  function reclaimersFor(signal: Signal): { name: string; run: () => Promise<unknown> }[] {
    const disk = signal.startsWith("nodefs.") || signal.startsWith("imagefs.");
    if (!disk || (dedicatedImageFs && signal.startsWith("nodefs."))) return [];
    const { containers, images } = opts.reclaim;
    return [
      ...(containers ? [{ name: "containerGC", run: () => containers.garbageCollect() }] : []),
      ...(images ? [{ name: "imageGC", run: async () => log.info("eviction manager: image garbage collection freed", { bytes: await images.freeSpace(Infinity) }) }] : []),
    ];
  }

  /** upstream reclaimNodeLevelResources: true when, re-observed, no threshold (with min reclaim) is met any more. */
  async function reclaimNodeLevel(signal: Signal, resource: StarvedResource): Promise<boolean> {
    const reclaimers = reclaimersFor(signal);
    if (!reclaimers.length) return false;
    for (const r of reclaimers) {
      try {
        await r.run();
      } catch (err) {
        log.info("eviction manager: unexpected error when attempting to reduce resource pressure", { resourceName: resource, reclaim: r.name, err: errorMessage(err) });
      }
    }
    let summary;
    try {
      summary = await opts.stats.summary();
    } catch (err) {
      log.error("eviction manager: failed to get summary stats after resource reclaim", { err: errorMessage(err) });
      return false;
    }
    return thresholdsMet(thresholds, makeSignalObservations(summary), true).length === 0;
  }

  async function evictForLocalStorage(pods: readonly Pod[], stats: PodStatsLookup): Promise<Pod[]> {
    const evicted: Pod[] = [];
    for (const v of localStorageViolations(pods, stats, dedicatedImageFs ?? false)) {
      if (await evict(v.pod, IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS, v.message)) evicted.push(v.pod);
    }
    return evicted;
  }

  async function pass(): Promise<Pod[]> {
    if (thresholds.length === 0 && !config.localStorageCapacityIsolation) return [];
    if (dedicatedImageFs === undefined) {
      try {
        dedicatedImageFs = (await opts.imageFs?.hasDedicatedImageFs()) ?? false;
      } catch (err) {
        log.error("eviction manager: failed to get HasDedicatedImageFs", { err: errorMessage(err) });
        return [];
      }
    }
    const activePods = opts.pods.activePods();
    let summary;
    try {
      summary = await opts.stats.summary();
    } catch (err) {
      log.error("eviction manager: failed to get summary stats", { err: errorMessage(err) });
      return [];
    }
    const observations = makeSignalObservations(summary);
    const stats = podStatsLookup(summary);
    const result = evaluate({ thresholds, state, observations, now: opts.clock.now(), pressureTransitionPeriodMs: config.evictionPressureTransitionPeriod });
    state = result.state;
    for (const signal of result.missing) {
      // Upstream logs this every pass; once at info is enough to explain a silent threshold.
      (reportedMissing.has(signal) ? log.v(4) : log).info("eviction manager: no observation found for eviction signal", { signal });
      reportedMissing.add(signal);
    }
    if (state.nodeConditions.length) log.v(3).info("eviction manager: node conditions", { nodeCondition: state.nodeConditions.join(",") });

    if (config.localStorageCapacityIsolation) {
      const evicted = await evictForLocalStorage(activePods, stats);
      if (evicted.length) return evicted;
    }
    const threshold: Threshold | undefined = result.actOn[0];
    if (!threshold) {
      log.v(3).info("eviction manager: no resources are starved");
      return [];
    }
    const resource = SIGNAL_TO_RESOURCE[threshold.signal];
    log.info("eviction manager: attempting to reclaim", { resourceName: resource });
    if (opts.nodeName) opts.recorder?.event(nodeRef(opts.nodeName), "Warning", "EvictionThresholdMet", `Attempting to reclaim ${resource}`);
    if (await reclaimNodeLevel(threshold.signal, resource)) {
      log.info("eviction manager: able to reduce resource pressure without evicting pods.", { resourceName: resource });
      return [];
    }
    log.info("eviction manager: must evict pod(s) to reclaim", { resourceName: resource });
    if (activePods.length === 0) {
      log.error("eviction manager: eviction thresholds have been met, but no pods are active to evict");
      return [];
    }
    const ranked = rankFuncFor(threshold.signal, dedicatedImageFs)(activePods, stats);
    log.info("eviction manager: pods ranked for eviction", { pods: ranked.map(podName).join(",") });
    // At most one pod per pass: the next pass sees what this eviction freed.
    for (const pod of ranked) {
      const grace = isHard(threshold) ? IMMEDIATE_EVICTION_GRACE_PERIOD_SECONDS : softGrace(pod);
      const { message, annotations } = evictionMessage(resource, pod, stats, result.actOn, observations);
      if (await evict(pod, grace, message, annotations)) return [pod];
    }
    log.info("eviction manager: unable to evict any pods from the node");
    return [];
  }

  function synchronize(): Promise<Pod[]> {
    const run = queue.then(() =>
      pass().catch((err) => {
        log.error("eviction manager: failed to synchronize", { err: errorMessage(err) });
        return [] as Pod[];
      }),
    );
    queue = run;
    return run;
  }

  /** upstream waitForPodsCleanup */
  async function waitForCleanup(pods: Pod[], cleanedUp: (pod: Pod) => boolean): Promise<void> {
    const deadline = opts.clock.now() + POD_CLEANUP_TIMEOUT_MS;
    while (opts.clock.now() < deadline) {
      await opts.clock.sleep(POD_CLEANUP_POLL_MS, abort.signal);
      if (pods.every(cleanedUp)) {
        log.info("eviction manager: pods successfully cleaned up", { pods: pods.map(podName).join(",") });
        return;
      }
    }
    log.info("eviction manager: timed out waiting for pods to be cleaned up", { pods: pods.map(podName).join(",") });
  }

  async function run(periodMs: number): Promise<void> {
    try {
      while (!abort.signal.aborted) {
        const evicted = await synchronize();
        if (abort.signal.aborted) return;
        if (evicted.length) {
          log.info("eviction manager: pods evicted, waiting for pod to be cleaned up", { pods: evicted.map(podName).join(",") });
          await waitForCleanup(evicted, (pod) => opts.pods.stageOf(podUid(pod)) !== "syncing");
        } else {
          await opts.clock.sleep(periodMs, abort.signal);
        }
      }
    } catch (err) {
      if (!abort.signal.aborted) log.error("eviction manager: loop stopped", { err: errorMessage(err) });
    }
  }

  const has = (c: NodeConditionType) => state.nodeConditions.includes(c);
  return {
    start(periodMs) {
      if (loop || abort.signal.aborted) {
        log.warn("eviction manager: start called twice or after dispose; ignored");
        return;
      }
      loop = run(periodMs);
    },
    synchronize,
    conditions: () => ({ memoryPressure: has("MemoryPressure"), diskPressure: has("DiskPressure"), pidPressure: has("PIDPressure") }),
    taints: () => taintsFor(state.nodeConditions),
    admitPod(pod) {
      const result = admitUnderPressure(pod, state.nodeConditions, isCritical);
      if (!result.admit) log.info("eviction manager: failed to admit pod to node", { pod: podName(pod), nodeCondition: state.nodeConditions.join(",") });
      return result;
    },
    async [Symbol.asyncDispose]() {
      abort.abort(new Error("eviction manager stopped"));
      await loop;
      await queue.catch(() => {});
    },
  };
}
