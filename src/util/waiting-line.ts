/**
 * A place in a first-come waiting line whose owner may give up: `admit`
 * runs when the line's head is called (synchronously, so that a slot handed
 * over cannot be taken by anyone else first) and its value resolves the
 * wait; an abort of `signal` first takes the place out of the line and
 * rejects with the signal's reason, holding up nobody behind it.
 */
export function waitInLine<T>(line: (() => void)[], admit: () => T, signal?: AbortSignal): Promise<T> {
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const called = () => {
      signal?.removeEventListener("abort", leave);
      resolve(admit());
    };
    const leave = () => {
      line.splice(line.indexOf(called), 1);
      reject(signal!.reason);
    };
    line.push(called);
    signal?.addEventListener("abort", leave, { once: true });
  });
}
