/**
 * resource.Quantity as k8s.io/apimachinery v0.34 decodes it from JSON
 * (ParseQuantity) and as v1 defaulting rounds it (SetDefaults_ResourceList:
 * RoundUp to milli scale), in the internal layout go-spew prints:
 * `{i:{value scale} d:{Dec} s Format}`. The fast path keeps an int64
 * mantissa and a decimal scale, and the original string when it is already
 * canonical; anything else becomes an inf.Dec (a big.Int and a scale).
 */
export class QuantityError extends Error {
  override readonly name = "QuantityError";
}

export interface InfDec {
  unscaled: { neg: boolean; abs: bigint[] | null };
  scale: number;
}

export interface QuantityValue {
  i: { value: bigint; scale: number };
  d: { Dec: InfDec | null };
  s: string;
  Format: "DecimalSI" | "BinarySI" | "DecimalExponent";
}

const MAX_INT64 = (1n << 63n) - 1n;
const MIN_INT64 = -(1n << 63n);
const NANO = -9;

interface Dec {
  unscaled: bigint;
  scale: number;
}

function parseQuantityString(str: string): { positive: boolean; value: string; num: string; denom: string; suffix: string } {
  let positive = true;
  let pos = 0;
  const end = str.length;
  if (str[0] === "-") {
    positive = false;
    pos++;
  } else if (str[0] === "+") pos++;
  for (let i = pos; ; i++) {
    if (i >= end) return { positive, value: "0", num: "0", denom: "", suffix: "" };
    if (str[i] !== "0") break;
    pos++;
  }
  const isDigit = (c: string | undefined): boolean => c !== undefined && c >= "0" && c <= "9";
  let num = "";
  let i = pos;
  while (i < end && isDigit(str[i])) i++;
  if (i >= end) return { positive, value: str, num: str.slice(pos), denom: "", suffix: "" };
  num = str.slice(pos, i) || "0";
  pos = i;
  let denom = "";
  if (str[pos] === ".") {
    pos++;
    let j = pos;
    while (j < end && isDigit(str[j])) j++;
    if (j >= end) return { positive, value: str, num, denom: str.slice(pos), suffix: "" };
    denom = str.slice(pos, j);
    pos = j;
  }
  const value = str.slice(0, pos);
  const suffixStart = pos;
  let k = pos;
  while (k < end && "eEinumkKMGTP".includes(str[k]!)) k++;
  if (k >= end) return { positive, value, num, denom, suffix: str.slice(suffixStart) };
  pos = k;
  if (str[pos] === "-" || str[pos] === "+") pos++;
  for (let m = pos; m < end; m++) if (!isDigit(str[m])) throw new QuantityError(`quantities must match the regular expression: ${str}`);
  return { positive, value, num, denom, suffix: str.slice(suffixStart) };
}

const DEC_SUFFIXES: Record<string, number> = { n: -9, u: -6, m: -3, "": 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BIN_SUFFIXES: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };

function interpret(suffix: string): { base: 10 | 2; exponent: number; format: QuantityValue["Format"] } {
  if (suffix in DEC_SUFFIXES) return { base: 10, exponent: DEC_SUFFIXES[suffix]!, format: "DecimalSI" };
  if (suffix in BIN_SUFFIXES) return { base: 2, exponent: BIN_SUFFIXES[suffix]!, format: "BinarySI" };
  if (suffix.length > 1 && (suffix[0] === "E" || suffix[0] === "e") && /^[+-]?\d+$/.test(suffix.slice(1))) {
    const exponent = Number(suffix.slice(1));
    if (Number.isSafeInteger(exponent) && exponent >= -(2 ** 31) && exponent < 2 ** 31) return { base: 10, exponent, format: "DecimalExponent" };
  }
  throw new QuantityError(`unable to parse quantity's suffix: ${suffix}`);
}

/** inf.Dec.Round(x, scale, inf.RoundUp): away from zero. */
function roundUp(x: Dec, scale: number): Dec {
  if (scale >= x.scale) return { unscaled: x.unscaled * 10n ** BigInt(scale - x.scale), scale };
  const div = 10n ** BigInt(x.scale - scale);
  let q = x.unscaled / div;
  if (x.unscaled % div !== 0n) q += x.unscaled < 0n ? -1n : 1n;
  return { unscaled: q, scale };
}

function toInfDec(d: Dec): InfDec {
  // big.Int zero has a nil nat (go-spew prints <nil>).
  if (d.unscaled === 0n) return { unscaled: { neg: false, abs: null }, scale: d.scale };
  let abs = d.unscaled < 0n ? -d.unscaled : d.unscaled;
  const words: bigint[] = [];
  while (abs > 0n) {
    words.push(abs & 0xffff_ffff_ffff_ffffn);
    abs >>= 64n;
  }
  return { unscaled: { neg: d.unscaled < 0n, abs: words }, scale: d.scale };
}

type Parsed = { kind: "int"; value: bigint; scale: number; s: string; format: QuantityValue["Format"] } | { kind: "dec"; dec: Dec; format: QuantityValue["Format"] };

function parse(str: string): Parsed {
  if (str.length === 0) throw new QuantityError("quantities must match the regular expression");
  if (str === "0") return { kind: "int", value: 0n, scale: 0, s: str, format: "DecimalSI" };
  const { positive, value, num, denom, suffix } = parseQuantityString(str);
  const { base, exponent, format: fmt } = interpret(suffix);
  let format = fmt;
  let precision = 0;
  let scale = 0;
  let mantissa = 1n;
  if (format === "BinarySI") {
    if (exponent >= 0 && denom.length === 0) {
      mantissa = 1n << BigInt(exponent);
      precision = 15 - num.length - Math.trunc((exponent * 3) / 10) - 1;
    } else precision = -1;
  } else {
    scale = exponent;
    precision = 18 - (num.length + denom.length);
  }
  if (precision >= 0) {
    scale -= denom.length;
    if (scale >= NANO) {
      const shifted = num + denom;
      const v = BigInt(shifted);
      if (v > MAX_INT64) throw new QuantityError("quantities must match the regular expression");
      let result = v * mantissa;
      if (result <= MAX_INT64) {
        if (!positive) result = -result;
        const canonical = format === "BinarySI" ? exponent % 10 === 0 && (v & 7n) !== 0n : scale % 3 === 0 && !shifted.endsWith("000") && shifted[0] !== "0";
        return { kind: "int", value: result, scale, s: canonical ? str : "", format };
      }
    }
  }
  // inf.Dec path.
  const m = /^([+-]?)(\d*)(?:\.(\d*))?$/.exec(value);
  if (!m || (m[2] === "" && (m[3] ?? "") === "")) throw new QuantityError(`quantities must match the regular expression: ${str}`);
  let dec: Dec = { unscaled: BigInt((m[2] || "0") + (m[3] ?? "")) * (m[1] === "-" ? -1n : 1n), scale: (m[3] ?? "").length };
  if (base === 10) dec = { unscaled: dec.unscaled, scale: dec.scale - exponent };
  else dec = { unscaled: dec.unscaled * (1n << BigInt(exponent)), scale: dec.scale };
  const negative = dec.unscaled < 0n;
  if (negative) dec = { unscaled: -dec.unscaled, scale: dec.scale };
  if (dec.unscaled !== 0n) dec = roundUp(dec, -NANO);
  const cmp = (a: Dec, b: Dec): number => {
    const s = Math.max(a.scale, b.scale);
    const x = a.unscaled * 10n ** BigInt(s - a.scale);
    const y = b.unscaled * 10n ** BigInt(s - b.scale);
    return x < y ? -1 : x > y ? 1 : 0;
  };
  if (format === "BinarySI" && cmp(dec, { unscaled: MAX_INT64, scale: 0 }) > 0) dec = { unscaled: MAX_INT64, scale: 0 };
  if (format === "BinarySI" && cmp(dec, { unscaled: 1n, scale: 0 }) < 0 && dec.unscaled > 0n) format = "DecimalSI";
  if (negative) dec = { unscaled: -dec.unscaled, scale: dec.scale };
  return { kind: "dec", dec, format };
}

/**
 * A Quantity decoded from its JSON value (a string or a number) and then
 * rounded up to milli scale, as v1 defaulting does to every ResourceList
 * entry (`roundToMilli`; a ResourceFieldSelector's divisor is not rounded).
 */
export function decodeQuantity(json: unknown, opts: { roundToMilli: boolean }): QuantityValue {
  let text: string;
  if (typeof json === "string") text = json.trim();
  // A number: YAML/JSON integers beyond 2^53 lost digits in JavaScript, and exponents print otherwise than Go's.
  else if (typeof json === "number" && Number.isFinite(json) && !(Number.isInteger(json) && !Number.isSafeInteger(json)) && !/e/i.test(String(json))) text = String(json);
  else throw new QuantityError(`a quantity of JSON type ${typeof json} is not modelled`);
  const p = parse(text);
  if (p.kind === "int") {
    if (p.value < MIN_INT64) throw new QuantityError("quantity out of range");
    let { value, scale, s } = { value: p.value, scale: p.scale, s: p.s };
    if (opts.roundToMilli && scale < -3) {
      // int64Amount.AsScale(-3): negativeScaleInt64, rounding away from zero.
      const base = value;
      let v = base;
      let fraction = false;
      let done = false;
      for (let i = 0; i < -3 - scale; i++) {
        if (!fraction && v % 10n !== 0n) fraction = true;
        v /= 10n;
        if (v === 0n) {
          v = fraction ? (base > 0n ? 1n : -1n) : 0n;
          done = true;
          break;
        }
      }
      if (!done && fraction) v += base > 0n ? 1n : -1n;
      value = v;
      scale = -3;
      s = "";
    }
    return { i: { value, scale }, d: { Dec: null }, s, Format: p.format };
  }
  const dec = opts.roundToMilli ? roundUp(p.dec, 3) : p.dec;
  return { i: { value: 0n, scale: 0 }, d: { Dec: toInfDec(dec) }, s: "", Format: p.format };
}
