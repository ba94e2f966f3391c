// The CRI calls an idle agent makes, by method, with BENCH_PODS (20) static
// pods of one running container each, on the runtime BUNLET_RUNTIME picks
// (containerd16 by default; containerd2 streams container events). Each
// binary of BENCH_BINARIES (comma-separated; default BUNLET_BINARY or
// dist/kubelet) runs in turn against one private containerd, at --v=10 so
// that the agent logs each CRI call; the count is over BENCH_SECONDS (150)
// from 60 s after every pod runs (the first resyncs are over by then).
//
//   BUNLET_RUNTIME=containerd2 bun run bench:idle-cri-calls
//   BENCH_BINARIES=/tmp/old,/tmp/new bun scripts/bench/idle-cri-calls.ts
//
// Prints one JSON line per binary (calls per minute by method, their total),
// then each binary's total as a ratio to the first one's.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { eventually, startAgent } from "../../test/harness/agent.ts";
import { requireRoot, runtimeUnderTest, startContainerd } from "../../test/harness/containerd.ts";

const pods = Number(process.env.BENCH_PODS ?? 20);
const seconds = Number(process.env.BENCH_SECONDS ?? 150);
const binaries = (process.env.BENCH_BINARIES ?? process.env.BUNLET_BINARY ?? "dist/kubelet").split(",");
const CRI_CALL = /"CRI call" (?:component=\S+ )?method=(\w+)/g;

requireRoot();
const ctd = await startContainerd({ name: "idle-cri" });
const totals: number[] = [];
try {
  for (const binary of binaries) {
    process.env.BUNLET_BINARY = binary;
    const agent = await startAgent(ctd, { nodeName: "idle-cri", extraArgs: ["--v=10"] });
    try {
      for (let i = 0; i < pods; i++) {
        const pod = {
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: `idle-${i}`, namespace: "default" },
          spec: { containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"] }] },
        };
        writeFileSync(join(agent.manifests, `idle-${i}.json`), JSON.stringify(pod));
      }
      await eventually(`${pods} pods running`, async () => (await agent.pods()).items.filter((p) => p.status.phase === "Running").length === pods, 180_000);
      await Bun.sleep(60_000);
      const from = agent.log().length;
      await Bun.sleep(seconds * 1000);
      const perMinute: Record<string, number> = {};
      for (const m of agent.log().slice(from).matchAll(CRI_CALL)) perMinute[m[1]!] = (perMinute[m[1]!] ?? 0) + 1;
      for (const k of Object.keys(perMinute)) perMinute[k] = Number(((perMinute[k]! * 60) / seconds).toFixed(1));
      const total = Number(
        Object.values(perMinute)
          .reduce((a, b) => a + b, 0)
          .toFixed(1),
      );
      totals.push(total);
      console.log(JSON.stringify({ binary, runtime: runtimeUnderTest(), pods, seconds, criCallsPerMinute: total, byMethod: perMinute }));
    } finally {
      await agent.kill("SIGKILL");
    }
  }
  if (totals.length > 1) console.log(JSON.stringify({ ratioToFirst: totals.map((t) => Number((t / totals[0]!).toFixed(2))) }));
} finally {
  await ctd.stop();
}
