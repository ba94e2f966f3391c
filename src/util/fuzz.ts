/**
 * A small seeded generator and mutator for property-based fuzz tests of the
 * agent's parsers (manifests, config, HTTP queries). Test support only:
 * nothing in the agent imports it. Deterministic: the same seed gives the
 * same inputs, and a failure names the seed and the case so it replays.
 *
 * fast-check would do this too; the workspace shares one node_modules, so
 * the parsers are fuzzed with this instead of a new dependency.
 */

/** mulberry32: tiny, fast, good enough to spread inputs. */
export class Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  /** A float in [0, 1). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  bool(p = 0.5): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
}

/** Strings parsers trip on: empty, huge, control characters, unicode, YAML and JSON syntax, prototype keys, numbers as text. */
const NASTY_STRINGS = [
  "",
  " ",
  "\u0000",
  "\n",
  "\t\r\n",
  "\u202e\u0301\ud83d\ude00",
  "\ud800",
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "null",
  "true",
  "~",
  "0",
  "-1",
  "1e309",
  "0x10",
  "NaN",
  "9007199254740993",
  "1m",
  "-5s",
  "500us",
  "10Mi",
  "1.5",
  "yes",
  "a".repeat(300),
  "../../etc/passwd",
  "a/b",
  "%zz",
  "%00",
  "&a",
  "*a",
  "!!binary",
  "{",
  "[",
  "'",
  '"',
  "#",
  "- ",
  ": ",
  "|",
  ">",
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a literal ${...} is one of the inputs fuzzing tries
  "${HOME}",
  "$(x)",
  "2024-01-01T00:00:00Z",
  "127.0.0.1",
];

const NASTY_NUMBERS = [0, -0, 1, -1, 0.5, -0.5, 2 ** 31, -(2 ** 31) - 1, 2 ** 53, Number.MAX_SAFE_INTEGER + 2, 1e308, -1e308, 5e-324, 65536, 10250];

/** An arbitrary JSON value, with object keys drawn partly from `keys` so the generator reaches deep into a schema. */
export function arbitraryJson(rng: Rng, keys: readonly string[] = [], depth = 3): unknown {
  const kind = rng.int(depth > 0 ? 9 : 6);
  switch (kind) {
    case 0:
      return null;
    case 1:
      return rng.bool();
    case 2:
      return rng.pick(NASTY_NUMBERS);
    case 3:
      return rng.int(2000) - 1000;
    case 4:
    case 5:
      return rng.bool(0.7) ? rng.pick(NASTY_STRINGS) : randomString(rng, rng.int(12));
    case 6:
    case 7: {
      const out: Record<string, unknown> = {};
      const n = rng.int(5);
      for (let i = 0; i < n; i++) out[rng.bool(0.7) && keys.length ? rng.pick(keys) : rng.pick(NASTY_STRINGS)] = arbitraryJson(rng, keys, depth - 1);
      return out;
    }
    default:
      return Array.from({ length: rng.int(4) }, () => arbitraryJson(rng, keys, depth - 1));
  }
}

export function randomString(rng: Rng, length: number): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-._/:=%&*!#@ \n\t{}[]\"'\\\u00e9\u4e2d";
  let s = "";
  for (let i = 0; i < length; i++) s += alphabet[rng.int(alphabet.length)];
  return s;
}

/** Every key used anywhere in a value; the vocabulary for mutations. */
export function keysOf(value: unknown, into = new Set<string>()): string[] {
  if (Array.isArray(value)) for (const v of value) keysOf(v, into);
  else if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      into.add(k);
      keysOf(v, into);
    }
  }
  return [...into];
}

/**
 * A structural mutation of a valid document: one node somewhere in it is
 * replaced by an arbitrary value, deleted, or given an extra key or element.
 * The result is a fresh copy; the input is not changed.
 */
export function mutateValue(rng: Rng, value: unknown, keys: readonly string[] = keysOf(value)): unknown {
  const copy = structuredClone(value);
  const containers: (Record<string, unknown> | unknown[])[] = [];
  const walk = (v: unknown) => {
    if (v !== null && typeof v === "object") {
      containers.push(v as Record<string, unknown>);
      for (const child of Object.values(v)) walk(child);
    }
  };
  walk(copy);
  if (containers.length === 0 || rng.bool(0.05)) return arbitraryJson(rng, keys);
  const target = rng.pick(containers);
  const slots = Object.keys(target);
  const op = rng.int(4);
  if (op === 0 && slots.length) {
    const slot = rng.pick(slots);
    if (Array.isArray(target)) target.splice(Number(slot), 1);
    else delete target[slot];
  } else if (op === 1 || !slots.length) {
    if (Array.isArray(target)) target.push(rng.bool() && target.length ? structuredClone(target[0]) : arbitraryJson(rng, keys, 2));
    else target[rng.bool(0.6) ? rng.pick(keys) : randomString(rng, 1 + rng.int(8))] = arbitraryJson(rng, keys, 2);
  } else {
    const slot = rng.pick(slots);
    (target as Record<string, unknown>)[slot] = arbitraryJson(rng, keys, op === 2 ? 0 : 2);
  }
  return copy;
}

const TEXT_INSERTS = [
  ":",
  "- ",
  "\n",
  "  ",
  "&x ",
  "*x",
  "{",
  "}",
  "[",
  "]",
  "'",
  '"',
  "#",
  "!!str ",
  "|",
  ">",
  ",",
  "\t",
  "\u0000",
  "\ufeff",
  "---\n",
  "...\n",
  "? ",
  "%YAML 1.2\n",
  "<<: *x\n",
];

/** A textual mutation: bytes cut, inserted, duplicated or truncated, as a damaged or hand-edited file. */
export function mutateText(rng: Rng, text: string): string {
  let s = text;
  const rounds = 1 + rng.int(3);
  for (let r = 0; r < rounds; r++) {
    const at = rng.int(s.length + 1);
    switch (rng.int(5)) {
      case 0:
        s = s.slice(0, at) + s.slice(at + 1 + rng.int(8));
        break;
      case 1:
        s = s.slice(0, at) + rng.pick(TEXT_INSERTS) + s.slice(at);
        break;
      case 2: {
        const len = rng.int(40);
        s = s.slice(0, at) + s.slice(at, at + len) + s.slice(at);
        break;
      }
      case 3:
        s = s.slice(0, at);
        break;
      default:
        s = s.slice(0, at) + randomString(rng, 1 + rng.int(6)) + s.slice(at);
    }
  }
  return s;
}

/**
 * Runs `check` on `count` inputs from `generate`; a throw is rethrown with
 * the seed, the case number and the input, so the failure replays.
 */
export function forAll<T>(opts: { seed: number; count: number }, generate: (rng: Rng, i: number) => T, check: (input: T) => void): void {
  const rng = new Rng(opts.seed);
  for (let i = 0; i < opts.count; i++) {
    const input = generate(rng, i);
    try {
      check(input);
    } catch (err) {
      const shown = typeof input === "string" ? input : JSON.stringify(input);
      throw new Error(`fuzz case ${i} (seed ${opts.seed}) failed: ${(err as Error).message}\ninput: ${shown?.slice(0, 2000)}`, { cause: err });
    }
  }
}

/** Async variant of forAll, for handlers that answer promises. */
export async function forAllAsync<T>(opts: { seed: number; count: number }, generate: (rng: Rng, i: number) => T, check: (input: T) => Promise<void>): Promise<void> {
  const rng = new Rng(opts.seed);
  for (let i = 0; i < opts.count; i++) {
    const input = generate(rng, i);
    try {
      await check(input);
    } catch (err) {
      const shown = typeof input === "string" ? input : JSON.stringify(input);
      throw new Error(`fuzz case ${i} (seed ${opts.seed}) failed: ${(err as Error).message}\ninput: ${shown?.slice(0, 2000)}`, { cause: err });
    }
  }
}
