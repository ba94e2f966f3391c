/**
 * Builds the test VM's initramfs: busybox-static, test/vm/init.sh as /init,
 * the probe (test/vm/probe.ts, compiled with `bun build --compile`) and the
 * glibc pieces the Bun runtime links against. Cached in .cache/vm/<key>/,
 * where the key hashes every input (sources the probe can import, init,
 * busybox, the libraries, Bun's version, this file), so a warm run only hashes.
 *
 *   bun scripts/vm/initramfs.ts        # prints the initramfs path
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { basename, join, relative, resolve } from "node:path";
import { writeCpio, type CpioEntry } from "./cpio.ts";

const repo = resolve(import.meta.dir, "../..");
const cacheRoot = join(repo, ".cache/vm");
const BUSYBOX = "/bin/busybox";
/** Bump when the layout of the image changes in a way the inputs do not show. */
const RECIPE = 1;

function listTs(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...listTs(p));
    else if (/\.(ts|sh|json)$/.test(e.name) && !/\.test\.ts$/.test(e.name)) out.push(p);
  }
  return out.sort();
}

/** Shared libraries of an ELF binary, by the path the loader will look them up at. */
async function sharedLibs(binary: string): Promise<{ path: string; source: string }[]> {
  const proc = Bun.spawn(["ldd", binary], { stdout: "pipe", stderr: "pipe" });
  const out = await new Response(proc.stdout).text();
  if ((await proc.exited) !== 0) throw new Error(`ldd ${binary} failed`);
  const libs: { path: string; source: string }[] = [];
  for (const line of out.split("\n")) {
    const arrow = line.match(/^\s*(\S+) => (\/\S+)/);
    const direct = line.match(/^\s*(\/\S+) \(/);
    if (arrow) libs.push({ path: arrow[2]!, source: arrow[2]! });
    else if (direct) libs.push({ path: direct[1]!, source: direct[1]! });
  }
  return libs;
}

function inputKey(libs: { path: string; source: string }[]): string {
  const h = createHash("sha256");
  h.update(`recipe ${RECIPE} bun ${Bun.version}\n`);
  const files = [...listTs(join(repo, "src")), ...listTs(join(repo, "test/vm")), ...listTs(join(repo, "scripts/vm")), BUSYBOX, ...libs.map((l) => l.source)];
  for (const f of files) {
    h.update(`${relative(repo, f)}\0`);
    h.update(readFileSync(f));
  }
  return h.digest("hex").slice(0, 16);
}

export interface Initramfs {
  path: string;
  /** False when it came from the cache. */
  built: boolean;
  ms: number;
}

/** Returns the cached initramfs for the current inputs, building it when missing. */
export async function buildInitramfs(opts: { log?: (line: string) => void } = {}): Promise<Initramfs> {
  const t0 = performance.now();
  const log = opts.log ?? (() => {});
  if (!existsSync(BUSYBOX)) throw new Error(`${BUSYBOX} is missing: apt-get install busybox-static (scripts/setup.sh)`);
  // The compiled probe embeds the Bun runtime, so it needs what Bun itself needs.
  const libs = await sharedLibs(process.execPath);
  const key = inputKey(libs);
  const dir = join(cacheRoot, key);
  const out = join(dir, "initramfs.cpio");
  if (existsSync(out)) return { path: out, built: false, ms: Math.round(performance.now() - t0) };

  mkdirSync(cacheRoot, { recursive: true });
  const tmp = join(cacheRoot, `.tmp-${key}-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    const probe = join(tmp, "probe");
    log(`vm: compiling test/vm/probe.ts`);
    const build = Bun.spawn([process.execPath, "build", "--compile", join(repo, "test/vm/probe.ts"), "--outfile", probe], {
      cwd: repo,
      stdout: "pipe",
      stderr: "pipe",
    });
    const [code, berr] = await Promise.all([build.exited, new Response(build.stderr).text()]);
    if (code !== 0) throw new Error(`bun build --compile test/vm/probe.ts failed:\n${berr}`);

    const entries: CpioEntry[] = [];
    const dirs = new Set<string>();
    const addDir = (d: string) => {
      const parts = d.split("/").filter(Boolean);
      for (let i = 1; i <= parts.length; i++) {
        const p = parts.slice(0, i).join("/");
        if (!dirs.has(p)) {
          dirs.add(p);
          entries.push({ type: "dir", path: p });
        }
      }
    };
    for (const d of ["bin", "dev", "proc", "sys", "tmp", "root", "etc"]) addDir(d);
    entries.push({ type: "chardev", path: "dev/console", major: 5, minor: 1 });
    entries.push({ type: "chardev", path: "dev/null", major: 1, minor: 3, mode: 0o666 });
    entries.push({ type: "file", path: "bin/busybox", source: BUSYBOX, mode: 0o755 });
    entries.push({ type: "symlink", path: "bin/sh", target: "busybox" });
    entries.push({ type: "file", path: "init", source: join(repo, "test/vm/init.sh"), mode: 0o755 });
    entries.push({ type: "file", path: "probe", source: probe, mode: 0o755 });
    for (const lib of libs) {
      addDir(lib.path.slice(0, lib.path.lastIndexOf("/")));
      entries.push({ type: "file", path: lib.path, source: lib.source, mode: 0o755 });
    }
    writeCpio(join(tmp, "initramfs.cpio"), entries);
    rmSync(probe);
    // Only the current image is kept: each is about 100 MB.
    for (const old of readdirSync(cacheRoot)) if (!old.startsWith(".tmp-")) rmSync(join(cacheRoot, old), { recursive: true, force: true });
    renameSync(tmp, dir);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  const ms = Math.round(performance.now() - t0);
  log(`vm: initramfs ${basename(dir)} built in ${ms} ms (${Math.round(statSync(out).size / 2 ** 20)} MiB)`);
  return { path: out, built: true, ms };
}

if (import.meta.main) {
  const r = await buildInitramfs({ log: (l) => console.error(l) });
  console.log(r.path);
}
