/**
 * Graceful node shutdown, after upstream pkg/kubelet/nodeshutdown: when the
 * node is about to shut down, pods stop in groups by priority, lowest
 * first, each group within its budget: with shutdownGracePeriod and
 * shutdownGracePeriodCriticalPods, regular pods get
 * (shutdownGracePeriod - shutdownGracePeriodCriticalPods) and critical pods
 * (priority >= 2000000000) get shutdownGracePeriodCriticalPods;
 * shutdownGracePeriodByPodPriority lists the groups itself. A pod's own
 * terminationGracePeriodSeconds wins when it is shorter. Stopped pods end
 * Failed with reason `Terminated`, message `Pod was terminated in response
 * to imminent node shutdown.`; from the start, the Node's Ready condition
 * says "node is shutting down" and admission refuses new pods
 * (`NodeShutdown`).
 *
 * What tells the agent the node is shutting down (main.ts chooses): with
 * systemd (or DBUS_SYSTEM_BUS_ADDRESS set), as upstream, logind: a "delay"
 * inhibitor lock held while running and the PrepareForShutdown signal
 * (logind.ts). Without systemd, SIGTERM is the shutdown signal when a
 * shutdown grace period is configured: the agent stops the pods as above,
 * then exits; SIGINT still stops only the agent. Bun does not deliver
 * SIGPWR to JavaScript, so that signal cannot be used.
 */
import type { KubeletConfiguration } from "../config/index.ts";
import { nodeRef, type EventRecorder } from "../events/recorder.ts";
import type { Pod } from "../pods/schema.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { SYSTEM_CRITICAL_PRIORITY } from "../pods/source.ts";
import { podUid } from "../pods/identity.ts";
import type { ActivePods, PodStopper } from "../pods/active.ts";
import type { RequestSink } from "../util/requests.ts";

export const NODE_SHUTDOWN_NOT_ADMITTED_REASON = "NodeShutdown";
export const NODE_SHUTDOWN_NOT_ADMITTED_MESSAGE = "Pod was rejected as the node is shutting down.";
/** What the Ready condition's message says while shutting down (upstream ShutdownStatus error). */
export const NODE_SHUTTING_DOWN = "node is shutting down";

/** What says the node is shutting down (logind, or SIGTERM without systemd): it tells the handler, once. */
export interface ShutdownTrigger {
  onShutdown(handler: ShutdownHandler): void;
}

/** What a node shutdown is handed to: the node shutdown manager. */
export interface ShutdownHandler {
  /** The node is shutting down: resolves once the pods are stopped. */
  shutdown(): Promise<void>;
  /** The shutdown was called off (logind's PrepareForShutdown(false)): pods are admitted again. */
  cancel(): void;
}

export interface ShutdownGroup {
  /** Pods with at least this priority (and less than the next group's) are in the group. */
  priority: number;
  gracePeriodSeconds: number;
}

/** Upstream migrateConfig, or shutdownGracePeriodByPodPriority sorted by priority; empty when graceful shutdown is off. */
export function shutdownGroups(k: Pick<KubeletConfiguration, "shutdownGracePeriod" | "shutdownGracePeriodCriticalPods" | "shutdownGracePeriodByPodPriority">): ShutdownGroup[] {
  if (k.shutdownGracePeriodByPodPriority.length) {
    return k.shutdownGracePeriodByPodPriority.map((g) => ({ priority: g.priority, gracePeriodSeconds: g.shutdownGracePeriodSeconds })).sort((a, b) => a.priority - b.priority);
  }
  const total = Math.floor(k.shutdownGracePeriod / 1000);
  const critical = Math.floor(k.shutdownGracePeriodCriticalPods / 1000);
  if (total <= 0 || critical > total) return [];
  return [
    { priority: 0, gracePeriodSeconds: total - critical },
    { priority: SYSTEM_CRITICAL_PRIORITY, gracePeriodSeconds: critical },
  ];
}

/** Upstream groupByPriority: each pod joins the last group whose priority it reaches (the first group takes lower ones). */
export function groupPods(pods: readonly Pod[], groups: readonly ShutdownGroup[]): { group: ShutdownGroup; pods: Pod[] }[] {
  const out = groups.map((group) => ({ group, pods: [] as Pod[] }));
  for (const pod of pods) {
    const priority = pod.spec.priority ?? 0;
    let index = 0;
    for (let i = 0; i < groups.length; i++) if (priority >= groups[i]!.priority) index = i;
    out[index]?.pods.push(pod);
  }
  return out;
}

export interface NodeShutdownOptions {
  groups: ShutdownGroup[];
  /** The pods to stop, and how (the pod workers): a pod is stopped once it is neither syncing nor terminating. */
  pods: Pick<ActivePods, "activePods"> & Pick<PodStopper, "shutdownPod" | "stageOf">;
  clock: Clock;
  logger: Logger;
  recorder?: EventRecorder;
  nodeName: string;
  /** Asked for a node status update now (the Ready condition changes). */
  nodeStatus?: RequestSink<void>;
  /** How often to look whether a group's pods stopped. */
  pollMs?: number;
}

export class NodeShutdownManager implements ShutdownHandler {
  private shuttingDown = false;
  private running: Promise<void> | undefined;

  constructor(private readonly opts: NodeShutdownOptions) {}

  /** The node is shutting down: Ready is False with this message (upstream ShutdownStatus). */
  status(): string | undefined {
    return this.shuttingDown ? NODE_SHUTTING_DOWN : undefined;
  }

  /** Upstream's admit handler: nothing new starts once the shutdown began. */
  admit(): { admit: true } | { admit: false; reason: string; message: string } {
    return this.shuttingDown ? { admit: false, reason: NODE_SHUTDOWN_NOT_ADMITTED_REASON, message: NODE_SHUTDOWN_NOT_ADMITTED_MESSAGE } : { admit: true };
  }

  /** The shutdown was cancelled (logind): admit pods and report Ready again; the next shutdown runs anew. */
  cancel(): void {
    this.shuttingDown = false;
    this.running = undefined;
    this.opts.nodeStatus?.request();
  }

  /** Stops every active pod, group by group; resolves when all stopped or every budget ran out. Idempotent. */
  shutdown(): Promise<void> {
    this.running ??= this.run();
    return this.running;
  }

  /** Nothing of the pod runs any more. */
  private stopped(uid: string): boolean {
    const stage = this.opts.pods.stageOf(uid);
    return stage !== "syncing" && stage !== "terminating";
  }

  private async run(): Promise<void> {
    const { clock, logger } = this.opts;
    this.shuttingDown = true;
    logger.info("Shutdown manager detected new shutdown event");
    this.opts.recorder?.event(nodeRef(this.opts.nodeName), "Normal", "Shutdown", "Shutdown manager detected shutdown event");
    this.opts.nodeStatus?.request();
    for (const { group, pods } of groupPods(this.opts.pods.activePods(), this.opts.groups)) {
      // No pods in this priority range: do not wait for it (upstream).
      if (!pods.length) continue;
      const started = clock.now();
      for (const pod of pods) {
        const own = pod.spec.terminationGracePeriodSeconds;
        const grace = own !== undefined && own !== null && own <= group.gracePeriodSeconds ? own : group.gracePeriodSeconds;
        logger.info("Shutdown manager killing pod with gracePeriod", {
          pod: `${pod.metadata.namespace}/${pod.metadata.name}`,
          gracePeriod: grace,
          priority: pod.spec.priority ?? 0,
        });
        this.opts.pods.shutdownPod(podUid(pod), grace);
      }
      const deadline = started + group.gracePeriodSeconds * 1000;
      while (!pods.every((p) => this.stopped(podUid(p)))) {
        if (clock.now() >= deadline) {
          logger.info("Shutdown manager pod killing time out", { gracePeriod: group.gracePeriodSeconds, priority: group.priority });
          break;
        }
        await clock.sleep(Math.min(this.opts.pollMs ?? 100, deadline - clock.now()));
      }
    }
    logger.info("Shutdown manager completed processing shutdown event, node will shutdown shortly");
  }
}
