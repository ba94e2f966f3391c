/**
 * Reads the --config file: YAML or JSON, at most 1 MiB, no YAML anchors or
 * aliases, exactly one KubeletConfiguration document. Relative paths in the
 * file resolve against the file's directory, as upstream's
 * configfiles.resolveRelativePaths does.
 */
import { dirname, isAbsolute, join, resolve } from "node:path";
import * as v from "valibot";
import { decodeDocuments, DecodeError } from "../util/decode.ts";
import { describe } from "./fields.ts";
import { ConfigError, formatIssues } from "./errors.ts";
import { API_VERSION, KIND, KubeletConfigurationSchema, type KubeletConfiguration } from "./kubelet-config.ts";
import { findAnchorOrAlias } from "./yaml-anchors.ts";

export const MAX_CONFIG_BYTES = 1 << 20;
const MAX_DEPTH = 32;

export interface FileDeps {
  readFile(path: string): string | Buffer;
  /** The working directory relative --config paths start at; relative paths inside the file then become absolute. */
  cwd?: string;
  /** Told which top-level fields the file sets (defaults fill the rest): what was chosen, not defaulted. */
  onFields?(fields: readonly string[]): void;
}

/** Loads, checks and defaults a config file. Throws ConfigError with messages prefixed `config file <path>:`. */
export function loadKubeletConfigFile(path: string, deps: FileDeps, maxBytes = MAX_CONFIG_BYTES): KubeletConfiguration {
  const fail = (msg: string): never => {
    throw new ConfigError(`config file ${path}: ${msg}`);
  };
  let raw: string | Buffer;
  try {
    raw = deps.readFile(path);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "ENOENT") return fail("no such file");
    return fail(`cannot read it: ${(err as Error).message}`);
  }
  const size = typeof raw === "string" ? Buffer.byteLength(raw) : raw.byteLength;
  if (size > maxBytes) return fail(`is ${size} bytes, more than the limit of ${maxBytes}`);
  const text = typeof raw === "string" ? raw : raw.toString("utf8");

  const hit = findAnchorOrAlias(text);
  if (hit)
    return fail(
      `line ${hit.line}, column ${hit.column}: YAML ${hit.indicator === "&" ? "anchors" : "aliases"} are not allowed in the kubelet config file (write the value out in full)`,
    );
  let docs: unknown[];
  try {
    docs = decodeDocuments(text, { maxBytes });
  } catch (err) {
    if (err instanceof DecodeError || err instanceof RangeError) return fail(err.message);
    throw err;
  }
  if (docs.length === 0) return fail("is empty");
  if (docs.length > 1) return fail(`holds ${docs.length} documents, expected a single ${KIND}`);

  // A KubeletConfiguration is a few levels deep; refusing deep input keeps the recursive steps below safe.
  if (depthExceeds(docs[0], MAX_DEPTH)) return fail(`nesting is deeper than ${MAX_DEPTH} levels`);
  const doc = dropNulls(docs[0]);
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) return fail(`expected a ${KIND} object, got ${describe(doc)}`);
  // Say the version is wrong before listing every field the other version does not have.
  const { apiVersion, kind } = doc as { apiVersion?: unknown; kind?: unknown };
  if (apiVersion !== API_VERSION) return fail(`field "apiVersion": expected ${JSON.stringify(API_VERSION)}, got ${describe(apiVersion)}`);
  if (kind !== KIND) return fail(`field "kind": expected ${JSON.stringify(KIND)}, got ${describe(kind)}`);

  const result = v.safeParse(KubeletConfigurationSchema, doc);
  if (!result.success) {
    const lines = formatIssues(result.issues, KubeletConfigurationSchema);
    const shown = lines.slice(0, 20).map((l) => `config file ${path}: ${l}`);
    if (lines.length > 20) shown.push(`config file ${path}: ... and ${lines.length - 20} more`);
    throw new ConfigError(shown.join("\n"));
  }
  resolveRelativePaths(result.output, dirname(deps.cwd === undefined ? path : resolve(deps.cwd, path)));
  deps.onFields?.(Object.keys(doc));
  return result.output;
}

/**
 * Go's decoder leaves a field alone when the document says `null` (as
 * `staticPodPath:` with nothing after it does); dropping null members
 * gives the same result.
 */
function dropNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(dropNulls);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (v !== null) out[k] = dropNulls(v);
  return out;
}

/** Iterative, so that it cannot itself overflow the stack. */
function depthExceeds(root: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[root, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop() as [unknown, number];
    if (node === null || typeof node !== "object") continue;
    if (depth >= max) return true;
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return false;
}

/** The path fields upstream resolves (pkg/kubelet/apis/config KubeletConfigurationPathRefs). */
function resolveRelativePaths(k: KubeletConfiguration, root: string): void {
  const abs = (p: string) => (p !== "" && !isAbsolute(p) ? join(root, p) : p);
  k.staticPodPath = abs(k.staticPodPath);
  k.authentication.x509.clientCAFile = abs(k.authentication.x509.clientCAFile);
  k.tlsCertFile = abs(k.tlsCertFile);
  k.tlsPrivateKeyFile = abs(k.tlsPrivateKeyFile);
  k.resolvConf = abs(k.resolvConf);
  k.volumePluginDir = abs(k.volumePluginDir);
  k.podLogsDir = abs(k.podLogsDir);
}
