/** A manager's state file (cpu_manager_state, memory_manager_state): on the host, or a string in tests. */
import { readFileSync, renameSync, writeFileSync } from "node:fs";

/** Where a state is kept: a file on the host, a string in tests. */
export interface StateStore {
  /** The stored text, or undefined when there is none yet. */
  read(): string | undefined;
  write(text: string): void;
}

export function fileStateStore(path: string): StateStore {
  return {
    read() {
      try {
        return readFileSync(path, "utf8");
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        throw err;
      }
    },
    // Written aside and renamed over the old file, so a crash leaves the old state or the new one.
    write(text) {
      const tmp = `${path}.tmp`;
      writeFileSync(tmp, text, { mode: 0o644 });
      renameSync(tmp, path);
    },
  };
}
