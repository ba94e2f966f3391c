/**
 * YAML as upstream's decoders read it. The kubelet decodes manifests, its
 * config file and kubeconfigs with sigs.k8s.io/yaml, which resolves plain
 * (unquoted) scalars by YAML 1.1 rules (go-yaml v2): `0644` is octal (420),
 * `yes`/`on`/`y` are true, `1_000` is 1000, `0b101` is 5. A YAML 1.2 parser
 * (Bun.YAML, js-yaml's default schema) reads `defaultMode: 0644` as 644, a
 * different file mode, silently. So plain scalars are resolved here as go-yaml
 * v2 resolves them; quoted scalars stay strings, as everywhere.
 */
import jsyaml from "js-yaml";

const NULLS = new Set(["", "~", "null", "Null", "NULL"]);
const TRUES = new Set(["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"]);
const FALSES = new Set(["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"]);

/** Go's strconv.ParseInt(s, 0, 64) syntax, underscores already removed: decimal, 0x, 0o, 0b, and a leading 0 for octal. */
const GO_INT = /^[-+]?(?:0[xX][0-9a-fA-F]+|0[oO]?[0-7]+|0[bB][01]+|[1-9][0-9]*|0)$/;
/** go-yaml v2's float syntax (yamlStyleFloat). */
const GO_FLOAT = /^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$/;
const SPECIAL_FLOATS: Record<string, number> = {
  ".inf": Infinity,
  ".Inf": Infinity,
  ".INF": Infinity,
  "+.inf": Infinity,
  "+.Inf": Infinity,
  "+.INF": Infinity,
  "-.inf": -Infinity,
  "-.Inf": -Infinity,
  "-.INF": -Infinity,
  ".nan": NaN,
  ".NaN": NaN,
  ".NAN": NaN,
};

function goInt(plain: string): number {
  const sign = plain.startsWith("-") ? -1 : 1;
  const digits = plain.replace(/^[-+]/, "");
  if (/^0[xX]/.test(digits)) return sign * Number.parseInt(digits.slice(2), 16);
  if (/^0[bB]/.test(digits)) return sign * Number.parseInt(digits.slice(2), 2);
  if (/^0[oO]/.test(digits)) return sign * Number.parseInt(digits.slice(2), 8);
  if (digits.length > 1 && digits.startsWith("0")) return sign * Number.parseInt(digits.slice(1), 8);
  return sign * Number.parseInt(digits, 10);
}

const yaml11Null = new jsyaml.Type("tag:yaml.org,2002:null", {
  kind: "scalar",
  resolve: (s: string | null) => s === null || NULLS.has(s),
  construct: () => null,
});
const yaml11Bool = new jsyaml.Type("tag:yaml.org,2002:bool", {
  kind: "scalar",
  resolve: (s: string | null) => s !== null && (TRUES.has(s) || FALSES.has(s)),
  construct: (s: string) => TRUES.has(s),
});
const yaml11Int = new jsyaml.Type("tag:yaml.org,2002:int", {
  kind: "scalar",
  resolve: (s: string | null) => s !== null && GO_INT.test(s.replaceAll("_", "")),
  construct: (s: string) => goInt(s.replaceAll("_", "")),
});
const yaml11Float = new jsyaml.Type("tag:yaml.org,2002:float", {
  kind: "scalar",
  resolve: (s: string | null) => s !== null && (s in SPECIAL_FLOATS || GO_FLOAT.test(s.replaceAll("_", ""))),
  construct: (s: string) => SPECIAL_FLOATS[s] ?? Number.parseFloat(s.replaceAll("_", "")),
});

/** Strings, lists and maps, with plain scalars resolved as go-yaml v2 does (no timestamps: they stay strings, as in JSON). */
export const YAML11_SCHEMA = jsyaml.FAILSAFE_SCHEMA.extend({ implicit: [yaml11Null, yaml11Bool, yaml11Int, yaml11Float] });

export interface YamlSyntaxError {
  /** 1-based, as editors count. */
  line: number;
  column: number;
  /** js-yaml's account of what is wrong there ("bad indentation of a mapping entry"). */
  reason: string;
}

export class YamlError extends Error {
  override readonly name = "YamlError";
  constructor(readonly at: YamlSyntaxError | undefined) {
    super(at ? `invalid YAML at line ${at.line}, column ${at.column}: ${at.reason}` : "invalid YAML");
  }
}

/**
 * Every document of a YAML stream. Duplicate keys: the last wins, as with
 * upstream's YAML-to-JSON. Throws YamlError with the place of a syntax error.
 */
export function parseYamlStream(text: string): unknown[] {
  const docs: unknown[] = [];
  try {
    jsyaml.loadAll(text, (doc) => docs.push(doc), { schema: YAML11_SCHEMA, json: true });
  } catch (err) {
    const { mark, reason } = err as { mark?: { line: number; column: number }; reason?: string };
    if (!mark || typeof mark.line !== "number") throw new YamlError(undefined);
    // ("; " joins several problems in the agent's messages: js-yaml's two-part reasons take a comma.)
    throw new YamlError({ line: mark.line + 1, column: mark.column + 1, reason: (reason ?? "syntax error").replaceAll("; ", ", ") });
  }
  return docs;
}
