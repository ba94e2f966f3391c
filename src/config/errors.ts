/**
 * Configuration errors. Every message names where the problem is (a config
 * file field path, or a flag) and what was expected, so an operator can fix
 * it without reading the source.
 */
import type * as v from "valibot";
import { describe } from "./fields.ts";
import { closest } from "./validators.ts";

/** Thrown inside src/config and turned into `{ kind: "error" }` by loadConfig; never escapes it. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

type AnySchema = v.GenericSchema & { type: string; entries?: v.ObjectEntries; wrapped?: unknown; item?: unknown; value?: unknown };

/** Renders a valibot issue path as `a.b[0].c`. */
export function issuePath(issue: v.BaseIssue<unknown>): string {
  let out = "";
  for (const item of issue.path ?? []) {
    const key = (item as { key: unknown }).key;
    if (typeof key === "number") out += `[${key}]`;
    else out += out ? `.${String(key)}` : String(key);
  }
  return out;
}

/** One line per issue: `field "evictionHard.memory.available": expected ..., got ...`. */
export function formatIssues(issues: readonly v.BaseIssue<unknown>[], root: v.GenericSchema): string[] {
  return issues.map((issue) => {
    const path = issuePath(issue);
    // By the path's length, not its text: an empty key ("": 1) is still a field to name.
    const field = issue.path?.length ? `field ${JSON.stringify(path)}: ` : "";
    return field + issueMessage(issue, root);
  });
}

function issueMessage(issue: v.BaseIssue<unknown>, root: v.GenericSchema): string {
  const keys = (issue.path ?? []).map((p) => (p as { key: unknown }).key);
  if (issue.type === "strict_object") {
    if (issue.expected === "never") {
      const known = Object.keys(entriesAt(root as AnySchema, keys.slice(0, -1)) ?? {});
      const hint = closest(String(keys.at(-1)), known);
      return `unknown field${hint ? ` (did you mean ${JSON.stringify(hint)}?)` : ""}`;
    }
    if (issue.input === undefined && keys.length > 0) return "is required";
    return `expected an object, got ${describe(issue.input)}`;
  }
  // Our schemas carry their own messages; valibot's defaults ("Invalid type: ...") remain only for lists and maps without one.
  if (!issue.message.startsWith("Invalid ")) return issue.message;
  if (issue.type === "array") return `expected a list, got ${describe(issue.input)}`;
  if (issue.type === "record") return `expected an object, got ${describe(issue.input)}`;
  return issue.message.replace(/^Invalid \w+: /, "");
}

/** The entries of the object schema found at `keys` below `schema`, for "did you mean". */
function entriesAt(schema: AnySchema | undefined, keys: unknown[]): v.ObjectEntries | undefined {
  let s = schema;
  for (const key of [...keys, undefined]) {
    while (s && (s.type === "optional" || s.type === "nullable" || s.type === "nullish")) s = s.wrapped as AnySchema;
    if (!s) return undefined;
    if (key === undefined) return s.entries;
    if (s.entries) s = s.entries[String(key)] as AnySchema | undefined;
    else if (s.type === "array") s = s.item as AnySchema;
    else if (s.type === "record") s = s.value as AnySchema;
    else return undefined;
  }
  return undefined;
}
