// Safety net shared by the harnesses: a test run that ends before stop()
// (a crash, a forgotten stop, Ctrl-C) must not leave containers, bridges,
// mounts, etcd or an API server behind. Each registered command runs
// synchronously in the process's exit event; SIGINT/SIGTERM are turned into
// a normal exit so that the event fires.
const commands = new Map<string, string[]>();
let hooked = false;

/** Runs `argv` at exit unless `release` is called first; `key` identifies the resource. */
export function cleanupAtExit(key: string, argv: string[]): { release(): void } {
  if (!hooked) {
    hooked = true;
    process.on("exit", () => {
      for (const cmd of commands.values()) Bun.spawnSync(cmd, { stdout: "ignore", stderr: "ignore" });
    });
    process.once("SIGINT", () => process.exit(130));
    process.once("SIGTERM", () => process.exit(143));
  }
  commands.set(key, argv);
  return { release: () => commands.delete(key) };
}
