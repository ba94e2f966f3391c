/**
 * A probe's timeoutSeconds on one event loop. A Go kubelet's dial or request
 * deadline runs beside its I/O; here the timer and the socket's events share
 * the agent's single loop, so when the loop stalls (a busy or starved process:
 * two cores under a conformance run) past the deadline, the timer can fire
 * before the connect that completed meanwhile is even seen, and a healthy
 * container fails its probe (one failure is a restart at failureThreshold 1;
 * measured: a 300 ms stall of a 200 ms tcp probe timed out in 5 of 10 runs,
 * on a listening socket). So the deadline counts the time the loop was
 * awake: a timer that fires more than `toleranceMs` late grants the time it
 * overslept again, and expires only when it fires on time.
 */

/** How late a timer may fire and still count as on time. */
export const LATE_TOLERANCE_MS = 50;

/**
 * Calls `onExpire` once `timeoutMs` of awake time have passed; returns a
 * cancel function. `now` is a monotonic clock (ms).
 */
export function awakeDeadline(timeoutMs: number, onExpire: () => void, now: () => number = () => performance.now(), toleranceMs = LATE_TOLERANCE_MS): () => void {
  let due = now() + timeoutMs;
  let timer: ReturnType<typeof setTimeout>;
  const arm = (ms: number) => {
    timer = setTimeout(() => {
      const late = now() - due;
      if (late <= toleranceMs) return onExpire();
      due = now() + late;
      arm(late);
    }, ms);
  };
  arm(timeoutMs);
  return () => clearTimeout(timer);
}
