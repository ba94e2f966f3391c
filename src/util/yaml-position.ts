/**
 * Where a YAML syntax error is. Bun.YAML.parse says only "Unexpected token":
 * the line and column its SyntaxError carries are those of the JavaScript
 * that called it. So once Bun has refused a document, js-yaml parses the same
 * text to find the place. It is already in the binary (client-node's
 * kubeconfig loader imports it) and is loaded only here, on a refused
 * document: the agent's normal path pays nothing for it (memory, start time).
 * Bun stays the one that decides: js-yaml only locates.
 */

export interface YamlPosition {
  /** 1-based, as editors count. */
  line: number;
  column: number;
  /** js-yaml's account of what is wrong there ("bad indentation of a mapping entry"). */
  reason: string;
}

interface JsYaml {
  loadAll(text: string, each: (doc: unknown) => void, opts: { json: boolean }): void;
}
interface JsYamlException {
  reason?: string;
  mark?: { line: number; column: number };
}

/** The first syntax error js-yaml finds in `text`, or undefined when it finds none (the two parsers disagree). */
export function locateYamlError(text: string): YamlPosition | undefined {
  // Synchronous on purpose: decoding is (document loads are synchronous all the way up).
  const jsyaml = require("js-yaml") as JsYaml;
  try {
    // json: duplicate keys override as in Bun (and Go's YAML-to-JSON), instead of being an error here.
    jsyaml.loadAll(text, () => {}, { json: true });
  } catch (err) {
    const { mark, reason } = err as JsYamlException;
    if (!mark || typeof mark.line !== "number") return undefined;
    // ("; " joins several problems in the agent's messages: js-yaml's two-part reasons take a comma.)
    return { line: mark.line + 1, column: mark.column + 1, reason: (reason ?? "syntax error").replaceAll("; ", ", ") };
  }
  return undefined;
}
