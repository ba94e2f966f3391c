/**
 * Go duration strings ("1m0s", "10s", "500ms", "1h30m"), as the kubelet's
 * config file (metav1.Duration) and flags (pflag DurationVar) take them.
 * Mirrors Go's time.ParseDuration and time.Duration.String, but in
 * milliseconds: the rest of the agent works in milliseconds (timers, the
 * injected Clock), so the conversion happens once, here.
 */

/** A duration in milliseconds; fractional below one millisecond ("500us" is 0.5). */
export type Milliseconds = number;

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  "\u00b5s": 1e-3, // micro sign, accepted by Go
  "\u03bcs": 1e-3, // Greek mu, accepted by Go
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Go's limit: time.Duration is an int64 of nanoseconds. */
const MAX_MS = 9_223_372_036_854.775;

/** Parses a Go duration; throws an Error whose message says what is wrong. */
export function parseDuration(input: string): Milliseconds {
  let s = input;
  let sign = 1;
  if (s.startsWith("-") || s.startsWith("+")) {
    if (s[0] === "-") sign = -1;
    s = s.slice(1);
  }
  if (s === "0") return 0;
  if (s === "") throw new Error(`invalid duration ${JSON.stringify(input)}`);
  let total = 0;
  while (s !== "") {
    const m = /^(\d*)(?:\.(\d*))?/.exec(s);
    const whole = m?.[1] ?? "";
    const frac = m?.[2];
    if (whole === "" && (frac === undefined || frac === "")) throw new Error(`invalid duration ${JSON.stringify(input)}`);
    s = s.slice(m?.[0].length ?? 0);
    const unit = /^[^\d.]*/.exec(s)?.[0] ?? "";
    if (unit === "") throw new Error(`missing unit in duration ${JSON.stringify(input)}`);
    const scale = UNIT_MS[unit];
    if (scale === undefined) throw new Error(`unknown unit ${JSON.stringify(unit)} in duration ${JSON.stringify(input)}`);
    s = s.slice(unit.length);
    total += Number(`${whole || "0"}.${frac || "0"}`) * scale;
  }
  if (total > MAX_MS) throw new Error(`invalid duration ${JSON.stringify(input)}: out of range`);
  // Round away float noise ("0.1s" is 100 ms, not 100.00000000000001).
  return sign * (Math.round(total * 1e6) / 1e6);
}

export function isDuration(input: string): boolean {
  try {
    parseDuration(input);
    return true;
  } catch {
    return false;
  }
}

/** Renders milliseconds the way Go's Duration.String does ("1m0s", "100ms", "4h0m0s"). */
export function formatDuration(ms: Milliseconds): string {
  if (ms === 0) return "0s";
  const neg = ms < 0;
  let ns = Math.round(Math.abs(ms) * 1e6);
  let out: string;
  if (ns < 1e9) {
    if (ns < 1e3) out = `${ns}ns`;
    else if (ns < 1e6) out = `${trim(ns / 1e3)}\u00b5s`;
    else out = `${trim(ns / 1e6)}ms`;
  } else {
    const h = Math.floor(ns / 3.6e12);
    ns -= h * 3.6e12;
    const m = Math.floor(ns / 6e10);
    ns -= m * 6e10;
    const s = `${trim(ns / 1e9)}s`;
    out = h > 0 ? `${h}h${m}m${s}` : m > 0 ? `${m}m${s}` : s;
  }
  return neg ? `-${out}` : out;
}

function trim(n: number): string {
  return String(Number(n.toFixed(9)));
}
