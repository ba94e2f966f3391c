/**
 * Container environment: `value`s with $(VAR) references expanded against
 * the variables defined before them (upstream third_party/forked/golang/expansion),
 * and the `fieldRef`s the agent can answer. Other sources are an error the
 * pod reports as CreateContainerConfigError, never silently dropped.
 */
import type { ContainerSpec, Pod } from "../pods/schema.ts";

export class EnvError extends Error {
  override readonly name = "EnvError";
}

/** Expands $(VAR); $$ escapes a dollar; unknown references stay as written. */
export function expand(input: string, lookup: (name: string) => string | undefined): string {
  let out = "";
  for (let i = 0; i < input.length; i++) {
    const ch = input[i];
    if (ch !== "$" || i + 1 >= input.length) {
      out += ch;
      continue;
    }
    const next = input[i + 1];
    if (next === "$") {
      out += "$";
      i++;
    } else if (next === "(") {
      const close = input.indexOf(")", i + 2);
      if (close === -1) {
        out += input.slice(i);
        break;
      }
      const name = input.slice(i + 2, close);
      const value = lookup(name);
      out += value ?? `$(${name})`;
      i = close;
    } else {
      out += ch;
    }
  }
  return out;
}

export interface FieldValues {
  podIP?: string;
  hostIP?: string;
}

function fieldRef(pod: Pod, path: string, values: FieldValues): string {
  switch (path) {
    case "metadata.name":
      return pod.metadata.name ?? "";
    case "metadata.namespace":
      return pod.metadata.namespace ?? "default";
    case "metadata.uid":
      return pod.metadata.uid ?? "";
    case "spec.nodeName":
      return pod.spec.nodeName ?? "";
    case "spec.serviceAccountName":
      return String((pod.spec as Record<string, unknown>).serviceAccountName ?? "");
    case "status.podIP":
      return values.podIP ?? "";
    case "status.hostIP":
      return values.hostIP ?? "";
  }
  const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
  if (m) return (m[1] === "labels" ? pod.metadata.labels : pod.metadata.annotations)?.[m[2]!] ?? "";
  throw new EnvError(`unsupported fieldRef.fieldPath "${path}"`);
}

export function containerEnv(pod: Pod, container: ContainerSpec, values: FieldValues): { key: string; value: string }[] {
  const vars = new Map<string, string>();
  for (const e of container.env ?? []) {
    let value: string;
    if (e.valueFrom) {
      const ref = (e.valueFrom as { fieldRef?: { fieldPath?: string } }).fieldRef;
      if (!ref?.fieldPath) throw new EnvError(`env "${e.name}": only valueFrom.fieldRef is supported so far`);
      value = fieldRef(pod, ref.fieldPath, values);
    } else {
      value = expand(e.value ?? "", (name) => vars.get(name));
    }
    vars.set(e.name, value);
  }
  return [...vars].map(([key, value]) => ({ key, value }));
}

export function expandCommand(args: readonly string[] | undefined, env: { key: string; value: string }[]): string[] {
  const vars = new Map(env.map((e) => [e.key, e.value]));
  return (args ?? []).map((a) => expand(a, (name) => vars.get(name)));
}
