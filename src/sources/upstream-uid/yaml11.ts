/**
 * Plain YAML scalars that YAML 1.1 (go-yaml v2, which upstream's
 * sigs.k8s.io/yaml uses) and YAML 1.2 (Bun's parser) read differently:
 * `0644` (octal 420 vs decimal 644), `1_000` (1000 vs a string), `yes`/`on`/`n`
 * (booleans vs strings), as values or as keys. A manifest holding one decodes to another value here
 * than upstream, so its upstream UID cannot be computed from Bun's decoding.
 * Returns the first such scalar with its line, or undefined.
 */
const AMBIGUOUS = /^(?:[-+]?0[0-9_]+|[-+]?[0-9][0-9]*_[0-9_]*|y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$/;

export function yaml11Ambiguity(text: string): { line: number; scalar: string } | undefined {
  if (/^\s*[[{]/.test(text)) return undefined; // JSON
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    // The value after "key:" or "- ", or an item of a flow sequence/mapping; quoted scalars are never numbers or booleans.
    const line = lines[i]!.replace(/\s+#.*$/, "");
    const candidates: string[] = [];
    const m = /^\s*(?:-\s+)*(?:[^\s"'#][^:]*:\s+|-\s+)(.*)$/.exec(line);
    if (m) candidates.push(m[1]!.trim());
    // Keys too: `y: 1` is the key "true" there.
    const key = /^\s*(?:-\s+)*([^\s"'#{[][^:]*?)\s*:(?:\s|$)/.exec(line);
    if (key) candidates.push(key[1]!.trim());
    for (const part of line.split(/[[\]{},]/)) candidates.push(part.replace(/^[^:]*:\s+/, "").trim());
    for (const c of candidates) if (AMBIGUOUS.test(c)) return { line: i + 1, scalar: c };
  }
  return undefined;
}
