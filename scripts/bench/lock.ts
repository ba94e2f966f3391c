// The shared heavy-jobs lock for benches that run long (bench:idle, bench:scale):
// held with flock(1) only around their heavy steps, so idle windows leave the
// machine to others.

/** Runs `body` holding `lock` (flock(1) in a child that holds it until released), or directly without one. */
export async function heavy<T>(lock: string | undefined, what: string, body: () => Promise<T>, log: (line: string) => void = console.error): Promise<T> {
  if (!lock) return body();
  const t0 = performance.now();
  const holder = Bun.spawn(["flock", lock, "sh", "-c", "echo held; exec cat"], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
  const reader = holder.stdout.getReader();
  if ((await reader.read()).done) throw new Error(`flock ${lock} ended without taking the lock (exit ${await holder.exited})`);
  log(`holding ${lock} for ${what} (waited ${((performance.now() - t0) / 1000).toFixed(0)} s)`);
  const held = performance.now();
  try {
    return await body();
  } finally {
    holder.stdin.end();
    await holder.exited;
    log(`released ${lock} after ${((performance.now() - held) / 1000).toFixed(0)} s (${what})`);
  }
}
