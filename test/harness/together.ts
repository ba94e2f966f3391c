// Test files start containerd and a control plane side by side in beforeAll.
// With a bare Promise.all, one failing start leaves the other running, unowned,
// for the rest of the run (every file shares one bun process): its stop() is
// never called because the destructuring assignment never happens.

export interface Stoppable {
  stop(): Promise<unknown>;
}

/** Awaits every start; when any fails, stops the ones that started and rethrows the first failure. */
export async function startTogether<T extends readonly Stoppable[]>(starts: { [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const settled = await Promise.allSettled(starts);
  const failure = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (!failure) return settled.map((s) => (s as PromiseFulfilledResult<Stoppable>).value) as unknown as T;
  await Promise.allSettled(settled.flatMap((s) => (s.status === "fulfilled" ? [s.value.stop()] : [])));
  throw failure.reason;
}
