/**
 * The cgroup v2 writer (src/cgroups) on a real cgroup v2 kernel: mount
 * cgroup2, run setupNode / ensurePod / updateQos, read back what the kernel
 * shows, then let the kernel enforce it (an OOM kill at the pod's
 * memory.max, throttling at its cpu.max) and remove everything.
 * The pods and options are exported for the host-side test's expectations.
 */
import { join } from "node:path";
import { cgroupPageSizes, createPodCgroups, readHugePagePools, type PodCgroups } from "../../../src/cgroups/index.ts";
import type { Pod } from "../../../src/pods/schema.ts";
import { createLogger } from "../../../src/util/log.ts";
import type { ProbeCheck, ProbeContext } from "../protocol.ts";

const BB = "/bin/busybox";
const CG = "/sys/fs/cgroup";

const pod = (uid: string, resources?: { requests?: Record<string, string>; limits?: Record<string, string> }): Pod => ({
  metadata: { name: uid, namespace: "vm", uid },
  spec: { containers: [{ name: "c", image: "none", ...(resources ? { resources } : {}) }] },
});

export const VM_PODS = {
  burstable: pod("burstable-1", { requests: { cpu: "250m", memory: "16Mi" }, limits: { cpu: "500m", memory: "32Mi" } }),
  guaranteed: pod("guaranteed-1", { limits: { cpu: "100m", memory: "64Mi" } }),
  besteffort: pod("besteffort-1"),
};
export const VM_OPTIONS = { cgroupRoot: "/", podPidsLimit: 1024, cpuCFSQuota: true, cpuCFSQuotaPeriodMs: 100 } as const;
export const VM_ALLOCATABLE = { cpuMilli: 1000, memoryBytes: 512 * 2 ** 20, pids: 2048 };
/** Huge pages: kubepods may use 12Mi of 2 MiB pages; a Guaranteed pod asks 4Mi, a BestEffort one none. */
export const VM_HUGE_PAGES = { "hugepages-2Mi": 12 * 2 ** 20 };
export const VM_HUGE_POD = pod("huge-1", { limits: { cpu: "100m", memory: "64Mi", "hugepages-2Mi": "4Mi" } });
export const VM_NO_HUGE_POD = pod("nohuge-1");

const FILES = ["cgroup.controllers", "cgroup.subtree_control", "cpu.weight", "cpu.max", "memory.max", "pids.max"];

/** The files of each cgroup, "" for those that do not exist there. */
function snapshot(ctx: ProbeContext, paths: string[]): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const p of paths) {
    out[p] = {};
    for (const f of FILES) {
      try {
        out[p][f] = ctx.read(join(CG, p, f));
      } catch {
        out[p][f] = "";
      }
    }
  }
  return out;
}

let cg: PodCgroups | undefined;
const paths: Record<string, string> = {};

/** Like runc: enable controllers in the pod's subtree, make a container cgroup, run `script` in it. */
async function runInChild(ctx: ProbeContext, podPath: string, child: string, script: string, timeoutMs: number) {
  ctx.read(join(CG, podPath, "cgroup.controllers"));
  await Bun.write(join(CG, podPath, "cgroup.subtree_control"), "+cpu +memory +pids");
  const dir = join(CG, podPath, child);
  await ctx.run([BB, "mkdir", "-p", dir]);
  return ctx.run([BB, "sh", "-c", `echo $$ > ${dir}/cgroup.procs && exec ${BB} sh -c '${script}'`], { timeoutMs });
}

const kv = (text: string) => Object.fromEntries(text.split("\n").map((l) => l.split(" ") as [string, string]));

export const cgroupChecks: ProbeCheck[] = [
  {
    name: "cgroup2-mount",
    async run(ctx) {
      let mounted = true;
      try {
        ctx.read(join(CG, "cgroup.controllers"));
      } catch {
        mounted = false;
        const r = await ctx.run([BB, "mount", "-t", "cgroup2", "cgroup2", CG]);
        if (r.code !== 0) throw new Error(`mount cgroup2: ${r.stderr}`);
      }
      return { mountedBefore: mounted, rootControllers: ctx.read(join(CG, "cgroup.controllers")) };
    },
  },
  {
    name: "cgroup-v2-writer",
    async run(ctx) {
      cg = createPodCgroups({ ...VM_OPTIONS, logger: createLogger({ verbosity: 0 }) });
      await cg.setupNode({ allocatable: VM_ALLOCATABLE, enforce: true });
      for (const [k, p] of Object.entries(VM_PODS)) paths[k] = await cg.ensurePod(p);
      // Idempotent: a second round changes nothing.
      for (const p of Object.values(VM_PODS)) await cg.ensurePod(p);
      await cg.updateQos(Object.values(VM_PODS));
      return {
        version: cg.version,
        paths,
        listed: await cg.listPodUids(),
        files: snapshot(ctx, ["/", "/kubepods", "/kubepods/burstable", "/kubepods/besteffort", ...Object.values(paths)]),
      };
    },
  },
  {
    name: "cgroup-v2-oom",
    async run(ctx) {
      // The Burstable pod's memory.max (32Mi) stops a process that keeps doubling a string.
      const r = await runInChild(ctx, paths.burstable!, "hog", "a=x; while :; do a=$a$a; done", 60_000);
      return { signal: r.signal, code: r.code, events: kv(ctx.read(join(CG, paths.burstable!, "memory.events"))) };
    },
  },
  {
    name: "cgroup-v2-throttle",
    async run(ctx) {
      // The Guaranteed pod's cpu.max (10000 100000, 100m) throttles a busy loop.
      const before = kv(ctx.read(join(CG, paths.guaranteed!, "cpu.stat")));
      const t0 = performance.now();
      const r = await runInChild(ctx, paths.guaranteed!, "spin", "while :; do :; done", 2000);
      const wallUs = (performance.now() - t0) * 1000;
      const after = kv(ctx.read(join(CG, paths.guaranteed!, "cpu.stat")));
      return {
        signal: r.signal,
        wallUs: Math.round(wallUs),
        usageUs: Number(after.usage_usec) - Number(before.usage_usec),
        nrPeriods: Number(after.nr_periods),
        nrThrottled: Number(after.nr_throttled),
      };
    },
  },
  {
    name: "cgroup-v2-hugetlb",
    async run(ctx) {
      // 8 pages of 2 MiB in the VM's pool; the writer reads the pools (2MB, 1GB) from /sys as in production.
      await Bun.write("/proc/sys/vm/nr_hugepages", "8");
      const pages = Number(ctx.read("/proc/sys/vm/nr_hugepages"));
      if (pages !== 8) throw new Error(`the VM's kernel allocated ${pages} of 8 huge pages`);
      const hp = createPodCgroups({ ...VM_OPTIONS, cgroupRoot: "/hp", logger: createLogger({ verbosity: 0 }) });
      await hp.setupNode({ allocatable: { ...VM_ALLOCATABLE, hugePages: VM_HUGE_PAGES }, enforce: true });
      const podPath = await hp.ensurePod(VM_HUGE_POD);
      const nonePath = await hp.ensurePod(VM_NO_HUGE_POD);
      const read = (p: string, f: string) => {
        try {
          return ctx.read(join(CG, p, f));
        } catch {
          return "";
        }
      };
      // Every page size the VM's kernel has (2MB, and 1GB where the CPU has gigantic pages).
      const sizes = cgroupPageSizes(readHugePagePools("/sys"));
      const files = Object.fromEntries(
        ["/hp/kubepods", "/hp/kubepods/burstable", "/hp/kubepods/besteffort", podPath, nonePath].map((p) => [
          p,
          Object.fromEntries(sizes.flatMap((size) => [`${size}.max`, `${size}.rsvd.max`]).map((f) => [f, read(p, `hugetlb.${f}`)])),
        ]),
      );
      // The kernel enforces them: fallocate on a hugetlbfs takes pages charged to the caller's cgroup.
      const mnt = "/tmp/hugetlbfs";
      await ctx.run([BB, "mkdir", "-p", mnt]);
      const m = await ctx.run([BB, "mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "nodev", mnt]);
      if (m.code !== 0) throw new Error(`mount hugetlbfs: ${m.stderr}`);
      const within = await runInChild(ctx, podPath, "fits", `${BB} fallocate -l ${4 * 2 ** 20} ${mnt}/a`, 10_000);
      const beyond = await runInChild(ctx, podPath, "over", `${BB} fallocate -l ${2 * 2 ** 20} ${mnt}/b`, 10_000);
      const none = await runInChild(ctx, nonePath, "none", `${BB} fallocate -l ${2 * 2 ** 20} ${mnt}/c`, 10_000);
      const usage = read(podPath, "hugetlb.2MB.current");
      await ctx.run([BB, "rm", "-f", `${mnt}/a`, `${mnt}/b`, `${mnt}/c`]);
      await ctx.run([BB, "umount", mnt]);
      for (const p of [VM_HUGE_POD, VM_NO_HUGE_POD]) await hp.removePod(p.metadata.uid!);
      await Bun.write("/proc/sys/vm/nr_hugepages", "0");
      return { sizes, files, podPath, nonePath, withinCode: within.code, beyondCode: beyond.code, beyondErr: beyond.stderr.trim(), noneCode: none.code, usage };
    },
  },
  {
    name: "cgroup-v2-remove",
    async run(ctx) {
      if (!cg) throw new Error("no writer (cgroup-v2-writer failed)");
      // The checks' container cgroups are empty now (their processes are gone): removePod takes them too.
      for (const p of Object.values(VM_PODS)) await cg.removePod(p.metadata.uid!);
      const left = Object.values(paths).filter((p) => {
        try {
          ctx.read(join(CG, p, "cgroup.controllers"));
          return true;
        } catch {
          return false;
        }
      });
      return { listedAfter: await cg.listPodUids(), dirsLeft: left };
    },
  },
];
