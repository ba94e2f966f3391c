/**
 * The `install` and `uninstall` subcommands (a bunlet extension: upstream's
 * kubelet is installed by packages). Plans with plan.ts, then carries the
 * steps out under the prefix, printing each; `--dry-run` only prints.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { posix } from "node:path";
import * as v from "valibot";
import { describeStep, planInstall, planUninstall, type DiskView, type Step } from "./plan.ts";

export const INSTALL_USAGE = `usage: kubelet install [--dry-run] [--prefix DIR]
       kubelet uninstall [--dry-run] [--prefix DIR]

install    puts this binary at /usr/bin/kubelet, writes /etc/systemd/system/kubelet.service,
           /etc/default/kubelet and /etc/kubernetes/kubelet.yaml (never overwriting edited
           ones), and makes /etc/kubernetes/manifests, /var/lib/kubelet and /var/log/pods.
uninstall  removes what install wrote; edited files and node data stay.
--dry-run  print what would be done, change nothing
--prefix   install below DIR instead of / (image builds, tests); no systemctl then;
           --prefix DIR and --prefix=DIR both work
`;

const Options = v.object({
  dryRun: v.boolean(),
  prefix: v.pipe(v.string(), v.startsWith("/", "--prefix must be an absolute path")),
});

export interface InstallDeps {
  /** The running executable, or undefined when not running as the compiled binary. */
  executable: string | undefined;
  out: (line: string) => void;
  systemdPresent: () => boolean;
  run: (argv: string[]) => { status: number | null; stderr: string };
}

export const realInstallDeps = (out: (line: string) => void): InstallDeps => ({
  // A compiled Bun executable runs its code from the embedded /$bunfs/ file system.
  executable: Bun.main.startsWith("/$bunfs/") ? process.execPath : undefined,
  out,
  systemdPresent: () => existsSync("/run/systemd/system"),
  run: (argv) => {
    const r = spawnSync(argv[0]!, argv.slice(1), { encoding: "utf8" });
    return { status: r.status, stderr: r.stderr ?? String(r.error ?? "") };
  },
});

/** Runs `install` or `uninstall` with its arguments; returns the exit code (2 for bad usage). */
export function runInstallCommand(command: "install" | "uninstall", args: string[], deps: InstallDeps): number {
  const raw = { dryRun: false, prefix: "/" };
  const rest = [...args];
  while (rest.length > 0) {
    const arg = rest.shift() as string;
    if (arg === "--dry-run") raw.dryRun = true;
    else if (arg.startsWith("--prefix=")) raw.prefix = arg.slice("--prefix=".length);
    // The space form, as the kubelet's own flags take it (pflag).
    else if (arg === "--prefix") {
      const value = rest.shift();
      if (value === undefined) {
        deps.out(`kubelet ${command}: flag --prefix needs a value (DIR)`);
        return 2;
      }
      raw.prefix = value;
    } else if (arg === "-h" || arg === "--help") {
      deps.out(INSTALL_USAGE);
      return 0;
    } else {
      deps.out(`kubelet ${command}: unknown argument ${JSON.stringify(arg)}\n${INSTALL_USAGE}`);
      return 2;
    }
  }
  const parsed = v.safeParse(Options, raw);
  if (!parsed.success) {
    deps.out(`kubelet ${command}: ${parsed.issues[0].message}`);
    return 2;
  }
  const { dryRun, prefix } = parsed.output;
  const at = (path: string) => posix.join(prefix, path);
  const disk: DiskView = {
    read: (path) => (existsSync(at(path)) && statSync(at(path)).isFile() ? new Uint8Array(readFileSync(at(path))) : undefined),
    isDir: (path) => existsSync(at(path)) && statSync(at(path)).isDirectory(),
  };
  const systemd = prefix === "/" && deps.systemdPresent();
  let steps: Step[];
  if (command === "install") {
    if (!deps.executable) {
      deps.out("kubelet install: run it from the compiled binary (bun run build makes dist/kubelet)");
      return 2;
    }
    steps = planInstall(disk, { prefix, binary: new Uint8Array(readFileSync(deps.executable)), systemd });
  } else {
    steps = planUninstall(disk, { systemd });
  }
  for (const step of steps) {
    // The paths as they are written: below the prefix.
    deps.out(describeStep(step, dryRun, at));
    if (dryRun) continue;
    const failure = carryOut(step, at, deps);
    if (failure) {
      deps.out(`kubelet ${command}: ${failure}`);
      return 1;
    }
  }
  if (!steps.some((s) => s.kind !== "keep")) deps.out(`nothing to do: already ${command === "install" ? "installed" : "uninstalled"}`);
  else if (command === "install" && !dryRun) deps.out(systemd ? "next: edit /etc/default/kubelet, then systemctl enable --now kubelet" : `installed below ${prefix}`);
  return 0;
}

function carryOut(step: Step, at: (p: string) => string, deps: InstallDeps): string | undefined {
  try {
    switch (step.kind) {
      case "mkdir":
        // Only the planned directory gets the step's mode (/var/lib/kubelet is 0700);
        // parents it needs (<prefix>/var, <prefix>/var/lib) are ordinary 0755 ones.
        makeParents(posix.dirname(at(step.path)));
        if (!existsSync(at(step.path))) mkdirSync(at(step.path), { mode: step.mode });
        chmodSync(at(step.path), step.mode);
        return undefined;
      case "write": {
        // Through a temporary name: a running /usr/bin/kubelet is replaced, never written in place.
        makeParents(posix.dirname(at(step.path)));
        const tmp = `${at(step.path)}.tmp`;
        writeFileSync(tmp, step.content, { mode: step.mode });
        chmodSync(tmp, step.mode);
        renameSync(tmp, at(step.path));
        return undefined;
      }
      case "remove":
        rmSync(at(step.path), { force: true });
        return undefined;
      case "keep":
        return undefined;
      case "run": {
        const r = deps.run(step.argv);
        return r.status === 0 ? undefined : `${step.argv.join(" ")} failed: ${r.stderr.trim()}`;
      }
    }
  } catch (err) {
    return `${describeStep(step, false, at)}: ${err instanceof Error ? err.message : String(err)}`;
  }
}

/** Creates dir and its missing parents as 0755 (whatever the umask), as package managers leave /var and /etc. */
function makeParents(dir: string): void {
  if (existsSync(dir)) return;
  makeParents(posix.dirname(dir));
  mkdirSync(dir, { mode: 0o755 });
  chmodSync(dir, 0o755);
}
