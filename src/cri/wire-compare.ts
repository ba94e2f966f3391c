/**
 * Compares two protobuf-ts generated CRI modules field by field: message
 * and enum names, field numbers, names, scalar types, repetition, map and
 * oneof shape, enum values, and every service method's path, input, output
 * and streaming mode. Used by `scripts/gen-cri.sh --verify <cri-api version>`
 * to prove proto/api.proto is wire-exact with an upstream release; never
 * imported by the agent.
 *
 *   bun src/cri/wire-compare.ts <ours/api.ts> <theirs/api.ts>
 *   bun src/cri/wire-compare.ts --subset <ours/api.ts> <theirs/api.ts>
 *
 * --subset: ours declares only part of the upstream API (the CSI calls a
 * node agent makes); every line of ours must be upstream's, and what only
 * upstream has is counted, not reported.
 */
import type { FieldInfo, IMessageType } from "@protobuf-ts/runtime";
import type { ServiceType } from "@protobuf-ts/runtime-rpc";

type Module = Record<string, unknown>;

function isMessageType(v: unknown): v is IMessageType<object> {
  return typeof v === "object" && v !== null && "typeName" in v && "fields" in v && Array.isArray((v as { fields: unknown }).fields);
}

function isServiceType(v: unknown): v is ServiceType {
  return typeof v === "object" && v !== null && "typeName" in v && "methods" in v && Array.isArray((v as { methods: unknown }).methods);
}

function describeEnum(e: unknown): string {
  const [name, obj] = e as [string, Record<string, string | number>];
  const values = Object.entries(obj)
    .filter(([, v]) => typeof v === "number")
    .map(([k, v]) => `${k}=${v}`)
    .sort();
  return `${name}{${values.join(",")}}`;
}

function describeField(f: FieldInfo): string {
  const parts = [`${f.no}`, f.name, f.kind, f.repeat ? `repeat${f.repeat}` : "", f.oneof ? `oneof:${f.oneof}` : ""];
  switch (f.kind) {
    case "scalar":
      parts.push(`T${f.T}`, f.L !== undefined ? `L${f.L}` : "");
      break;
    case "enum":
      parts.push(describeEnum(f.T()));
      break;
    case "message":
      parts.push(f.T().typeName);
      break;
    case "map":
      parts.push(`K${f.K}`);
      if (f.V.kind === "scalar") parts.push(`V${f.V.T}`);
      else if (f.V.kind === "enum") parts.push(describeEnum(f.V.T()));
      else parts.push(f.V.T().typeName);
      break;
  }
  return parts.filter(Boolean).join(" ");
}

/** One line per message field, enum and method, sorted: equal sets mean equal wire. */
export function wireSignature(mod: Module): string[] {
  const lines: string[] = [];
  for (const v of Object.values(mod)) {
    if (isMessageType(v)) {
      lines.push(`message ${v.typeName}`);
      for (const f of v.fields) lines.push(`  ${v.typeName}.${describeField(f)}`);
    } else if (isServiceType(v)) {
      for (const m of v.methods) {
        const mode = `${m.clientStreaming ? "stream " : ""}${m.I.typeName} -> ${m.serverStreaming ? "stream " : ""}${m.O.typeName}`;
        lines.push(`rpc /${v.typeName}/${m.name} ${mode}`);
      }
    }
  }
  return lines.sort();
}

export function diffSignatures(ours: string[], theirs: string[]): { missing: string[]; extra: string[] } {
  const a = new Set(ours);
  const b = new Set(theirs);
  return { missing: theirs.filter((l) => !a.has(l)), extra: ours.filter((l) => !b.has(l)) };
}

if (import.meta.main) {
  const subset = process.argv[2] === "--subset";
  const [oursPath, theirsPath] = process.argv.slice(subset ? 3 : 2);
  if (!oursPath || !theirsPath) {
    console.error("usage: bun src/cri/wire-compare.ts [--subset] <ours/api.ts> <theirs/api.ts>");
    process.exit(2);
  }
  const ours = wireSignature((await import(oursPath)) as Module);
  const theirs = wireSignature((await import(theirsPath)) as Module);
  const diff = diffSignatures(ours, theirs);
  const { extra } = diff;
  const missing = subset ? [] : diff.missing;
  for (const l of missing) console.log(`- upstream only: ${l}`);
  for (const l of extra) console.log(`+ ours only:     ${l}`);
  const rpcs = ours.filter((l) => l.startsWith("rpc ")).length;
  const messages = ours.filter((l) => l.startsWith("message ")).length;
  if (missing.length || extra.length) {
    console.log(`wire-compare: ${missing.length + extra.length} difference(s)`);
    process.exit(1);
  }
  const left = subset ? `; ${diff.missing.length} upstream lines not declared` : "";
  console.log(`wire-compare: ${subset ? "a subset" : "identical"} (${messages} messages, ${rpcs} rpcs, ${ours.length} lines${left})`);
}
