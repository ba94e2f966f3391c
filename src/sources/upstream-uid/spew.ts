/**
 * go-spew's `%#v` as k8s.io/apimachinery's dump.ForHash configures it
 * (SortKeys, SpewKeys, DisableMethods, DisablePointerAddresses,
 * DisableCapacities), over a value in the internal type layout that
 * convert.ts builds: structs are objects keyed by Go field name (a missing
 * field is the zero value), `null`/`undefined` is a nil pointer, slice or
 * map, integers are numbers or bigints.
 *
 * The printed form: every struct field as `Name:(type)value`; the type is
 * left out for slice elements and map keys and values (go-spew's
 * ignoreNextType); a non-nil pointer prints `(*T)` then its target; nil
 * prints `<nil>`; maps print `map[k:v ...]` with keys sorted.
 */
import { coreSchema, typeInfo, type TypeInfo } from "./schema.ts";

const INT_KINDS = new Set(["int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64"]);

export function spewForHash(typeName: string, value: unknown): string {
  const out: string[] = [];
  format(typeName, value, false, out);
  return out.join("");
}

function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

function format(typeName: string, value: unknown, ignoreType: boolean, out: string[]): void {
  // The schema starts at core.Pod; the hashed value is a *core.Pod.
  const info = typeName.startsWith("*") && !(typeName in coreSchema) ? ({ kind: "ptr", elem: typeName.slice(1) } satisfies TypeInfo) : typeInfo(typeName);
  if (info.kind === "ptr") {
    if (value === null || value === undefined) {
      out.push(ignoreType ? "<nil>" : `(${typeName})<nil>`);
      return;
    }
    out.push(ignoreType ? "<*>" : `(*${info.elem})`);
    format(info.elem!, value, true, out);
    return;
  }
  if (!ignoreType) out.push(`(${typeName})`);
  switch (info.kind) {
    case "bool":
      out.push(value === true ? "true" : "false");
      return;
    case "string":
      out.push(typeof value === "string" ? value : "");
      return;
    case "slice": {
      if (value === null || value === undefined) {
        out.push("<nil>");
        return;
      }
      const items = value as unknown[];
      out.push("[");
      items.forEach((item, i) => {
        if (i > 0) out.push(" ");
        format(info.elem!, item, true, out);
      });
      out.push("]");
      return;
    }
    case "map": {
      if (value === null || value === undefined) {
        out.push("<nil>");
        return;
      }
      if (typeInfo(info.key!).kind !== "string") throw new Error(`spew: map key type ${info.key} is not a string`);
      const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => compareBytes(a, b));
      out.push("map[");
      entries.forEach(([k, v], i) => {
        if (i > 0) out.push(" ");
        format(info.key!, k, true, out);
        out.push(":");
        format(info.elem!, v, true, out);
      });
      out.push("]");
      return;
    }
    case "struct": {
      const obj = (value ?? {}) as Record<string, unknown>;
      out.push("{");
      info.fields!.forEach((f, i) => {
        if (i > 0) out.push(" ");
        out.push(`${f.name}:`);
        format(f.type, obj[f.name], false, out);
      });
      out.push("}");
      return;
    }
    default:
      if (INT_KINDS.has(info.kind)) {
        out.push(value === undefined || value === null ? "0" : String(value));
        return;
      }
      throw new Error(`spew: kind ${info.kind} of ${typeName} is not modelled`);
  }
}
