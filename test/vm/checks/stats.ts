/**
 * The stats reader (src/stats) on a real cgroup v2 kernel: after the
 * cgroup checks ran a hog and a busy loop in the pods' cgroups, read those
 * cgroups back the way the collector does, and the node's root cgroup.
 */
import { createCgroupReader } from "../../../src/stats/index.ts";
import type { ProbeCheck } from "../protocol.ts";

export const statsChecks: ProbeCheck[] = [
  {
    name: "stats-v2-reader",
    async run(ctx) {
      const writer = ctx.results["cgroup-v2-writer"];
      if (!writer?.ok) throw new Error("no pod cgroups (cgroup-v2-writer failed)");
      const paths = (writer.value as { paths: Record<string, string> }).paths;
      const reader = createCgroupReader({ version: "v2" });
      return {
        version: reader.version,
        guaranteed: reader.read(paths.guaranteed!, { io: true }),
        burstable: reader.read(paths.burstable!),
        kubepods: reader.read("/kubepods"),
      };
    },
  },
];
