/**
 * Command-line parsing like the upstream kubelet's (spf13/pflag):
 * `--flag=value`, `--flag value`, booleans as `--flag` or `--flag=false`,
 * shorthands `-v=4`, `-v 4`, `-v4` and `-h`, `--` ends the flags. The kubelet
 * takes no positional arguments, so any is an error.
 *
 * Parsing only checks syntax and values; each occurrence becomes a change
 * that is applied later, in command-line order, on top of the config file:
 * upstream's precedence (flags override the file).
 */
import type { KubeletConfiguration } from "./kubelet-config.ts";
import { ConfigError } from "./errors.ts";
import { closest } from "./validators.ts";

/** Settings that only exist as flags (upstream KubeletFlags), not in the config file. */
export interface AgentFlags {
  configFile?: string;
  kubeconfig?: string;
  bootstrapKubeconfig?: string;
  hostnameOverride?: string;
  nodeIPs: string[];
  nodeLabels: Record<string, string>;
  rootDir: string;
  certDir: string;
  cloudProvider: string;
}

export function defaultAgentFlags(): AgentFlags {
  return { nodeIPs: [], nodeLabels: {}, rootDir: "/var/lib/kubelet", certDir: "/var/lib/kubelet/pki", cloudProvider: "" };
}

/** What a flag's change is applied to. */
export interface FlagTarget {
  kubelet: KubeletConfiguration;
  agent: AgentFlags;
  /** Warnings for the operator (ignored or deprecated flags), logged at start. */
  warnings: string[];
  /**
   * Flags already applied once. List and map flags replace the file's value
   * on their first occurrence and add to it on later ones, as pflag's slice
   * and map values do.
   */
  seen: Set<string>;
}

export type FlagGroup = "config" | "node" | "pods" | "server" | "network" | "resources" | "eviction" | "logging" | "other" | "deprecated";

export interface FlagDef {
  name: string;
  short?: string;
  /** Value type shown in --help ("string", "duration", "int32", "strings", ...); "" for booleans. */
  type: string;
  /** Booleans take no value (`--flag` means true) unless given with `=`. */
  isBool?: boolean;
  group: FlagGroup;
  help: string;
  /** Why this agent does not act on the flag (set on flags refused at any value but the default). */
  refused?: string;
  /** The config file field the flag sets, named in --help. */
  field?: string;
  /** Renders the default for --help from the flag defaults; undefined hides it (as pflag hides zero values). */
  showDefault?: (t: FlagTarget) => string | undefined;
  /**
   * Checks one occurrence's value and returns the change it makes. Throws an
   * Error whose message says what was expected; the parser adds the flag name.
   */
  parse(raw: string): (t: FlagTarget) => void;
}

export interface ParsedArgs {
  help: boolean;
  version: boolean;
  /** The occurrences in command-line order. */
  occurrences: { def: FlagDef; raw: string; apply: (t: FlagTarget) => void }[];
}

/** Parses argv (without the program name). Throws ConfigError naming the flag and what it expected. */
export function parseArgs(argv: readonly string[], defs: readonly FlagDef[]): ParsedArgs {
  const byName = new Map(defs.map((d) => [d.name, d]));
  const byShort = new Map(defs.filter((d) => d.short).map((d) => [d.short as string, d]));
  const out: ParsedArgs = { help: false, version: false, occurrences: [] };
  const take = (def: FlagDef, raw: string, shown: string) => {
    try {
      out.occurrences.push({ def, raw, apply: def.parse(raw) });
    } catch (err) {
      throw new ConfigError(`flag ${shown}: ${(err as Error).message}`);
    }
  };
  const args = [...argv];
  while (args.length > 0) {
    const arg = args.shift() as string;
    if (arg === "--") {
      if (args.length > 0) throw positional(args[0] as string, byName);
      break;
    }
    if (!arg.startsWith("-") || arg === "-") throw positional(arg, byName);
    if (arg.startsWith("--")) {
      const body = arg.slice(2);
      if (body === "" || body.startsWith("-") || body.startsWith("=")) throw new ConfigError(`bad flag syntax: ${arg}`);
      const eq = body.indexOf("=");
      const name = eq < 0 ? body : body.slice(0, eq);
      const def = byName.get(name);
      if (!def) {
        if (name === "help") return { ...out, help: true };
        const hint = closest(name, byName.keys());
        throw new ConfigError(`unknown flag --${name}${hint ? ` (did you mean --${hint}?)` : ""}`);
      }
      if (name === "help") return { ...out, help: true };
      let raw: string;
      if (eq >= 0) raw = body.slice(eq + 1);
      else if (def.isBool) raw = "true";
      else if (args.length > 0) raw = args.shift() as string;
      else throw new ConfigError(`flag --${name} needs a value (${def.type})`);
      if (name === "version") {
        out.version = parseVersionFlag(raw);
        continue;
      }
      take(def, raw, `--${name}`);
      continue;
    }
    // Shorthands: -h, -v=4, -v 4, -v4.
    let rest = arg.slice(1);
    while (rest !== "") {
      const c = rest[0] as string;
      rest = rest.slice(1);
      const def = byShort.get(c);
      if (c === "h" && (!def || def.name === "help")) return { ...out, help: true };
      if (!def) throw new ConfigError(`unknown shorthand flag '${c}' in ${arg}`);
      let raw: string;
      if (rest.startsWith("=")) raw = rest.slice(1);
      else if (def.isBool) raw = "true";
      else if (rest !== "") raw = rest;
      else if (args.length > 0) raw = args.shift() as string;
      else throw new ConfigError(`flag -${c} (--${def.name}) needs a value (${def.type})`);
      if (!def.isBool || rest.startsWith("=")) rest = "";
      take(def, raw, `-${c}`);
    }
  }
  return out;
}

function positional(arg: string, byName: Map<string, FlagDef>): ConfigError {
  const hint = byName.has(arg.replace(/^-/, "").split("=")[0] ?? "") ? ` (did you mean --${arg.replace(/^-/, "")}?)` : "";
  return new ConfigError(
    `unexpected argument ${JSON.stringify(arg)}: the kubelet takes flags, and the subcommands install and uninstall as its first argument (kubelet --help)${hint}`,
  );
}

/** --version, --version=true|false|raw (upstream verflag; "raw" prints the same line here). */
function parseVersionFlag(raw: string): boolean {
  if (raw === "raw") return true;
  try {
    return parseBool(raw);
  } catch {
    throw new ConfigError(`flag --version: expected true, false or raw, got ${JSON.stringify(raw)}`);
  }
}

// Value parsers shared by the flag table. Each throws an Error saying what it expected.

/** Go's strconv.ParseBool. */
export function parseBool(raw: string): boolean {
  if (["1", "t", "T", "true", "TRUE", "True"].includes(raw)) return true;
  if (["0", "f", "F", "false", "FALSE", "False"].includes(raw)) return false;
  throw new Error(`expected true or false, got ${JSON.stringify(raw)}`);
}

/**
 * Go's strconv.ParseInt(s, 0, bits), which pflag's integer flags use: a
 * sign, then decimal, or 0x / 0o / 0b prefixed, or a leading 0 for octal.
 */
export function parseInt(raw: string, bits: 32 | 64): number {
  const what = `expected an integer (int${bits}), got ${JSON.stringify(raw)}`;
  const m = /^([+-]?)(0[xX][0-9a-fA-F]+|0[oO]?[0-7]+|0[bB][01]+|[1-9][0-9]*|0)$/.exec(raw);
  if (!m) throw new Error(what);
  const digits = m[2] as string;
  const lower = digits.toLowerCase();
  // Number() reads 0x, 0o and 0b itself; a bare leading 0 is octal in Go.
  const value = /^0[0-7]/.test(lower) ? Number(`0o${lower.slice(1)}`) : Number(lower);
  const signed = m[1] === "-" ? -value : value;
  const [min, max] = bits === 32 ? [-(2 ** 31), 2 ** 31 - 1] : [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER];
  if (!Number.isSafeInteger(signed) || signed < min || signed > max) throw new Error(`${what}: out of range`);
  return signed;
}

export function parseFloatValue(raw: string): number {
  const n = raw.trim() === "" ? NaN : Number(raw);
  if (!Number.isFinite(n)) throw new Error(`expected a number, got ${JSON.stringify(raw)}`);
  return n;
}

/** pflag StringSlice: comma-separated, empty means an empty list. */
export function parseList(raw: string): string[] {
  return raw === "" ? [] : raw.split(",");
}

/**
 * cliflag MapStringString and its relatives: `k=v,k2=v2` (sep "="), or with
 * "<" for eviction thresholds (`memory.available<1Gi`). Keys and values are
 * trimmed. With split=false the whole value is one pair.
 */
export function parsePairs(raw: string, sep: "=" | "<" | ":" = "=", split = true): [string, string][] {
  const items = split ? raw.split(",") : [raw];
  const out: [string, string][] = [];
  for (const item of items) {
    if (item.trim() === "") continue;
    const at = item.indexOf(sep);
    if (at < 0) throw new Error(`malformed pair ${JSON.stringify(item)}, expected key${sep}value`);
    out.push([item.slice(0, at).trim(), item.slice(at + 1).trim()]);
  }
  return out;
}

/** Applies a list or map flag: the first occurrence replaces, later ones extend. */
export function firstUse(t: FlagTarget, name: string): boolean {
  const first = !t.seen.has(name);
  t.seen.add(name);
  return first;
}
