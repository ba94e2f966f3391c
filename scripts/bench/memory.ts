// Where the agent's memory goes, over time: dist/kubelet in cluster mode on
// the harness's containerd and control plane, idle, with N pods, and after
// they are deleted. Every 10 s it prints VmRSS split into anonymous and
// file-backed pages (the file-backed part is mostly Bun's own code, about
// 45-50 MiB, the same in every run), the open sockets, the threads, the CPU
// time used so far, and the agent's /debug/memory: the JS heap's live size
// and capacity, and the native allocator's bytes in use and committed.
// With SNAPSHOTS=1 it also saves heap snapshots (idle, with the pods, after)
// into OUT and prints the largest kinds of objects in them; PROFILE=1 saves
// a 30 s CPU profile taken with the pods running, PROFILE=start one of the
// 30 s from the pods' creation (the start burst), PROFILE=delete one of the
// 30 s from their deletion.
// Run (root): bun run bench:memory   [BENCH_PODS=110] [OUT=/tmp/bunlet-memory]
// A diagnostic for issue #9's memory figures; `bun run bench` gives the figures.
import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { createRestClient, loadCredentials } from "../../src/api/rest.ts";
import type { MemoryFigures } from "../../src/server/debug.ts";
import { realClock } from "../../src/util/clock.ts";
import { eventually, startAgent } from "../../test/harness/agent.ts";
import { requireRoot, startContainerd } from "../../test/harness/containerd.ts";
import { startControlPlane } from "../../test/harness/controlplane.ts";
import { CLK_TCK, cpuTicks, statusMiB } from "./proc.ts";
import { createLogger } from "../../src/util/log.ts";

const COUNT = Number(process.env.BENCH_PODS ?? 110);
const NODE = "memory-node";
const OUT = process.env.OUT ?? "/tmp/bunlet-memory";

function processFigures(pid: number | undefined): string {
  if (!pid) return "agent not running";
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const mib = (field: string) => statusMiB(status, field).toFixed(1);
  let sockets = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("socket:")) sockets++;
    } catch {
      // closed while listing
    }
  }
  const cpuSeconds = cpuTicks(pid) / CLK_TCK;
  return `RSS ${mib("VmRSS")} MiB (anon ${mib("RssAnon")}, file ${mib("RssFile")}), sockets ${sockets}, threads ${/Threads:\s+(\d+)/.exec(status)?.[1]}, CPU ${cpuSeconds.toFixed(1)} s so far`;
}

/** The largest kinds of objects in a V8-format heap snapshot, by their own size. */
function summarizeSnapshot(json: string, top = 15): string {
  const snap = JSON.parse(json) as { snapshot: { meta: { node_fields: string[]; node_types: [string[]] } }; nodes: number[]; strings: string[] };
  const fields = snap.snapshot.meta.node_fields;
  const [iType, iName, iSize, width] = [fields.indexOf("type"), fields.indexOf("name"), fields.indexOf("self_size"), fields.length];
  const kinds = new Map<string, { count: number; bytes: number }>();
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = snap.snapshot.meta.node_types[0][snap.nodes[i + iType]!]!;
    const kind = type.includes("string") ? `(${type})` : `${type}:${snap.strings[snap.nodes[i + iName]!]}`;
    const k = kinds.get(kind) ?? { count: 0, bytes: 0 };
    k.count++;
    k.bytes += snap.nodes[i + iSize]!;
    total += snap.nodes[i + iSize]!;
    kinds.set(kind, k);
  }
  const rows = [...kinds].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top);
  return [
    `  heap ${(total / 1048576).toFixed(1)} MiB in ${snap.nodes.length / width} objects; largest kinds:`,
    ...rows.map(([kind, k]) => `  ${(k.bytes / 1024).toFixed(0).padStart(7)} KiB ${String(k.count).padStart(7)}  ${kind.slice(0, 80)}`),
  ].join("\n");
}

requireRoot();
mkdirSync(OUT, { recursive: true });
const [ctd, cp] = await Promise.all([startContainerd({ name: "memory" }), startControlPlane({ name: "memory" })]);
try {
  // The debug handlers on a loopback port, without authentication: a private agent on a private control plane.
  const agent = await startAgent(ctd, {
    nodeName: NODE,
    extraConfig: { enableProfilingHandler: true, authentication: { anonymous: { enabled: true }, webhook: { enabled: false } }, authorization: { mode: "AlwaysAllow" } },
    extraArgs: [`--kubeconfig=${await cp.nodeKubeconfig(NODE)}`],
  });
  const { port } = JSON.parse(readFileSync(`${agent.dir}/kubelet.yaml`, "utf8")) as { port: number };
  const debug = (path: string) => fetch(`https://127.0.0.1:${port}${path}`, { tls: { rejectUnauthorized: false } } as RequestInit);
  const rest = createRestClient({
    credentials: await loadCredentials(cp.adminKubeconfig),
    qps: 0,
    burst: 0,
    clock: realClock,
    logger: createLogger({ verbosity: 0 }),
    userAgent: "bench-memory",
  });
  const mib = (bytes: number) => (bytes / 1048576).toFixed(1);
  const report = async (label: string) => {
    console.log(`${label.padEnd(16)} ${processFigures(agent.pid())}`);
    const m = (await (await debug("/debug/memory")).json()) as MemoryFigures;
    const native = m.nativeAllocator
      ? `, native in use ${mib(m.nativeAllocator.inUse)} of ${mib(m.nativeAllocator.committed)} committed (peak ${mib(m.nativeAllocator.peakCommitted)})`
      : "";
    console.log(`${"".padEnd(16)} JS heap ${mib(m.jsHeap.size)} of ${mib(m.jsHeap.capacity)}, external ${mib(m.external)}${native}`);
  };
  const snapshot = async (name: string) => {
    if (process.env.SNAPSHOTS !== "1") return;
    const body = await (await debug("/debug/heap")).text();
    writeFileSync(`${OUT}/${name}.heapsnapshot`, body);
    console.log(`${name}.heapsnapshot (a snapshot collects garbage first, and its own buffers raise RSS for a while):\n${summarizeSnapshot(body)}`);
  };
  const watchFor = async (label: string, seconds: number) => {
    for (let s = 10; s <= seconds; s += 10) {
      await Bun.sleep(10_000);
      await report(`${label} +${s}s`);
    }
  };

  await eventually(
    "node Ready",
    async () => {
      const node = await rest.request<{ status?: { conditions?: { type: string; status: string }[] } }>("GET", `/api/v1/nodes/${NODE}`).catch(() => undefined);
      return node?.status?.conditions?.find((c) => c.type === "Ready")?.status === "True";
    },
    60_000,
    100,
  );
  await Bun.sleep(5000);
  await report("idle");
  await snapshot("idle");

  await rest.request("POST", "/api/v1/namespaces", { body: { apiVersion: "v1", kind: "Namespace", metadata: { name: "bench" } } });
  const startProfile = process.env.PROFILE === "start" ? debug("/debug/profile?seconds=30").then((r) => r.text()) : undefined;
  await Promise.all(
    Array.from({ length: COUNT }, (_, i) =>
      rest.request("POST", "/api/v1/namespaces/bench/pods", {
        body: {
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: `p${i}` },
          spec: {
            nodeName: NODE,
            terminationGracePeriodSeconds: 1,
            containers: [{ name: "c", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"] }],
          },
        },
      }),
    ),
  );
  await eventually(
    `${COUNT} pods Running`,
    async () => {
      const list = await rest.request<{ items: { status?: { phase?: string } }[] }>("GET", "/api/v1/namespaces/bench/pods");
      return list.items.filter((p) => p.status?.phase === "Running").length === COUNT;
    },
    300_000,
    1000,
  );
  await report(`${COUNT} pods`);
  if (startProfile) {
    writeFileSync(`${OUT}/profile-start.txt`, await startProfile);
    console.log(`${OUT}/profile-start.txt written`);
  }
  if (process.env.PROFILE === "1") {
    writeFileSync(`${OUT}/profile.txt`, await (await debug("/debug/profile?seconds=30")).text());
    console.log(`${OUT}/profile.txt written`);
  }
  await watchFor(`${COUNT} pods`, 60);
  await snapshot("pods");

  const deleteProfile = process.env.PROFILE === "delete" ? debug("/debug/profile?seconds=30").then((r) => r.text()) : undefined;
  await rest.request("DELETE", "/api/v1/namespaces/bench/pods");
  await eventually("pods gone", async () => (await rest.request<{ items: unknown[] }>("GET", "/api/v1/namespaces/bench/pods")).items.length === 0, 120_000, 1000);
  if (deleteProfile) {
    writeFileSync(`${OUT}/profile-delete.txt`, await deleteProfile);
    console.log(`${OUT}/profile-delete.txt written`);
  }
  await watchFor("deleted", 60);
  await snapshot("deleted");
  await agent.kill("SIGTERM");
} finally {
  await Promise.all([ctd.stop(), cp.stop()]);
}
