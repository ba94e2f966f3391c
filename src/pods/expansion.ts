/**
 * $(VAR) references in a container's command, args, env values and
 * subPathExpr, expanded as upstream's third_party/forked/golang/expansion
 * does: the runtime (env), the prober (exec commands) and the volume
 * manager (subPathExpr) share this one reading of the spec.
 */

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

/** A command or args with the container's environment expanded into it. */
export function expandCommand(args: readonly string[] | undefined, env: { key: string; value: string }[]): string[] {
  const vars = new Map(env.map((e) => [e.key, e.value]));
  return (args ?? []).map((a) => expand(a, (name) => vars.get(name)));
}
