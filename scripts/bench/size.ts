// The binary's size by part (issue #24): the Bun runtime (a compiled program
// that imports nothing), the agent's bundle inside it (the `.bun` payload),
// and the bundle split by the bundler's own metafile into generated protobuf
// code (src/**/gen/), the agent's own code, data (JSON), and each dependency.
// Also the size with and without minification, and the upstream kubelet's
// size when it is built (scripts/controlplane/build.sh --with-kubelet).
//
// Run: bun run bench:size   (compiles a few executables into a temporary directory; a few seconds)
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { controlPlaneBinDir } from "../../test/harness/controlplane.ts";

const repoRoot = resolve(import.meta.dir, "../..");
const ENTRY = join(repoRoot, "src/main.ts");
const dir = mkdtempSync(join(tmpdir(), "bunlet-size-"));
const MiB = 2 ** 20;

/** `bun build --compile` as scripts/build.ts runs it; the executable's size in bytes. */
function compile(entry: string, out: string, flags: string[]): number {
  const r = Bun.spawnSync(
    [process.execPath, "build", "--compile", ...flags, "--define", 'BUILD_VERSION="size"', "--no-compile-autoload-dotenv", "--no-compile-autoload-bunfig", entry, "--outfile", out],
    { cwd: repoRoot, stdout: "pipe", stderr: "pipe" },
  );
  if (r.exitCode !== 0) throw new Error(`bun build ${entry} exited ${r.exitCode}: ${r.stderr.toString()}`);
  return statSync(out).size;
}

/** Which part of the binary a bundled input belongs to. */
export function partOf(path: string): string {
  const nm = path.lastIndexOf("node_modules/");
  if (nm >= 0) {
    const rest = path.slice(nm + "node_modules/".length).split("/");
    return `dependency ${rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  if (/(^|\/)gen\//.test(path)) return "generated protobuf code (src/**/gen/)";
  if (path.endsWith(".json")) return "data (JSON schemas)";
  if (path.startsWith("src/") || path.includes("/src/")) return "the agent's own code";
  return `other (${path})`;
}

interface Metafile {
  outputs: Record<string, { bytes: number; inputs: Record<string, { bytesInOutput: number }> }>;
}

try {
  const empty = join(dir, "empty.ts");
  writeFileSync(empty, "export {};\n");
  const runtime = compile(empty, join(dir, "empty"), ["--minify"]);
  const minified = compile(ENTRY, join(dir, "kubelet"), ["--minify"]);
  const plain = compile(ENTRY, join(dir, "kubelet-unminified"), []);
  const bytecode = compile(ENTRY, join(dir, "kubelet-bytecode"), ["--minify", "--bytecode"]);
  const build = await Bun.build({ entrypoints: [ENTRY], target: "bun", minify: true, metafile: true, define: { BUILD_VERSION: '"size"' } } as Parameters<typeof Bun.build>[0] & {
    metafile: boolean;
  });
  if (!build.success) throw new Error(`Bun.build failed: ${build.logs.join("\n")}`);
  const meta = (build as unknown as { metafile: Metafile }).metafile;
  const parts = new Map<string, number>();
  let bundle = 0;
  for (const out of Object.values(meta.outputs)) {
    bundle += out.bytes;
    for (const [path, input] of Object.entries(out.inputs)) parts.set(partOf(path), (parts.get(partOf(path)) ?? 0) + input.bytesInOutput);
  }
  let upstream: number | undefined;
  try {
    upstream = statSync(join(controlPlaneBinDir(), "kubelet")).size;
  } catch {
    upstream = undefined;
  }
  const mib = (n: number) => `${(n / MiB).toFixed(2)} MiB`;
  const kib = (n: number) => `${(n / 1024).toFixed(0)} KiB`;
  console.log("| part | size | share of the binary |\n| --- | ---: | ---: |");
  console.log(`| the agent's binary (--minify, as scripts/build.ts) | ${mib(minified)} | 100% |`);
  console.log(`| Bun runtime (an empty program compiled the same way) | ${mib(runtime)} | ${((runtime / minified) * 100).toFixed(1)}% |`);
  console.log(`| the agent's bundle (binary − runtime) | ${mib(minified - runtime)} | ${(((minified - runtime) / minified) * 100).toFixed(1)}% |`);
  console.log(`| without --minify | ${mib(plain)} | ${((plain / minified) * 100).toFixed(1)}% |`);
  console.log(`| with --bytecode (precompiled, for start time) | ${mib(bytecode)} | ${((bytecode / minified) * 100).toFixed(1)}% |`);
  if (upstream)
    console.log(
      `| upstream kubelet (same Kubernetes release) | ${mib(upstream)} | ${((upstream / minified) * 100).toFixed(1)}% (bunlet / upstream ${(minified / upstream).toFixed(2)}x) |`,
    );
  console.log(`\n| the bundle (${kib(bundle)}, minified), by part | bytes in the bundle | share |\n| --- | ---: | ---: |`);
  const sorted = [...parts].sort((a, b) => b[1] - a[1]);
  for (const [name, bytes] of sorted.slice(0, 25)) console.log(`| ${name} | ${kib(bytes)} | ${((bytes / bundle) * 100).toFixed(1)}% |`);
  const rest = sorted.slice(25);
  if (rest.length > 0) console.log(`| ${rest.length} smaller dependencies | ${kib(rest.reduce((a, [, b]) => a + b, 0))} | |`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
