export type { PodRef } from "../pods/identity.ts";
/**
 * Node, pod and container resource usage in the Summary API shape
 * (types.ts): what `/stats/summary` serves and the eviction manager reads.
 * `createStatsCollector` is the real provider; `FakeStatsProvider` serves a
 * summary a test sets.
 */
export type * from "./types.ts";
export { createStatsCollector, DEFAULT_MAX_AGE_MS, type StatsCollector, type StatsCollectorOptions, type StatsCri } from "./collector.ts";
export { createCgroupReader, detectCgroupVersion, type CgroupReader, type CgroupVersion } from "./cgroup-reader.ts";
export type { CgroupCpu, CgroupMemory, CgroupStats, IoBytes } from "./cgroupfs.ts";
export { FakeStatsProvider } from "./fake.ts";
