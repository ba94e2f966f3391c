/**
 * The CRI log format containerd writes for every container
 * (`<RFC 3339 time> <stdout|stderr> <F|P> <text>`), read back by the
 * /containerLogs handler and by the termination message fallback.
 */

export interface CriLogEntry {
  time: string;
  timeMs: number;
  stream: "stdout" | "stderr";
  partial: boolean;
  text: string;
}

/** One CRI log line (without its newline), or undefined when malformed (upstream skips those). */
export function parseCriLine(line: string): CriLogEntry | undefined {
  const a = line.indexOf(" ");
  if (a < 0) return undefined;
  const b = line.indexOf(" ", a + 1);
  if (b < 0) return undefined;
  const stream = line.slice(a + 1, b);
  if (stream !== "stdout" && stream !== "stderr") return undefined;
  const c = line.indexOf(" ", b + 1);
  const tags = c < 0 ? line.slice(b + 1) : line.slice(b + 1, c);
  const time = line.slice(0, a);
  const timeMs = Date.parse(time);
  if (Number.isNaN(timeMs) || !tags) return undefined;
  return { time, timeMs, stream, partial: tags.split(":").includes("P"), text: c < 0 ? "" : line.slice(c + 1) };
}
