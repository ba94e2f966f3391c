/**
 * A NodeSelector (required node affinity of a pod or of a persistent
 * volume) against one node, as upstream's nodeaffinity helper reads it:
 * terms are ORed, the requirements within a term ANDed, and a term with no
 * requirement matches nothing.
 */
export type NodeSelectorRequirement = { key: string; operator: string; values?: string[] };
export type NodeSelectorTerm = { matchExpressions?: NodeSelectorRequirement[]; matchFields?: NodeSelectorRequirement[] };

/** True when there are no terms (nothing required). */
export function nodeMatchesTerms(terms: NodeSelectorTerm[] | undefined, node: { name: string; labels: Record<string, string> }): boolean {
  if (!terms?.length) return true;
  return terms.some(
    (t) =>
      Boolean(t.matchExpressions?.length || t.matchFields?.length) &&
      (t.matchExpressions ?? []).every((r) => matchesRequirement(node.labels, r)) &&
      (t.matchFields ?? []).every((r) => matchesRequirement({ "metadata.name": node.name }, r)),
  );
}

function matchesRequirement(labels: Record<string, string>, r: NodeSelectorRequirement): boolean {
  const v = labels[r.key];
  switch (r.operator) {
    case "In":
      return v !== undefined && (r.values ?? []).includes(v);
    case "NotIn":
      return v === undefined || !(r.values ?? []).includes(v);
    case "Exists":
      return v !== undefined;
    case "DoesNotExist":
      return v === undefined;
    case "Gt":
    case "Lt": {
      const n = Number(v);
      const bound = Number(r.values?.[0]);
      return v !== undefined && Number.isFinite(n) && (r.operator === "Gt" ? n > bound : n < bound);
    }
    default:
      return false;
  }
}
