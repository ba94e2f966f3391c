/**
 * Boots the systemd test node once and returns what its checks saw.
 *
 *   bun scripts/vm/run-node.ts            # build what is missing, boot, print the facts as JSON
 *
 * 1. the root image (node-image.sh: Debian 12, systemd, cgroup v2, containerd
 *    1.6 with SystemdCgroup = true; cached under /var/cache/bunlet/vm);
 * 2. the agent binary (BUNLET_BINARY, else dist/kubelet built now from this tree);
 * 3. a payload disk (ext4 made from a directory, no loop device): the binary,
 *    the offline images (scripts/images.sh), test/vm/node/ (run.sh, the
 *    config, the static pods) and, when BUNLET_VM_CONTAINERD_DIR names a
 *    directory with bin/ (and optionally config.toml), another containerd
 *    that run.sh puts in place of Debian's (the hook for containerd 2.x);
 * 4. qemu (TCG: `-accel tcg -cpu max`) on a copy-on-write overlay of the
 *    root image, so the cached image stays as built; the serial console
 *    carries the `BUNLET-FACT name value` lines of run.sh, which powers the
 *    node off through logind at its end.
 *
 * BUNLET_VM_CONSOLE=FILE copies the console there as it comes;
 * BUNLET_VM_DEBUG=1 forwards the guest's journal to the console too.
 */
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const repoRoot = resolve(import.meta.dir, "../..");
export const QEMU = "qemu-system-x86_64";

export interface NodeRun {
  facts: Record<string, string>;
  output: string;
  timedOut: boolean;
  exitCode: number | null;
  ms: { image: number; binary: number; payload: number; boot: number };
  imageBuilt: boolean;
}

function sh(argv: string[], opts: { cwd?: string } = {}): string {
  const r = Bun.spawnSync(argv, { stdout: "pipe", stderr: "pipe", ...(opts.cwd ? { cwd: opts.cwd } : {}) });
  if (r.exitCode !== 0) throw new Error(`${argv.join(" ")} failed (${r.exitCode}): ${r.stderr.toString().slice(-2000)}`);
  return r.stdout.toString();
}

/** Everything missing to build and boot the node, named with its Debian package. */
export function requireNodeVm(): void {
  const missing: string[] = [];
  if (!Bun.which(QEMU)) missing.push(`${QEMU} (qemu-system-x86)`);
  if (!Bun.which("qemu-img")) missing.push("qemu-img (qemu-utils)");
  if (!Bun.which("mmdebstrap")) missing.push("mmdebstrap (mmdebstrap)");
  if (!Bun.which("mkfs.ext4")) missing.push("mkfs.ext4 (e2fsprogs)");
  if (missing.length > 0) throw new Error(`the systemd node VM needs: ${missing.join(", ")}. Run scripts/setup.sh as root.`);
}

/** The image directory (built when missing) and whether it was built now. */
export function nodeImage(): { dir: string; built: boolean; ms: number } {
  const t0 = performance.now();
  const r = Bun.spawnSync(["bash", join(repoRoot, "scripts/vm/node-image.sh")], { stdout: "pipe", stderr: "pipe" });
  const err = r.stderr.toString();
  if (r.exitCode !== 0) throw new Error(`node-image.sh failed (${r.exitCode}):\n${err.slice(-4000)}`);
  return { dir: r.stdout.toString().trim().split("\n").at(-1) ?? "", built: err.includes("building"), ms: Math.round(performance.now() - t0) };
}

/** BUNLET_BINARY, or dist/kubelet built from this tree now (the VM must test this code). */
export function agentBinary(): { path: string; ms: number; version?: string } {
  const t0 = performance.now();
  const given = process.env.BUNLET_BINARY;
  if (given) {
    // CI passes dist/kubelet (absolute): it must be the agent and run here before it goes into the node.
    const path = resolve(given);
    if (!existsSync(path)) throw new Error(`BUNLET_BINARY=${given}: no such file`);
    const r = Bun.spawnSync([path, "--version"], { stdout: "pipe", stderr: "pipe" });
    if (r.exitCode !== 0) throw new Error(`BUNLET_BINARY=${given}: --version exited ${r.exitCode}: ${r.stderr.toString().slice(-500)}`);
    return { path, ms: Math.round(performance.now() - t0), version: r.stdout.toString().trim() };
  }
  sh([process.execPath, join(repoRoot, "scripts/build.ts")], { cwd: repoRoot });
  return { path: join(repoRoot, "dist/kubelet"), ms: Math.round(performance.now() - t0) };
}

/**
 * containerd 2.x and runc for the node (scripts/containerd2/build.sh: built
 * from Go modules once, cached), written to `dest` as run.sh's hook wants
 * it: bin/ and config.toml. The config is the binary's own default (2.4
 * writes `version = 4`) with the node's settings: the runc runtime with
 * `SystemdCgroup = true` (what CRI RuntimeConfig then reports), the offline
 * pause image, and Debian's CNI plugin directory.
 */
export function containerd2Payload(dest: string): { version: string } {
  const bin =
    sh(["bash", join(repoRoot, "scripts/containerd2/build.sh")])
      .trim()
      .split("\n")
      .at(-1) ?? "";
  mkdirSync(join(dest, "bin"), { recursive: true });
  for (const name of ["containerd", "containerd-shim-runc-v2", "ctr", "runc"]) cpSync(join(bin, name), join(dest, "bin", name));
  let config = sh([join(bin, "containerd"), "config", "default"]);
  const edits: [RegExp, string][] = [
    [/^(\s*)SystemdCgroup = false$/m, "$1SystemdCgroup = true"],
    [/^(\s*)sandbox = '[^']*'$/m, "$1sandbox = 'localhost/bunlet/pause:1.0'"],
    [/^(\s*)bin_dirs = \['\/opt\/cni\/bin'\]$/m, "$1bin_dirs = ['/usr/lib/cni']"],
  ];
  for (const [from, to] of edits) {
    if (!from.test(config)) throw new Error(`containerd 2.x's default config has no line matching ${from}: its format changed`);
    config = config.replace(from, to);
  }
  writeFileSync(join(dest, "config.toml"), config);
  return { version: sh([join(bin, "containerd"), "--version"]).trim() };
}

/** Parses the console: `BUNLET-FACT name rest` lines (the last of a name wins). */
export function parseFacts(output: string): Record<string, string> {
  const facts: Record<string, string> = {};
  for (const raw of output.split("\n")) {
    const line = raw.replace(/\r/g, "");
    const at = line.indexOf("BUNLET-FACT ");
    if (at < 0) continue;
    const rest = line.slice(at + "BUNLET-FACT ".length);
    const sp = rest.indexOf(" ");
    facts[sp < 0 ? rest : rest.slice(0, sp)] = sp < 0 ? "" : rest.slice(sp + 1).trim();
  }
  return facts;
}

function dirBytes(dir: string): number {
  let total = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    total += e.isDirectory() ? dirBytes(p) : statSync(p).size;
  }
  return total;
}

export interface NodeOptions {
  timeoutMs?: number;
  memoryMb?: number;
  log?: (line: string) => void;
  /**
   * What run.sh checks: "full" (every check, on the image's containerd 1.6 unless BUNLET_VM_CONTAINERD_DIR
   * says otherwise) or "containerd2" (containerd 2.x from containerd2Payload: the cgroup driver from CRI
   * RuntimeConfig, a config/runtime mismatch, the pods and their slices; then power off).
   */
  mode?: "full" | "containerd2";
  /**
   * A control plane on this host for the node's API pods (run.sh's eviction check: the agent never
   * evicts static pods, as upstream). The node reaches it as https://kubernetes:PORT (10.0.2.2, the
   * host's loopback through qemu's user network; the serving certificate names "kubernetes").
   */
  cluster?: NodeCluster;
}

/** The files of a control plane (test/harness/controlplane.ts) the node needs. */
export interface NodeCluster {
  apiServerUrl: string;
  caFile: string;
  /** The node's client certificate and key (CN=system:node:bunlet-node). */
  nodeCert: string;
  nodeKey: string;
  /** The admin's (O=system:masters), for run.sh to create and delete API pods. */
  adminCert: string;
  adminKey: string;
}

/** payload/cluster: the certificates, the API server's port and the agent's kubeconfig, by their paths in the node. */
function clusterPayload(dir: string, c: NodeCluster): void {
  mkdirSync(dir, { recursive: true });
  const files = { "ca.crt": c.caFile, "node.crt": c.nodeCert, "node.key": c.nodeKey, "admin.crt": c.adminCert, "admin.key": c.adminKey };
  for (const [name, from] of Object.entries(files)) cpSync(from, join(dir, name));
  const port = new URL(c.apiServerUrl).port;
  writeFileSync(join(dir, "port"), `${port}\n`);
  writeFileSync(
    join(dir, "kubeconfig"),
    `apiVersion: v1
kind: Config
clusters:
  - name: vm
    cluster:
      server: https://kubernetes:${port}
      certificate-authority: /payload/cluster/ca.crt
users:
  - name: node
    user:
      client-certificate: /payload/cluster/node.crt
      client-key: /payload/cluster/node.key
contexts:
  - name: vm
    context: { cluster: vm, user: node }
current-context: vm
`,
  );
}

export async function runNode(opts: NodeOptions = {}): Promise<NodeRun> {
  requireNodeVm();
  const log = opts.log ?? (() => {});
  const image = nodeImage();
  log(`node image ${image.built ? "built" : "cached"} in ${image.ms} ms: ${image.dir}`);
  const binary = agentBinary();
  log(`agent binary ${binary.path}${binary.version ? ` (${binary.version})` : ""} (${binary.ms} ms)`);

  const t1 = performance.now();
  const work = mkdtempSync(join(tmpdir(), "bunlet-node-vm-"));
  try {
    const payload = join(work, "payload");
    mkdirSync(payload);
    cpSync(binary.path, join(payload, "kubelet"));
    const images = join(repoRoot, ".cache/images");
    sh(["bash", join(repoRoot, "scripts/images.sh"), images]);
    mkdirSync(join(payload, "images"));
    for (const f of ["pause.tar", "busybox.tar"]) cpSync(join(images, f), join(payload, "images", f));
    cpSync(join(repoRoot, "test/vm/node"), payload, { recursive: true });
    const mode = opts.mode ?? "full";
    writeFileSync(join(payload, "mode"), `${mode}\n`);
    const containerd = process.env.BUNLET_VM_CONTAINERD_DIR;
    if (mode === "containerd2") {
      const c = containerd2Payload(join(payload, "containerd"));
      log(`containerd 2.x for the node: ${c.version}`);
    } else if (containerd) {
      if (!existsSync(join(containerd, "bin"))) throw new Error(`BUNLET_VM_CONTAINERD_DIR=${containerd} has no bin/ directory`);
      cpSync(containerd, join(payload, "containerd"), { recursive: true });
    }
    if (opts.cluster) clusterPayload(join(payload, "cluster"), opts.cluster);
    const payloadImg = join(work, "payload.img");
    const sizeMb = Math.ceil(dirBytes(payload) / 2 ** 20) + 256;
    sh(["mkfs.ext4", "-q", "-F", "-L", "payload", "-d", payload, payloadImg, `${sizeMb}M`]);
    const overlay = join(work, "root.qcow2");
    sh(["qemu-img", "create", "-q", "-f", "qcow2", "-b", join(image.dir, "root.img"), "-F", "raw", overlay]);
    writeFileSync(join(work, "README"), "a throwaway run of scripts/vm/run-node.ts\n");
    const payloadMs = Math.round(performance.now() - t1);

    const t2 = performance.now();
    const proc = Bun.spawn(
      [
        QEMU,
        "-accel",
        "tcg",
        "-cpu",
        "max",
        "-smp",
        "2",
        "-m",
        String(opts.memoryMb ?? 2048),
        "-kernel",
        join(image.dir, "vmlinuz"),
        "-initrd",
        join(image.dir, "initrd.img"),
        "-append",
        `root=/dev/vda rw console=ttyS0 panic=-1 systemd.unified_cgroup_hierarchy=1 ${process.env.BUNLET_VM_DEBUG ? "systemd.journald.forward_to_console=1" : "systemd.show_status=0 loglevel=4"}`,
        "-drive",
        `file=${overlay},if=virtio,format=qcow2`,
        "-drive",
        `file=${payloadImg},if=virtio,format=raw`,
        "-nic",
        // Isolated, but with a cluster the node must reach the host's loopback (10.0.2.2) for the API server.
        `user,model=virtio-net-pci,restrict=${opts.cluster ? "off" : "on"}`,
        "-no-reboot",
        "-nodefaults",
        "-display",
        "none",
        "-serial",
        "stdio",
      ],
      { stdin: "ignore", stdout: "pipe", stderr: "pipe" },
    );
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      proc.kill("SIGKILL");
    }, opts.timeoutMs ?? 900_000);
    const chunks: string[] = [];
    // BUNLET_VM_CONSOLE: a file that gets the serial console as it comes (to watch a run).
    const console = process.env.BUNLET_VM_CONSOLE;
    const decoder = new TextDecoder();
    let partial = "";
    const reader = (async () => {
      for await (const chunk of proc.stdout) {
        const text = decoder.decode(chunk, { stream: true });
        chunks.push(text);
        if (console) appendFileSync(console, text);
        partial += text;
        const lines = partial.split("\n");
        partial = lines.pop() ?? "";
        for (const l of lines) if (l.includes("BUNLET-FACT")) log(l.replace(/\r/g, "").slice(l.indexOf("BUNLET-FACT")));
      }
    })();
    const [, err, exitCode] = await Promise.all([reader, new Response(proc.stderr).text(), proc.exited]);
    clearTimeout(timer);
    const output = chunks.join("") + (err ? `\n[qemu stderr]\n${err}` : "");
    return {
      facts: parseFacts(output),
      output,
      timedOut,
      exitCode,
      ms: { image: image.ms, binary: binary.ms, payload: payloadMs, boot: Math.round(performance.now() - t2) },
      imageBuilt: image.built,
    };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const run = await runNode({ log: (l) => console.error(l) });
  console.error(`node VM: qemu exited ${run.exitCode}${run.timedOut ? " (timed out)" : ""}; ms ${JSON.stringify(run.ms)}`);
  if (process.env.BUNLET_VM_OUTPUT) writeFileSync(process.env.BUNLET_VM_OUTPUT, run.output);
  console.log(JSON.stringify(run.facts, null, 2));
}
