/**
 * valibot building blocks for the KubeletConfiguration schema, each with a
 * message that says what was expected and what was found. Go's JSON decoder
 * is strict about types (a string is never a number), so these are too.
 */
import * as v from "valibot";
import { parseDuration, type Milliseconds } from "./duration.ts";
import { isQuantity, isThreshold } from "./quantity.ts";

/** Renders a decoded YAML/JSON value for an error message. */
export function describe(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "an object";
  if (typeof value === "string") return JSON.stringify(value);
  return String(value);
}

const expect = (what: string) => (issue: v.BaseIssue<unknown>) => `expected ${what}, got ${describe(issue.input)}`;

export const str = () => v.string(expect("a string"));
export const bool = () => v.boolean(expect("true or false"));
export const float = () => v.pipe(v.number(expect("a number")), v.finite(expect("a finite number")));

const int = (bits: 32 | 64) => {
  const [min, max] = bits === 32 ? [-(2 ** 31), 2 ** 31 - 1] : [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER];
  const what = `an integer (int${bits})`;
  return v.pipe(v.number(expect(what)), v.integer(expect(what)), v.minValue(min, expect(what)), v.maxValue(max, expect(what)));
};
export const int32 = () => int(32);
export const int64 = () => int(64);

/** A Go duration string ("1m0s", "10s", "500ms"), converted to milliseconds. */
export const duration = () =>
  v.pipe(
    v.string(expect('a duration string like "1m0s" or "500ms"')),
    v.rawTransform(({ dataset, addIssue, NEVER }): Milliseconds => {
      try {
        return parseDuration(dataset.value);
      } catch {
        addIssue({ message: `expected a duration like "1m0s" or "500ms", got ${describe(dataset.value)}` });
        return NEVER;
      }
    }),
    // Read back by writers of the Go form (configz): this field is a metav1.Duration.
    v.metadata({ goType: "duration" }),
  );

/** A resource quantity ("100Mi", "500m"); kept as the string, checked here. */
export const quantity = () => v.pipe(v.string(expect('a quantity like "100Mi"')), v.check(isQuantity, expect('a quantity like "100Mi"')));

/** An eviction threshold: a non-negative quantity or a percentage in [0%, 100%]. */
export const threshold = () =>
  v.pipe(v.string(expect('a quantity like "100Mi" or a percentage like "10%"')), v.check(isThreshold, expect('a quantity like "100Mi" or a percentage like "10%"')));

export const strList = () => v.array(str(), expect("a list of strings"));
export const strMap = () => v.record(v.string(), str(), expect("an object of string values"));

/** Marks a field optional; absent and null (which Go's decoder ignores) both leave it unset. */
export const opt = <T extends v.GenericSchema>(schema: T) => v.optional(schema);

/** The strict object every level of the config file uses: unknown fields are errors. */
export const obj = <T extends v.ObjectEntries>(entries: T) => v.strictObject(entries);
