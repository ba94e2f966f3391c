/**
 * Builders for the flag table: one per kind of value, each parsing the value
 * the way pflag (or the kubelet's cliflag types) does and setting one field.
 */
import { formatDuration, parseDuration } from "./duration.ts";
import { firstUse, parseBool, parseInt, parseList, parsePairs, type FlagDef, type FlagGroup, type FlagTarget } from "./flags.ts";
import { EVICTION_SIGNALS, type EvictionSignal, type KubeletConfiguration } from "./kubelet-config.ts";
import { isQuantity, parseThreshold } from "./quantity.ts";

type K = KubeletConfiguration;
/** Keys of KubeletConfiguration whose type is exactly T. */
type Keys<T> = { [P in keyof K]-?: K[P] extends T ? (T extends K[P] ? P : never) : never }[keyof K];
type Extra = Partial<Omit<FlagDef, "name" | "group" | "help" | "parse">>;

export const quote = (s: string) => (s === "" ? undefined : JSON.stringify(s));

export function bool(name: string, key: Keys<boolean>, group: FlagGroup, help: string, extra?: Extra): FlagDef {
  return {
    name,
    type: "",
    isBool: true,
    group,
    help,
    field: key,
    showDefault: (t) => (t.kubelet[key] ? "true" : undefined),
    parse: (raw) => {
      const v = parseBool(raw);
      return (t) => {
        t.kubelet[key] = v;
      };
    },
    ...extra,
  };
}
export function int(name: string, key: Keys<number>, group: FlagGroup, help: string, bits: 32 | 64 = 32): FlagDef {
  return {
    name,
    type: `int${bits === 32 ? "32" : ""}`,
    group,
    help,
    field: key,
    showDefault: (t) => (t.kubelet[key] !== 0 ? String(t.kubelet[key]) : undefined),
    parse: (raw) => {
      const v = parseInt(raw, bits);
      return (t) => {
        t.kubelet[key] = v;
      };
    },
  };
}
export function dur(name: string, key: Keys<number>, group: FlagGroup, help: string): FlagDef {
  return {
    name,
    type: "duration",
    group,
    help,
    field: key,
    showDefault: (t) => (t.kubelet[key] !== 0 ? formatDuration(t.kubelet[key]) : undefined),
    parse: (raw) => {
      const v = parseDuration(raw);
      return (t) => {
        t.kubelet[key] = v;
      };
    },
  };
}
export function str(name: string, key: Keys<string>, group: FlagGroup, help: string, check?: (s: string) => string | null): FlagDef {
  return {
    name,
    type: "string",
    group,
    help,
    field: key,
    showDefault: (t) => quote(t.kubelet[key]),
    parse: (raw) => {
      const err = check?.(raw);
      if (err) throw new Error(err);
      return (t) => {
        t.kubelet[key] = raw;
      };
    },
  };
}
export function list(name: string, key: Keys<string[]>, group: FlagGroup, help: string, check?: (s: string) => string | null): FlagDef {
  return {
    name,
    type: "strings",
    group,
    help,
    field: key,
    showDefault: (t) => (t.kubelet[key].length ? `[${t.kubelet[key].join(",")}]` : undefined),
    parse: (raw) => {
      const items = parseList(raw);
      for (const item of items) {
        const err = check?.(item);
        if (err) throw new Error(err);
      }
      return (t) => {
        t.kubelet[key] = firstUse(t, name) ? items : [...t.kubelet[key], ...items];
      };
    },
  };
}
/** A `k=v,k2=v2` flag onto a map field; the first occurrence replaces the file's map. */
export function map(name: string, key: Keys<Record<string, string>>, group: FlagGroup, help: string, check?: (k: string, v: string) => string | null, split = true): FlagDef {
  return {
    name,
    type: "<key=value pairs>",
    group,
    help,
    field: key,
    parse: (raw) => {
      const pairs = parsePairs(raw, "=", split);
      for (const [k, v] of pairs) {
        const err = check?.(k, v);
        if (err) throw new Error(err);
      }
      return (t) => {
        t.kubelet[key] = { ...(firstUse(t, name) ? {} : t.kubelet[key]), ...Object.fromEntries(pairs) };
      };
    },
  };
}
/** A flag-only setting. */
export function agent(name: string, type: string, group: FlagGroup, help: string, apply: (t: FlagTarget, raw: string) => void, extra?: Extra): FlagDef {
  return { name, type, group, help, parse: (raw) => (t) => apply(t, raw), ...extra };
}
/**
 * A flag this agent does not act on: its upstream default (`def`, as written
 * on a command line) is accepted, any other value is refused with `why`.
 */
export function refusedFlag(name: string, type: string, group: FlagGroup, help: string, def: string, why: string): FlagDef {
  return {
    name,
    type,
    isBool: type === "",
    group,
    help: `${help} Not acted on: any value but the default exits 2 (${why}).`,
    refused: why,
    parse: (raw) => {
      // Values are still checked, as pflag checks them.
      let same = raw === def;
      if (type === "duration") same = parseDuration(raw) === parseDuration(def);
      else if (type === "int32") same = parseInt(raw, 32) === parseInt(def, 32);
      else if (type === "") same = parseBool(raw) === parseBool(def);
      if (!same) throw new Error(`not acted on by this agent: ${why}`);
      return () => {};
    },
  };
}

const SIGNALS = new Set<string>(EVICTION_SIGNALS);
export const checkSignal = (s: string) => (SIGNALS.has(s) ? null : `unknown eviction signal ${JSON.stringify(s)}`);
export function thresholds(name: string, key: "evictionHard" | "evictionSoft" | "evictionMinimumReclaim", sep: "<" | "=", help: string): FlagDef {
  return {
    name,
    type: "<comma-separated pairs>",
    group: "eviction",
    help,
    field: key,
    parse: (raw) => {
      const pairs = parsePairs(raw, sep);
      for (const [k, v] of pairs) {
        const err = checkSignal(k);
        if (err) throw new Error(err);
        parseThreshold(v);
      }
      return (t) => {
        t.kubelet[key] = { ...(firstUse(t, name) ? {} : t.kubelet[key]), ...(Object.fromEntries(pairs) as Partial<Record<EvictionSignal, string>>) };
      };
    },
  };
}
export const quantityCheck = (k: string, v: string) => (isQuantity(v) ? null : `${k}: expected a quantity like "500Mi", got ${JSON.stringify(v)}`);
export const percentCheck = (k: string, v: string) => (/^\d+(\.\d+)?%$/.test(v) ? null : `${k}: expected a percentage like "50%", got ${JSON.stringify(v)}`);
