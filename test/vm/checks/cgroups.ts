/**
 * The cgroup v2 writer (src/cgroups) on a real cgroup v2 kernel: mount
 * cgroup2, run setupNode / ensurePod / updateQos, read back what the kernel
 * shows, then let the kernel enforce it (an OOM kill at the pod's
 * memory.max, throttling at its cpu.max) and remove everything.
 * The pods and options are exported for the host-side test's expectations.
 */
import { join } from "node:path";
import { createPodCgroups, type PodCgroups } from "../../../src/cgroups/index.ts";
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
