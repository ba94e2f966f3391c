/**
 * The v1 → internal conversion of a defaulted Pod manifest (JSON), driven by
 * the generated schema: each internal struct field takes the JSON value of
 * its v1 twin's key; the custom conversions of pkg/apis/core/v1
 * (conversion.go) that a Pod reaches are the hooks below. The result is in
 * the layout spew.ts prints. Unknown JSON keys are dropped, as upstream's
 * decoder drops them; a JSON value upstream would refuse, or a type this
 * code does not model, throws UnmodelledField.
 */
import { UnmodelledField } from "./errors.ts";
import { decodeQuantity, QuantityError } from "./quantity.ts";
import { typeInfo } from "./schema.ts";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

const INT_RANGES: Record<string, [number, number]> = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  int: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
};

/** Annotations the v1 → internal Pod conversion drops (dropInitContainerAnnotations). */
const INIT_CONTAINER_ANNOTATIONS = [
  "pod.beta.kubernetes.io/init-containers",
  "pod.alpha.kubernetes.io/init-containers",
  "pod.beta.kubernetes.io/init-container-statuses",
  "pod.alpha.kubernetes.io/init-container-statuses",
];

type Hook = (json: Obj, out: Obj) => void;

const HOOKS: Record<string, Hook> = {
  "core.Pod": (json, out) => {
    // The decoder clears the group/version/kind of the internal object it returns.
    out.TypeMeta = {};
    const meta = out.ObjectMeta as Obj;
    const annotations = meta.Annotations as Obj | null;
    if (annotations && INIT_CONTAINER_ANNOTATIONS.some((k) => k in annotations)) {
      meta.Annotations = Object.fromEntries(Object.entries(annotations).filter(([k]) => !INIT_CONTAINER_ANNOTATIONS.includes(k)));
    }
    const spec = out.Spec as Obj;
    if (typeof spec.TerminationGracePeriodSeconds === "number" && spec.TerminationGracePeriodSeconds < 0) spec.TerminationGracePeriodSeconds = 1;
    void json;
  },
  "core.PodSpec": (json, out) => {
    // DeprecatedServiceAccount is an alias of ServiceAccountName; the host namespaces move into the security context.
    if (out.ServiceAccountName === "") out.ServiceAccountName = leaf("string", json.serviceAccount, "spec.serviceAccount");
    const sc = (out.SecurityContext as Obj | null) ?? {};
    out.SecurityContext = sc;
    sc.HostNetwork = leaf("bool", json.hostNetwork, "spec.hostNetwork");
    sc.HostPID = leaf("bool", json.hostPID, "spec.hostPID");
    sc.HostIPC = leaf("bool", json.hostIPC, "spec.hostIPC");
    sc.ShareProcessNamespace = json.shareProcessNamespace == null ? null : leaf("bool", json.shareProcessNamespace, "spec.shareProcessNamespace");
    sc.HostUsers = json.hostUsers == null ? null : leaf("bool", json.hostUsers, "spec.hostUsers");
  },
};

function leaf(kind: string, v: unknown, path: string): unknown {
  if (v === undefined || v === null) return kind === "string" ? "" : kind === "bool" ? false : 0;
  switch (kind) {
    case "string":
      if (typeof v !== "string") throw new UnmodelledField(path, `expected a string, got ${typeof v}`);
      return v;
    case "bool":
      if (typeof v !== "boolean") throw new UnmodelledField(path, `expected a boolean, got ${typeof v}`);
      return v;
    default: {
      const range = INT_RANGES[kind];
      if (!range) throw new UnmodelledField(path, `Go kind ${kind} is not modelled`);
      if (typeof v !== "number" || !Number.isInteger(v) || v < range[0] || v > range[1]) throw new UnmodelledField(path, `expected an ${kind}, got ${JSON.stringify(v)}`);
      return v;
    }
  }
}

function quantity(v: unknown, path: string, roundToMilli: boolean): unknown {
  try {
    return decodeQuantity(v, { roundToMilli });
  } catch (err) {
    if (err instanceof QuantityError) throw new UnmodelledField(path, err.message);
    throw err;
  }
}

/** Converts the JSON value `v` of a v1 field into the internal type `typeName`. */
export function convert(typeName: string, v: unknown, path: string, inResourceList = false): unknown {
  switch (typeName) {
    case "resource.Quantity":
      if (v === undefined) return { i: { value: 0n, scale: 0 }, d: { Dec: null }, s: "", Format: "" };
      if (v === null) throw new UnmodelledField(path, "a null quantity is not modelled");
      return quantity(v, path, inResourceList);
    case "intstr.IntOrString":
      if (v === undefined || v === null) return { Type: 0, IntVal: 0, StrVal: "" };
      if (typeof v === "string") return { Type: 1, IntVal: 0, StrVal: v };
      return { Type: 0, IntVal: leaf("int32", v, path), StrVal: "" };
    case "v1.Time":
      if (v === undefined || v === null) return {};
      throw new UnmodelledField(path, "a timestamp is not modelled");
  }
  const info = typeInfo(typeName);
  switch (info.kind) {
    case "ptr":
      return v === undefined || v === null ? null : convert(info.elem!, v, path, inResourceList);
    case "slice":
      if (v === undefined || v === null) return null;
      if (!Array.isArray(v)) throw new UnmodelledField(path, `expected a list, got ${typeof v}`);
      if (typeInfo(info.elem!).kind === "uint8") throw new UnmodelledField(path, "byte strings are not modelled");
      return v.map((item, i) => convert(info.elem!, item, `${path}[${i}]`));
    case "map": {
      if (v === undefined || v === null) return null;
      if (!isObj(v)) throw new UnmodelledField(path, `expected an object, got ${typeof v}`);
      if (typeInfo(info.key!).kind !== "string") throw new UnmodelledField(path, `map keys of ${info.key} are not modelled`);
      const resourceList = typeName === "core.ResourceList";
      return Object.fromEntries(Object.entries(v).map(([k, item]) => [k, convert(info.elem!, item, `${path}.${k}`, resourceList)]));
    }
    case "struct":
      if (v === undefined || v === null) return {};
      if (!isObj(v)) throw new UnmodelledField(path, `expected an object, got ${typeof v}`);
      return convertStruct(typeName, v, path);
    default:
      return leaf(info.kind, v, path);
  }
}

function convertStruct(typeName: string, json: Obj, path: string): Obj {
  const info = typeInfo(typeName);
  const hook = HOOKS[typeName];
  if (!hook) {
    for (const f of info.v1Only ?? [])
      if (f.json && json[f.json] != null) throw new UnmodelledField(`${path}.${f.json}`, `the conversion of v1 ${typeName}.${f.name} is not modelled`);
  }
  const out: Obj = {};
  for (const f of info.fields ?? []) {
    if (f.inline && !f.json) {
      out[f.name] = convert(f.type, json, path);
      continue;
    }
    if (!f.json) continue; // no v1 twin: zero, or set by the hook
    const value = json[f.json];
    const at = path ? `${path}.${f.json}` : f.json;
    if (f.v1Type) {
      if (f.v1Type !== `*${f.type}`) throw new UnmodelledField(at, `v1 type ${f.v1Type} → ${f.type} is not modelled`);
      out[f.name] = value === null || value === undefined ? 0 : convert(f.type, value, at);
      continue;
    }
    out[f.name] = convert(f.type, value, at);
  }
  hook?.(json, out);
  return out;
}
