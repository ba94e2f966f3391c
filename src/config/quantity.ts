/**
 * Kubernetes resource quantities ("100Mi", "1Gi", "500m", "1e3") and the
 * percentages eviction thresholds and qosReserved also take ("10%").
 * Grammar after k8s.io/apimachinery/pkg/api/resource (quantity.go):
 *   <signedNumber><suffix>, suffix one of Ki Mi Gi Ti Pi Ei | m "" k M G T P E | e<int> E<int>
 */

const QUANTITY = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))([eE][+-]?\d+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$/;

const SUFFIX: Record<string, number> = {
  "": 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/**
 * Parses a quantity into its plain value: bytes for memory and storage
 * ("1Gi" is 1073741824), cores for CPU ("500m" is 0.5), a count otherwise.
 * Throws on anything that is not a quantity, percentages included.
 */
export function parseQuantity(s: string): number {
  const m = QUANTITY.exec(s);
  if (!m) throw new Error(`${JSON.stringify(s)} is not a quantity (expected a number with an optional suffix, like "100Mi", "1Gi", "500m")`);
  const value = Number(m[1]);
  const suffix = m[2] ?? "";
  // "E" alone is exa; "E3" or "e3" is a decimal exponent.
  const scale = /^[eE][+-]?\d+$/.test(suffix) ? 10 ** Number(suffix.slice(1)) : SUFFIX[suffix];
  if (scale === undefined) throw new Error(`${JSON.stringify(s)} has an unknown suffix`);
  const result = value * scale;
  if (!Number.isFinite(result)) throw new Error(`${JSON.stringify(s)} is out of range`);
  return result;
}

export function isQuantity(s: string): boolean {
  return QUANTITY.test(s);
}

/** An eviction threshold (or qosReserved) value: an absolute quantity or a percentage. */
export type Threshold = { kind: "quantity"; value: number } | { kind: "percentage"; fraction: number };

/**
 * Parses "100Mi" or "10%". After upstream eviction.parseThresholdStatement:
 * percentages must lie in [0%, 100%], quantities must not be negative.
 */
export function parseThreshold(s: string): Threshold {
  if (s.endsWith("%")) {
    const num = s.slice(0, -1);
    const pct = /^[+-]?(\d+(\.\d*)?|\.\d+)$/.test(num) ? Number(num) : NaN;
    if (Number.isNaN(pct)) throw new Error(`${JSON.stringify(s)} is not a percentage like "10%"`);
    if (pct < 0 || pct > 100) throw new Error(`percentage ${JSON.stringify(s)} must be between 0% and 100%`);
    return { kind: "percentage", fraction: pct / 100 };
  }
  const value = parseQuantity(s);
  if (value < 0) throw new Error(`${JSON.stringify(s)} must not be negative`);
  return { kind: "quantity", value };
}

export function isThreshold(s: string): boolean {
  try {
    parseThreshold(s);
    return true;
  } catch {
    return false;
  }
}
