/**
 * Decodes YAML or JSON documents that come from outside (manifests, config
 * files, HTTP bodies). Input size is bounded and YAML aliases are refused:
 * Bun's parser expands `&x`/`*x` into shared references, which turns a small
 * "billion laughs" document into gigabytes when walked (CVE-2019-11253).
 */
import { locateYamlError, type YamlPosition } from "./yaml-position.ts";

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
      throw new DecodeError(`invalid JSON: ${(err as Error).message}`);
    }
  }
  let parsed: unknown;
  try {
    parsed = Bun.YAML.parse(text);
  } catch (err) {
    // Bun's message names no place ("YAML Parse error: Unexpected token"): say where, as upstream's "yaml: line N: ..." does.
    const bun = (err as Error).message.replace(/^YAML Parse error: /, "");
    let at: YamlPosition | undefined;
    try {
      at = locateYamlError(text);
    } catch {
      at = undefined; // (a stack overflow on absurd nesting, say): Bun's message alone then
    }
    throw new DecodeError(at ? `invalid YAML at line ${at.line}, column ${at.column}: ${at.reason} (${bun})` : `invalid YAML: ${bun}`);
  }
  // Bun returns an array for a multi-document stream; a single document that
  // is itself a list is indistinguishable, which manifests never are.
  const docs = Array.isArray(parsed) && /^---/m.test(text) ? parsed : [parsed];
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
