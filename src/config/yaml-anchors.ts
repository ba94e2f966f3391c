/**
 * Finds YAML anchors (`&a`) and aliases (`*a`) in the source text, before it
 * is parsed. Bun's parser expands aliases into shared references, which is how
 * a few hundred bytes become gigabytes when walked ("billion laughs",
 * CVE-2019-11253). A structural check after parsing (src/util/decode.ts) only
 * sees aliases of collections; scanning the text refuses scalar aliases and
 * merge keys (`<<: *base`) too, and can say on which line.
 *
 * This is a scanner, not a parser: it tracks quoted scalars, comments, block
 * scalars and flow collections well enough to tell an indicator at the start
 * of a node from an `&` or `*` inside a value (`a: x*y`, `"*"`, `# &c`).
 * A plain scalar continued on the next line that starts with `*` or `&` is
 * reported too (a false positive, and a harmless one: quote the value).
 */

export interface AnchorHit {
  line: number;
  column: number;
  indicator: "&" | "*";
}

const isSpace = (c: string | undefined) => c === " " || c === "\t" || c === "\r";
const isBreak = (c: string | undefined) => c === "\n";
const isEnd = (c: string | undefined) => c === undefined || isSpace(c) || isBreak(c);

export function findAnchorOrAlias(text: string): AnchorHit | null {
  let i = 0;
  let line = 1;
  let lineStart = 0;
  let flow = 0; // depth of [...] / {...}
  let nodeStart = true; // a node (scalar, collection, tag, anchor, alias) may begin here
  let quotedEnd = -1; // index just after the last quoted scalar

  const newline = () => {
    line++;
    lineStart = i + 1;
  };
  const skipToEol = () => {
    while (i < text.length && !isBreak(text[i])) i++;
  };
  const indentAt = (start: number) => {
    let j = start;
    while (text[j] === " ") j++;
    return { indent: j - start, blank: j >= text.length || isBreak(text[j]) || text[j] === "\r" };
  };

  while (i < text.length) {
    const c = text[i] as string;
    if (isBreak(c)) {
      newline();
      i++;
      if (flow === 0) nodeStart = true;
      continue;
    }
    if (isSpace(c)) {
      i++;
      continue;
    }
    if (c === "#" && (i === lineStart || isSpace(text[i - 1]))) {
      skipToEol();
      continue;
    }
    if (!nodeStart) {
      const next = text[i + 1];
      if (c === ":" && (isEnd(next) || (flow > 0 && (quotedEnd === i || ",[]{}".includes(next ?? ""))))) nodeStart = true;
      else if (flow > 0 && c === ",") nodeStart = true;
      else if (flow > 0 && (c === "]" || c === "}")) flow--;
      i++;
      continue;
    }
    // At the start of a node.
    if (c === "&" || c === "*") return { line, column: i - lineStart + 1, indicator: c };
    if (c === "'" || c === '"') {
      i++;
      while (i < text.length) {
        const q = text[i];
        if (isBreak(q)) newline();
        if (c === '"' && q === "\\") i++;
        else if (q === c) {
          if (c === "'" && text[i + 1] === "'") i++;
          else break;
        }
        i++;
      }
      i++;
      quotedEnd = i;
      nodeStart = false;
      continue;
    }
    if (c === "[" || c === "{") {
      flow++;
      i++;
      continue;
    }
    if ((c === "]" || c === "}") && flow > 0) {
      flow--;
      nodeStart = false;
      i++;
      continue;
    }
    if ((c === "-" || c === "?" || c === ":") && isEnd(text[i + 1])) {
      i++;
      continue;
    }
    if (i === lineStart && (text.startsWith("---", i) || text.startsWith("...", i)) && isEnd(text[i + 3])) {
      i += 3;
      continue;
    }
    if (c === "%" && i === lineStart) {
      skipToEol();
      continue;
    }
    if (c === "!") {
      while (i < text.length && !isEnd(text[i]) && !(flow > 0 && ",[]{}".includes(text[i] ?? ""))) i++;
      continue;
    }
    if (flow > 0 && c === ",") {
      i++;
      continue;
    }
    if ((c === "|" || c === ">") && flow === 0) {
      // Block scalar: its content is every following line indented deeper than this one.
      const own = indentAt(lineStart).indent;
      skipToEol();
      while (i < text.length) {
        const { indent, blank } = indentAt(i + 1);
        if (!blank && indent <= own) break;
        i++;
        newline();
        skipToEol();
      }
      continue;
    }
    nodeStart = false; // a plain scalar begins
    i++;
  }
  return null;
}
