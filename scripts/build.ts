// Builds the agent into one executable:
//   bun scripts/build.ts                      -> dist/kubelet (this machine's target)
//   bun scripts/build.ts --target=bun-linux-arm64 [--outfile=dist/kubelet-linux-arm64]
//   bun scripts/build.ts --version=1.2.3      (override the embedded version)
//   bun scripts/build.ts --entry=src/main.ts --no-minify
//
// The version is fixed at build time: `BUILD_VERSION` is replaced by a string
// literal (`bun build --define`), "<package.json version>+<git describe
// --always --dirty>" when git can describe the tree. src/main.ts reads it as
// `declare const BUILD_VERSION: string | undefined` and checks
// `typeof BUILD_VERSION !== "undefined"` so it also runs unbuilt.
import { join, resolve } from "node:path";

const repoRoot = resolve(import.meta.dir, "..");

interface Options {
  entry: string;
  target?: string;
  outfile: string;
  version: string;
  minify: boolean;
}

function usage(msg: string): never {
  console.error(`build: ${msg}
usage: bun scripts/build.ts [--target=bun-linux-x64|bun-linux-arm64|bun-linux-x64-musl|...]
                            [--outfile=PATH] [--version=STRING] [--entry=FILE] [--no-minify]`);
  process.exit(2);
}

function gitDescribe(): string | undefined {
  const r = Bun.spawnSync(["git", "describe", "--always", "--dirty"], { cwd: repoRoot, stdout: "pipe", stderr: "ignore" });
  const out = r.exitCode === 0 ? r.stdout.toString().trim() : "";
  return out === "" ? undefined : out;
}

async function defaultVersion(): Promise<string> {
  const pkg = (await Bun.file(join(repoRoot, "package.json")).json()) as { version?: string };
  const base = pkg.version ?? "0.0.0";
  const git = gitDescribe();
  return git ? `${base}+${git}` : base;
}

async function parseArgs(argv: string[]): Promise<Options> {
  let entry = "src/main.ts";
  let target: string | undefined;
  let outfile: string | undefined;
  let version: string | undefined;
  let minify = true;
  for (const arg of argv) {
    const [key, value] = arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined];
    switch (key) {
      case "--target":
        target = value || usage("--target needs a value");
        break;
      case "--outfile":
        outfile = value || usage("--outfile needs a value");
        break;
      case "--version":
        version = value || usage("--version needs a value");
        break;
      case "--entry":
        entry = value || usage("--entry needs a value");
        break;
      case "--no-minify":
        minify = false;
        break;
      default:
        usage(`unknown argument ${arg}`);
    }
  }
  // dist/kubelet for the host; dist/kubelet-linux-arm64 for --target=bun-linux-arm64.
  outfile ??= target ? `dist/kubelet-${target.replace(/^bun-/, "")}` : "dist/kubelet";
  return { entry, target, outfile, version: version ?? (await defaultVersion()), minify };
}

const opts = await parseArgs(Bun.argv.slice(2));
const cmd = [
  process.execPath,
  "build",
  "--compile",
  ...(opts.minify ? ["--minify"] : []),
  ...(opts.target ? [`--target=${opts.target}`] : []),
  `--define`,
  `BUILD_VERSION=${JSON.stringify(opts.version)}`,
  // A node agent must not pick up a stray .env or bunfig.toml from whatever
  // directory it is started in.
  "--no-compile-autoload-dotenv",
  "--no-compile-autoload-bunfig",
  opts.entry,
  "--outfile",
  opts.outfile,
];
console.log(`build: ${opts.outfile} version ${opts.version}${opts.target ? ` target ${opts.target}` : ""}`);
const t0 = performance.now();
const proc = Bun.spawn(cmd, { cwd: repoRoot, stdout: "inherit", stderr: "inherit" });
const code = await proc.exited;
if (code !== 0) {
  console.error(`build: bun build exited ${code}`);
  process.exit(code);
}
const size = Bun.file(resolve(repoRoot, opts.outfile)).size;
console.log(`build: wrote ${opts.outfile} (${(size / 1048576).toFixed(1)} MiB) in ${Math.round(performance.now() - t0)} ms`);
