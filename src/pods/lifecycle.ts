/**
 * The lifecycle of one pod as its worker sees it (upstream pod_workers.go
 * keeps the same stages as flags; here they are one typed value).
 *
 *   syncing ──(deleted | completed | evicted | deadlineExceeded | nodeShutdown)──► terminating
 *   terminating ──(killed)──► terminated
 *   terminated ──(deleted, then resources removed)──► finished
 *
 * - syncing: the pod is desired; each sync converges the runtime toward it.
 * - terminating: containers and sandbox are being stopped within the grace
 *   period; spec updates are ignored (upstream: a pod never runs again once
 *   termination started), only a shorter grace period is taken.
 * - terminated: nothing runs; containers are kept for logs while the pod is
 *   still in the config (a completed pod), and removed once it is deleted.
 * - finished: nothing of the pod is left in the runtime; the worker is dropped,
 *   and no update of the same UID starts it again until housekeeping forgets
 *   it (sync/podworkers.ts).
 */
export type PodLifecycle =
  | { stage: "syncing" }
  | { stage: "terminating"; gracePeriodSeconds: number; reason: TerminationReason; deleted: boolean; message?: string }
  | { stage: "terminated"; deleted: boolean }
  | { stage: "finished" };

export type TerminationReason = "deleted" | "completed" | "evicted" | "deadlineExceeded" | "nodeShutdown";

export type LifecycleEvent =
  | { type: "deleted"; gracePeriodSeconds: number }
  | { type: "completed"; gracePeriodSeconds: number }
  /** The eviction manager chose this pod: it stops for good, Failed with reason Evicted. */
  | { type: "evicted"; gracePeriodSeconds: number; message: string }
  /** activeDeadlineSeconds passed: the pod stops for good, Failed with reason DeadlineExceeded. */
  | { type: "deadlineExceeded"; gracePeriodSeconds: number }
  /** The node is shutting down (graceful node shutdown): the pod stops for good, Failed with reason Terminated. */
  | { type: "nodeShutdown"; gracePeriodSeconds: number }
  | { type: "killed" }
  | { type: "cleanedUp" };

export const initialLifecycle: PodLifecycle = { stage: "syncing" };

/** The one place where stages change; illegal events leave the state as is. */
export function transition(state: PodLifecycle, event: LifecycleEvent): PodLifecycle {
  switch (state.stage) {
    case "syncing":
      switch (event.type) {
        case "deleted":
          return { stage: "terminating", gracePeriodSeconds: event.gracePeriodSeconds, reason: "deleted", deleted: true };
        case "completed":
          return { stage: "terminating", gracePeriodSeconds: event.gracePeriodSeconds, reason: "completed", deleted: false };
        case "evicted":
          return { stage: "terminating", gracePeriodSeconds: event.gracePeriodSeconds, reason: "evicted", deleted: false, message: event.message };
        case "deadlineExceeded":
          return { stage: "terminating", gracePeriodSeconds: event.gracePeriodSeconds, reason: "deadlineExceeded", deleted: false };
        case "nodeShutdown":
          return { stage: "terminating", gracePeriodSeconds: event.gracePeriodSeconds, reason: "nodeShutdown", deleted: false };
        case "killed":
        case "cleanedUp":
          return state;
        default:
          return assertNever(event);
      }
    case "terminating":
      switch (event.type) {
        case "deleted":
          return {
            ...state,
            deleted: true,
            gracePeriodSeconds: Math.min(state.gracePeriodSeconds, event.gracePeriodSeconds),
          };
        case "killed":
          return { stage: "terminated", deleted: state.deleted };
        case "completed":
        case "evicted":
        case "deadlineExceeded":
        case "nodeShutdown":
        case "cleanedUp":
          return state;
        default:
          return assertNever(event);
      }
    case "terminated":
      switch (event.type) {
        case "deleted":
          return { stage: "terminated", deleted: true };
        case "cleanedUp":
          return state.deleted ? { stage: "finished" } : state;
        case "killed":
        case "completed":
        case "evicted":
        case "deadlineExceeded":
        case "nodeShutdown":
          return state;
        default:
          return assertNever(event);
      }
    case "finished":
      return state;
    default:
      return assertNever(state);
  }
}

export function assertNever(value: never): never {
  throw new Error(`unexpected value ${JSON.stringify(value)}`);
}
