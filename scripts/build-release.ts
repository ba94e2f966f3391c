// Release binaries: one self-contained executable per target, and SHA256SUMS.
//   bun scripts/build-release.ts [--version=STRING] [--outdir=dist]
//
//   dist/kubelet-linux-x64         glibc, x86-64
//   dist/kubelet-linux-arm64       glibc, aarch64
//   dist/kubelet-linux-x64-musl    musl (Alpine), x86-64: needs libstdc++ and libgcc (apk add libstdc++)
//   dist/kubelet-linux-arm64-musl  musl (Alpine), aarch64: the same
//   dist/SHA256SUMS                `sha256sum -c` format
//
// Bun fetches each target's runtime from the npm registry the first time
// (then it is cached), so this works offline once it has run.
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";

const repoRoot = resolve(import.meta.dir, "..");
export const RELEASE_TARGETS = [
  { target: "bun-linux-x64", file: "kubelet-linux-x64" },
  { target: "bun-linux-arm64", file: "kubelet-linux-arm64" },
  { target: "bun-linux-x64-musl", file: "kubelet-linux-x64-musl" },
  { target: "bun-linux-arm64-musl", file: "kubelet-linux-arm64-musl" },
] as const;

let outdir = "dist";
const passThrough: string[] = [];
for (const arg of Bun.argv.slice(2)) {
  if (arg.startsWith("--outdir=")) outdir = arg.slice("--outdir=".length);
  else if (arg.startsWith("--version=")) passThrough.push(arg);
  else {
    console.error(`build-release: unknown argument ${arg}\nusage: bun scripts/build-release.ts [--version=STRING] [--outdir=DIR]`);
    process.exit(2);
  }
}

const sums: string[] = [];
for (const { target, file } of RELEASE_TARGETS) {
  const outfile = join(outdir, file);
  const proc = Bun.spawn([process.execPath, join(repoRoot, "scripts/build.ts"), `--target=${target}`, `--outfile=${outfile}`, ...passThrough], {
    cwd: repoRoot,
    stdout: "inherit",
    stderr: "inherit",
  });
  const code = await proc.exited;
  if (code !== 0) {
    console.error(`build-release: ${target} failed (exit ${code})`);
    process.exit(code);
  }
  const digest = createHash("sha256")
    .update(readFileSync(resolve(repoRoot, outfile)))
    .digest("hex");
  sums.push(`${digest}  ${basename(outfile)}`);
}
writeFileSync(resolve(repoRoot, outdir, "SHA256SUMS"), sums.join("\n") + "\n");
console.log(`build-release: wrote ${RELEASE_TARGETS.length} binaries and ${join(outdir, "SHA256SUMS")}`);
