/** Renders any thrown value as a message, for logs and status reasons. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
