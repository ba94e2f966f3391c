/**
 * The --help text: flags grouped by topic, in pflag's layout
 * (`  -v, --v Level   help (default ...)`), with the defaults that apply when
 * no --config file is given, and the config file field each flag sets.
 * Lines are wrapped to HELP_WIDTH columns (pflag does not wrap; a terminal
 * would, badly).
 */
import type { FlagDef, FlagGroup, FlagTarget } from "./flags.ts";
import { helpNote } from "./settings.ts";

const GROUPS: [FlagGroup, string][] = [
  ["config", "Configuration and API server"],
  ["node", "Node identity and registration"],
  ["pods", "Pods, images and the container runtime"],
  ["server", "Kubelet server and authentication"],
  ["network", "DNS and networking"],
  ["resources", "Resources and cgroups"],
  ["eviction", "Eviction"],
  ["logging", "Logging"],
  ["other", "Other"],
  ["deprecated", "Deprecated upstream"],
];

const INTRO = `The kubelet is the node agent. It runs the pods of this node through a CRI
container runtime: static pods from --pod-manifest-path, and with --kubeconfig
the pods the API server assigns to the node. Without --kubeconfig it runs
standalone.

Usage:
  kubelet [flags]
  kubelet install [--dry-run] [--prefix DIR]     set this node up around this binary: the binary,
                                                 kubelet.service, a secure config, directories
  kubelet uninstall [--dry-run] [--prefix DIR]   remove what install wrote (node data stays)
  kubelet install --help                         what install writes, in detail

Settings can come from a KubeletConfiguration file (--config); flags given on
the command line override it. The defaults shown are those used when no
--config is given: like upstream, they differ from the config file's defaults
for --anonymous-auth, --authentication-token-webhook and --authorization-mode.
Unlike upstream, the read-only port is off unless set. Every setting is acted on
or refused: a flag or field this agent does not act on exits 2 when set to
anything but its default (the note on its line says why). See
docs/configuration.md.`;

export function helpText(defs: readonly FlagDef[], defaults: FlagTarget): string {
  const out = [INTRO];
  for (const [group, title] of GROUPS) {
    const rows = defs
      .filter((d) => d.group === group)
      .map((d) => {
        const names = d.short ? `  -${d.short}, --${d.name}` : `      --${d.name}`;
        const left = d.type ? `${names} ${d.type}` : names;
        const notes: string[] = [];
        const def = d.showDefault?.(defaults);
        if (def !== undefined) notes.push(`default ${def}`);
        if (d.field) notes.push(`config: ${d.field}`);
        const refused = helpNote(d.field);
        if (refused) notes.push(refused);
        return [left, notes.length ? `${d.help} (${notes.join("; ")})` : d.help] as const;
      });
    if (rows.length === 0) continue;
    const width = Math.min(40, Math.max(...rows.map(([l]) => l.length)) + 3);
    out.push(`\n${title} flags:`);
    for (const [left, right] of rows) {
      const lines = wrap(right, HELP_WIDTH - width);
      out.push(left.length + 1 > width ? `${left}\n${" ".repeat(width)}${lines[0]}` : `${left.padEnd(width)}${lines[0]}`);
      for (const line of lines.slice(1)) out.push(`${" ".repeat(width)}${line}`);
    }
  }
  return out.join("\n") + "\n";
}

export const HELP_WIDTH = 100;

/** Splits text at spaces into lines of at most `width` characters (a longer word gets a line of its own). */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line !== "" && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  lines.push(line);
  return lines;
}
