/**
 * Boots Debian's cloud kernel in qemu (software emulation: `-accel tcg
 * -cpu max`; KVM is present on these hosts but does not boot) with the
 * initramfs of initramfs.ts, and returns the serial console's output. The
 * VM powers itself off after the probe; a timeout kills qemu otherwise.
 *
 *   bun scripts/vm/run.ts              # build (cached), boot, print the probe's JSON
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { buildInitramfs } from "./initramfs.ts";

export const QEMU = "qemu-system-x86_64";

/** Where scripts/setup.sh unpacks Debian's cloud kernel (never installed on the host: see setup.sh). */
export const KERNEL_DIR = join(process.env.BUNLET_CACHE ?? "/var/cache/bunlet", "vm-kernel");

/** BUNLET_VM_KERNEL, or the newest vmlinuz-*-cloud-amd64 in KERNEL_DIR. */
export function findKernel(): string | undefined {
  const env = process.env.BUNLET_VM_KERNEL;
  if (env) return existsSync(env) ? env : undefined;
  if (!existsSync(KERNEL_DIR)) return undefined;
  const kernels = readdirSync(KERNEL_DIR)
    .filter((f) => /^vmlinuz-.*-cloud-amd64$/.test(f))
    .sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  return kernels.length ? join(KERNEL_DIR, kernels.at(-1)!) : undefined;
}

/**
 * Throws one error naming everything missing to boot the test VM. Tests
 * call it and fail (not skip): CI installs these with scripts/setup.sh.
 */
export function requireVm(): { kernel: string } {
  const missing: string[] = [];
  if (!Bun.which(QEMU)) missing.push(`${QEMU} (Debian package qemu-system-x86)`);
  const kernel = findKernel();
  if (!kernel) missing.push(`a cloud kernel ${KERNEL_DIR}/vmlinuz-*-cloud-amd64 (unpacked from Debian's linux-image-cloud-amd64 by scripts/setup.sh) or BUNLET_VM_KERNEL`);
  if (!existsSync("/bin/busybox")) missing.push("/bin/busybox (Debian package busybox-static)");
  if (!Bun.which("ldd")) missing.push("ldd (Debian package libc-bin)");
  if (missing.length > 0 || !kernel) {
    throw new Error(`the cgroup v2 VM test needs: ${missing.join(", ")}. Run scripts/setup.sh as root.`);
  }
  return { kernel };
}

export interface VmRun {
  output: string;
  exitCode: number | null;
  timedOut: boolean;
  ms: number;
}

/**
 * `smp` and `numa`: qemu's -smp value and its NUMA nodes (each one memory
 * backend and the CPUs given); `append`: more of the kernel command line.
 */
export async function runVm(opts: {
  initramfs: string;
  kernel: string;
  timeoutMs?: number;
  memoryMb?: number;
  smp?: string;
  numa?: { cpus: string; memoryMb: number }[];
  append?: string;
}): Promise<VmRun> {
  const numa = (opts.numa ?? []).flatMap((n, id) => ["-object", `memory-backend-ram,id=mem${id},size=${n.memoryMb}M`, "-numa", `node,nodeid=${id},cpus=${n.cpus},memdev=mem${id}`]);
  const t0 = performance.now();
  const proc = Bun.spawn(
    [
      QEMU,
      "-accel",
      "tcg",
      "-cpu",
      "max",
      "-m",
      String(opts.memoryMb ?? 1024),
      "-smp",
      opts.smp ?? "1",
      ...numa,
      "-kernel",
      opts.kernel,
      "-initrd",
      opts.initramfs,
      "-append",
      `console=ttyS0 quiet panic=-1 rdinit=/init${opts.append ? ` ${opts.append}` : ""}`,
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
  }, opts.timeoutMs ?? 90_000);
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  const exitCode = await proc.exited;
  clearTimeout(timer);
  return { output: out + (err ? `\n[qemu stderr]\n${err}` : ""), exitCode, timedOut, ms: Math.round(performance.now() - t0) };
}

if (import.meta.main) {
  const { kernel } = requireVm();
  const initramfs = await buildInitramfs({ log: (l) => console.error(l) });
  const run = await runVm({ initramfs: initramfs.path, kernel });
  console.error(`vm: qemu exited ${run.exitCode}${run.timedOut ? " (timed out)" : ""} after ${run.ms} ms`);
  const { parseProbeOutput } = await import("../../test/vm/protocol.ts");
  console.log(JSON.stringify(parseProbeOutput(run.output), null, 2));
}
