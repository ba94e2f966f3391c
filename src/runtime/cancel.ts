/**
 * Why a pod's sync step is cancelled: the reason of the AbortSignal the pod
 * workers give each step, as upstream cancels the sync's context. The two
 * causes end a step differently: when the pod must stop, the step ends as
 * upstream's cancelled calls do (a failed pull or hook reported, the pod's
 * termination next); when the agent stops, upstream's kubelet just exits, so
 * the step leaves nothing behind (no event, no kill, no status): the next
 * start finds the pod as the runtime holds it.
 */
export class PodSyncCancelledError extends Error {
  constructor(
    why: string,
    /** The agent stops, not the pod: the step is abandoned without a trace. */
    readonly agentStopping = false,
  ) {
    super(`pod sync cancelled: ${why}`);
    this.name = "PodSyncCancelledError";
  }
}

/** The step's signal aborted because the agent stops. */
export function agentStopping(signal: AbortSignal | undefined): signal is AbortSignal {
  return signal?.aborted === true && signal.reason instanceof PodSyncCancelledError && signal.reason.agentStopping;
}

/** Ends the step with the signal's reason when the agent stops: nothing after this point may act or report. */
export function throwIfAgentStopping(signal: AbortSignal | undefined): void {
  if (agentStopping(signal)) throw signal.reason;
}
