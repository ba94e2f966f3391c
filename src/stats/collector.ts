/**
 * The stats collector: the agent's StatsProvider. Upstream the kubelet gets
 * these numbers from cAdvisor and the CRI; here one pass reads procfs, the
 * root, pods-parent and pod cgroups, statfs, the log directories, the pods'
 * network namespaces and four CRI calls (ListPodSandbox, ListContainers,
 * ListContainerStats, ImageFsInfo), and keeps the result as the current Summary.
 *
 * Timeline:
 *   start(period) ── collect ── (period) ── collect ── ...   dispose: stop, await the pass in flight
 *   summary(): the last pass if younger than the period, else a new pass
 *   (concurrent callers share one pass).
 *
 * A pass never fails as a whole: a CRI call, a cgroup or a file that fails
 * leaves its part out and is logged (warn the first time, -v=4 while it
 * keeps failing, info when it recovers). usageNanoCores needs two passes.
 */
import type { ContainerStats as CriContainerStats, CriService } from "../cri/index.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { buildCadvisorView, type CadvisorView } from "./cadvisor.ts";
import { createCgroupReader, type CgroupVersion } from "./cgroup-reader.ts";
import type { PartError } from "./convert.ts";
import { statFs, toFsStats, type FsInfo } from "./fs.ts";
import { readNodeStats } from "./node.ts";
import { netnsOf } from "./pod-network.ts";
import { buildPodStats, PodIndex } from "./pods.ts";
import { CpuRates } from "./rate.ts";
import { DriverVolumeCache, VolumeUsageCache, type PodVolumeStats, type VolumeUsage } from "./volumes.ts";
import type { FsStats, PodStats, StatsProvider, Summary } from "./types.ts";
import { podRef } from "../pods/identity.ts";
import type { PodCgroupPaths } from "../cgroups/active.ts";

/** No ListPodSandboxStats: it can crash containerd 1.6 before 1.6.22 (pod-network.ts). */
export type StatsCri = Pick<CriService, "listContainerStats" | "listContainers" | "listPodSandbox" | "imageFsInfo">;

/** The pods whose stats are reported, as the pod workers' ActivePods answers (pods/active.ts). */
export interface StatsPods {
  activePods(): readonly { metadata: { name?: string; namespace?: string; uid?: string } }[];
}

export interface StatsCollectorOptions {
  nodeName: string;
  /** The kubelet root directory: its filesystem is nodefs. */
  rootDir: string;
  /** Where /proc and /sys are; "/" except in tests. */
  fsRoot?: string;
  /** Detected from `<fsRoot>/sys/fs/cgroup` when absent. */
  cgroupVersion?: CgroupVersion;
  /**
   * The cgroup all pods live under (the kubelet's `<cgroupRoot>/kubepods`
   * with cgroupsPerQOS), relative to the hierarchy root: reported as the
   * node's system container "pods".
   */
  cgroupRoot: string;
  /** A pod's cgroup relative to the hierarchy root (the active pods' cgroups); none without pod cgroups (cgroupsPerQOS false). */
  podCgroups?: PodCgroupPaths;
  cri: StatsCri;
  /** The pods to report: the active pods (pods/active.ts), asked once per pass; only their identity is read. */
  pods: StatsPods;
  /** Root of the pod log directories (upstream /var/log/pods). */
  podLogsDir: string;
  /** How long a volume's measured usage is reused (volumeStatsAggPeriod, default 1m). */
  volumeStatsAggPeriodMs?: number;
  /** A pod's volumes outside its directory (claims) and those measured by their plugin (CSI drivers' NodeGetVolumeStats, asked in the background every volumeStatsAggPeriod); none without it. */
  volumes?: PodVolumeStats;
  /**
   * KubeletPSI (beta, on by default in 1.34): pressure stall information of the
   * node, pods and containers, where the cgroup v2 files exist. Default false.
   */
  psi?: boolean;
  clock: Clock;
  logger: Logger;
}

/**
 * summary() answers with the pass's own objects, shared by every caller
 * until the next pass: read them, do not change them.
 */
export interface StatsCollector extends StatsProvider {
  /** Takes one sample now (joins a pass already in flight). Never rejects. */
  collect(): Promise<void>;
  /**
   * `/metrics/cadvisor`'s view (cadvisor.ts): the pods, sandboxes and
   * containers of the current pass (collected first if it is stale, as
   * summary()), their cgroups read in detail now.
   */
  cadvisor(opts: { sandboxImage: string }): Promise<CadvisorView>;
  /** Collects now and then every `periodMs` after each pass ends. Calling it again changes nothing. */
  start(periodMs: number): void;
  /** Stops the timer and waits for a pass in flight. Idempotent. */
  [Symbol.asyncDispose](): Promise<void>;
  /** The last pass's summary without collecting (undefined before the first); for /metrics, which answers at once. */
  latest(): Summary | undefined;
}

/** summary() reuses a pass younger than this when no period was started. */
export const DEFAULT_MAX_AGE_MS = 10_000;

export function createStatsCollector(opts: StatsCollectorOptions): StatsCollector {
  const fsRoot = opts.fsRoot ?? "/";
  const cgroups = createCgroupReader({ fsRoot, version: opts.cgroupVersion });
  const rates = new CpuRates();
  const volumeUsage = new VolumeUsageCache(`${opts.rootDir}/pods`, opts.volumeStatsAggPeriodMs ?? 60_000);
  const driverVolumes = opts.volumes ? new DriverVolumeCache(opts.volumeStatsAggPeriodMs ?? 60_000, opts.volumes) : undefined;
  const log = opts.logger.with({ component: "stats" });
  const failing = new Set<string>();
  let last: { summary: Summary; atMs: number; containerStats: CriContainerStats[]; imageFsMount: string | undefined } | undefined;
  let inFlight: Promise<void> | undefined;
  let periodMs: number | undefined;
  let cancelTimer: (() => void) | undefined;
  let disposed = false;

  const failed = (part: string, err: unknown) => {
    if (failing.has(part)) log.v(4).info("stats part still failing", { part, err });
    else log.warn("stats part failed; left out of the summary", { part, err });
    failing.add(part);
  };
  const succeeded = (part: string) => {
    if (failing.delete(part)) log.info("stats part recovered", { part });
  };

  /** A CRI list that may fail: [] and a log line instead of a rejection. */
  async function criList<T>(part: string, call: () => Promise<T[]>): Promise<T[]> {
    try {
      const r = await call();
      succeeded(part);
      return r;
    } catch (err) {
      failed(part, err);
      return [];
    }
  }

  async function imageFs(statFsCached: (p: string) => FsInfo | undefined, time: string): Promise<{ stats?: FsStats; info?: FsInfo; containerFs?: FsStats; mount?: string }> {
    try {
      const r = await opts.cri.imageFsInfo();
      succeeded("ImageFsInfo");
      const toStats = (fs: (typeof r.imageFilesystems)[number] | undefined) => {
        if (!fs) return undefined;
        const mount = fs.fsId?.mountpoint;
        const info = mount ? statFsCached(mount) : undefined;
        return { info, stats: toFsStats(time, info, { bytes: fs.usedBytes && Number(fs.usedBytes.value), inodes: fs.inodesUsed && Number(fs.inodesUsed.value) }) };
      };
      const image = toStats(r.imageFilesystems[0]);
      // No separate container filesystem (containerd 1.6 reports none): it is the image filesystem, as upstream.
      const container = toStats(r.containerFilesystems[0]) ?? image;
      const mount = r.imageFilesystems[0]?.fsId?.mountpoint || undefined;
      return { stats: image?.stats, info: image?.info, containerFs: container?.stats, ...(mount ? { mount } : {}) };
    } catch (err) {
      failed("ImageFsInfo", err);
      return {};
    }
  }

  async function pass(): Promise<void> {
    const t0 = performance.now();
    const nowMs = opts.clock.now();
    const time = new Date(nowMs).toISOString();
    const errors: PartError[] = [];
    const fsCache = new Map<string, FsInfo | undefined>();
    const statFsCached = (path: string) => {
      if (!fsCache.has(path)) {
        let info: FsInfo | undefined;
        try {
          info = statFs(path);
        } catch (err) {
          errors.push({ part: `statfs ${path}`, err });
        }
        fsCache.set(path, info);
      }
      return fsCache.get(path);
    };

    const [sandboxes, containers, containerStats, image] = await Promise.all([
      criList("ListPodSandbox", () => opts.cri.listPodSandbox()),
      criList("ListContainers", () => opts.cri.listContainers()),
      criList("ListContainerStats", () => opts.cri.listContainerStats()),
      imageFs(statFsCached, time),
    ]);
    const pods = opts.pods.activePods().map((p) => podRef(p));
    const index = new PodIndex({ sandboxes, containers, containerStats });

    rates.beginRound();
    const psi = opts.psi === true && cgroups.version === "v2";
    const node = readNodeStats(
      { nodeName: opts.nodeName, fsRoot, rootDir: opts.rootDir, podsCgroup: opts.cgroupRoot, cgroups, rates, nowMs, time, statFs: statFsCached, psi },
      errors,
    );
    if (image.stats) node.runtime = { imageFs: image.stats, ...(image.containerFs ? { containerFs: image.containerFs } : {}) };

    const ctx = {
      fsRoot,
      hostNetns: netnsOf(fsRoot, "self"),
      time,
      nowMs,
      rates,
      cgroups,
      podCgroups: opts.podCgroups,
      podLogsDir: opts.podLogsDir,
      nodeFs: statFsCached(opts.rootDir),
      statFs: statFsCached,
      imageFs: image.info,
      volumes: (uid: string): VolumeUsage[] => [
        ...volumeUsage.volumesOf(uid, nowMs, opts.volumes?.claimVolumes(uid) ?? []),
        ...(driverVolumes?.volumesOf(uid, nowMs) ?? []).map(({ name, pvcRef, ...fs }) => ({
          name,
          path: "",
          usage: { bytes: fs.usedBytes, inodes: fs.inodesUsed },
          ephemeral: false,
          ...(pvcRef ? { pvcRef } : {}),
          measured: fs,
        })),
      ],
      psi,
    };
    const podStats: PodStats[] = [];
    for (const pod of pods) {
      try {
        const s = buildPodStats(ctx, pod, index, errors);
        if (s) podStats.push(s);
      } catch (err) {
        errors.push({ part: `pod ${pod.uid}`, err });
      }
    }
    rates.endRound();

    // Node parts warn (once); parts named per pod, container or path are
    // logged at -v=4 only: they come and go with pods.
    const isNodePart = (part: string) => part.startsWith("node ");
    const seen = new Set<string>();
    for (const e of errors) {
      seen.add(e.part);
      if (isNodePart(e.part)) failed(e.part, e.err);
      else log.v(4).info("stats part failed", { part: e.part, err: e.err });
    }
    for (const part of [...failing]) if (isNodePart(part) && !seen.has(part)) succeeded(part);

    last = { summary: { node, pods: podStats }, atMs: nowMs, containerStats, imageFsMount: image.mount };
    log.v(5).info("stats collected", { pods: podStats.length, ms: Math.round(performance.now() - t0) });
  }

  function collect(): Promise<void> {
    inFlight ??= pass()
      .catch((err: unknown) => log.error("stats collection failed", { err }))
      .finally(() => {
        inFlight = undefined;
      });
    return inFlight;
  }

  function schedule(): void {
    if (disposed || periodMs === undefined) return;
    cancelTimer = opts.clock.setTimer(periodMs, () => {
      cancelTimer = undefined;
      void collect().then(schedule);
    });
  }

  /** The last pass, or a new one when it is older than the period. */
  async function current(): Promise<NonNullable<typeof last>> {
    const maxAge = periodMs ?? DEFAULT_MAX_AGE_MS;
    if (!last || opts.clock.now() - last.atMs >= maxAge) await collect();
    if (!last) throw new Error("stats: no summary could be collected");
    return last;
  }

  return {
    collect,
    start(ms: number) {
      if (periodMs !== undefined || disposed) return;
      periodMs = ms;
      void collect().then(schedule);
    },
    latest: () => last?.summary,
    summary: async () => (await current()).summary,
    async cadvisor({ sandboxImage }) {
      const pass = await current();
      // Listed now, not at the last pass: a container started since shows at the next scrape, as with cAdvisor's watch.
      const [sandboxes, containers] = await Promise.all([opts.cri.listPodSandbox(), opts.cri.listContainers()]);
      const index = new PodIndex({ sandboxes, containers, containerStats: pass.containerStats });
      return buildCadvisorView(
        {
          fsRoot,
          cgroups,
          podsCgroup: opts.cgroupRoot,
          podCgroups: opts.podCgroups,
          rootDir: opts.rootDir,
          imageFsMount: pass.imageFsMount,
          sandboxImage,
          psi: opts.psi === true,
        },
        pass.summary,
        index,
        opts.pods.activePods().map((p) => podRef(p)),
      );
    },
    async [Symbol.asyncDispose]() {
      disposed = true;
      cancelTimer?.();
      cancelTimer = undefined;
      await inFlight;
    },
  };
}
