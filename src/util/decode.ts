/**
 * Decodes YAML or JSON documents that come from outside (manifests, config
 * files, HTTP bodies). Input size is bounded and YAML aliases are refused:
 * the parser expands `&x`/`*x` into shared references, which turns a small
 * "billion laughs" document into gigabytes when walked (CVE-2019-11253).
 */
import type * as Yaml11 from "./yaml11.ts";

export const MAX_DOCUMENT_BYTES = 1 << 20;

export class DecodeError extends Error {
  override readonly name = "DecodeError";
}

/** Returns every document in `text` (YAML streams may hold several). */
export function decodeDocuments(text: string, opts: { maxBytes?: number } = {}): unknown[] {
  const maxBytes = opts.maxBytes ?? MAX_DOCUMENT_BYTES;
  const size = Buffer.byteLength(text);
  if (size > maxBytes) throw new DecodeError(`document is ${size} bytes, more than the limit of ${maxBytes}`);
  const trimmed = text.trimStart();
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      return [JSON.parse(text)];
    } catch (err) {
      // YAML's flow style starts the same way (`{a: off}`): JSON's message when that fails too.
      try {
        return decodeYaml(text);
      } catch {
        throw new DecodeError(`invalid JSON: ${(err as Error).message}`);
      }
    }
  }
  return decodeYaml(text);
}

function decodeYaml(text: string): unknown[] {
  let docs: unknown[];
  if (YAML11_DIFFERS.test(text)) {
    // A plain scalar upstream's decoder (YAML 1.1) reads otherwise than Bun's (YAML 1.2): `0644` is 420 there.
    docs = parseYaml11(text);
  } else {
    let parsed: unknown;
    try {
      parsed = Bun.YAML.parse(text);
    } catch (err) {
      // Bun's message names no place ("Unexpected token"): js-yaml's parse of the same text says where.
      parseYaml11(text);
      throw new DecodeError(`invalid YAML: ${(err as Error).message.replace(/^YAML Parse error: /, "")}`);
    }
    // Bun returns an array for a multi-document stream; a single document that
    // is itself a list is indistinguishable, which manifests never are.
    docs = Array.isArray(parsed) && /^---/m.test(text) ? parsed : [parsed];
  }
  for (const doc of docs) refuseSharedReferences(doc);
  return docs.filter((d) => d !== null && d !== undefined);
}

/** Every YAML alias shows up as an object reached twice; refuse the first. */
function refuseSharedReferences(root: unknown): void {
  const seen = new Set<object>();
  const stack: unknown[] = [root];
  while (stack.length) {
    const node = stack.pop();
    if (node === null || typeof node !== "object") continue;
    if (seen.has(node)) throw new DecodeError("YAML anchors and aliases are not allowed");
    seen.add(node);
    for (const child of Object.values(node)) stack.push(child);
  }
}

/**
 * A plain scalar that YAML 1.1 and YAML 1.2 read differently: a leading-zero
 * or underscored or 0b number, or a YAML 1.1 boolean word. Matched as a token
 * anywhere (inside quotes and comments too): a false hit only costs the slower
 * parser, a miss would decode another value than upstream.
 */
const YAML11_DIFFERS =
  /(?:^|[\s,[\]{}:])(?:[-+]?0[0-9_]+(?:\.[0-9_]*)?|[-+]?[0-9][0-9_]*_[0-9_.]*|[-+]?0[bB][01_]+|[yYnN]|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF)(?=$|[\s,[\]{}:#])/m;

/** YAML 1.1 as upstream reads it (util/yaml11.ts); js-yaml loads only for a document that needs it (memory). */
function parseYaml11(text: string): unknown[] {
  const yaml11 = require("./yaml11.ts") as typeof Yaml11;
  try {
    return yaml11.parseYamlStream(text);
  } catch (err) {
    if (err instanceof yaml11.YamlError) throw new DecodeError(err.message);
    throw new DecodeError(`invalid YAML: ${(err as Error).message}`); // (a stack overflow on absurd nesting, say)
  }
}
