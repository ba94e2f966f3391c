/**
 * Quantities printed as upstream's resource.Quantity.String() prints them
 * (k8s.io/apimachinery quantity.go CanonicalizeBytes), so eviction messages
 * read exactly like the kubelet's: 52428800 bytes is "50Mi", 1000000 bytes
 * is "1000000", 50000 inodes is "50k".
 */
import { parseQuantity } from "../config/index.ts";

/** BinarySI: bytes (from "Mi" and friends, or NewQuantity(n, BinarySI)); DecimalSI: counts and "M"/"k"; DecimalExponent: "1e3". */
export type QuantityFormat = "BinarySI" | "DecimalSI" | "DecimalExponent";

const BINARY = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
const DECIMAL: Record<number, string> = { [-9]: "n", [-6]: "u", [-3]: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E" };

/** The format upstream's ParseQuantity infers from the suffix. */
export function quantityFormatOf(q: string | number): QuantityFormat {
  if (typeof q === "number") return "DecimalSI";
  if (/(Ki|Mi|Gi|Ti|Pi|Ei)$/.test(q)) return "BinarySI";
  if (/[eE][+-]?\d+$/.test(q)) return "DecimalExponent";
  return "DecimalSI";
}

/** A quantity as written ("1024Mi", "128M", 100) in upstream's canonical form ("1Gi", "128M", "100"). */
export function canonicalQuantity(q: string | number): string {
  return formatQuantity(typeof q === "number" ? q : parseQuantity(q), quantityFormatOf(q));
}

export function formatQuantity(value: number, format: QuantityFormat): string {
  if (value === 0) return "0";
  const sign = value < 0 ? "-" : "";
  const abs = Math.abs(value);
  if (format === "BinarySI" && abs >= 1024 && Number.isInteger(abs)) {
    let n = abs;
    let k = 0;
    while (k < BINARY.length - 1 && n >= 1024 && n % 1024 === 0) {
      n /= 1024;
      k++;
    }
    return `${sign}${n}${BINARY[k]}`;
  }
  // Small or fractional BinarySI values print as DecimalSI, as upstream avoids rounding.
  const [mantissa, exponent] = decimalParts(abs);
  if (format === "DecimalExponent") return `${sign}${mantissa}${exponent === 0 ? "" : `e${exponent}`}`;
  return `${sign}${mantissa}${DECIMAL[exponent] ?? `e${exponent}`}`;
}

/** The largest exponent (a multiple of 3, -9..18) that leaves an integer mantissa. */
function decimalParts(abs: number): [number, number] {
  for (let e = 18; e >= -9; e -= 3) {
    if (e >= 0) {
      const scale = 10 ** e;
      if (Number.isInteger(abs) && abs % scale === 0) return [abs / scale, e];
      continue;
    }
    const m = abs * 10 ** -e;
    const r = Math.round(m);
    if (r !== 0 && Math.abs(m - r) < 1e-6) return [r, e];
  }
  // Below a nano upstream rounds up to 1n.
  return [Math.max(1, Math.ceil(abs * 1e9)), -9];
}
