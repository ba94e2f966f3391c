/** Renders any thrown value as a message, for logs and status reasons. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/** A setting that cannot work on this node, found after the config was read (the runtime disagrees, say): the process exits 2 with its message, as for a bad flag. */
export class StartupConfigError extends Error {
  override readonly name: string = "StartupConfigError";
}
