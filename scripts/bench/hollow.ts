// Hollow bunlet nodes, for the scale bench only (scripts/bench/scale.ts, issue
// #24; never part of the shipped binary): many whole agents in one Bun process,
// each with its own node name, its own API client (its node credentials) and
// the in-memory fake CRI, as upstream's kubemark hollow nodes run the kubelet
// against a fake runtime. Every subsystem is the real one; what would touch
// the host is off, as in the in-process agent test (src/agent.test.ts): no pod
// cgroups (cgroupsPerQOS false, no node allocatable enforced), no mounts
// (FakeMounter), no ports (enableServer false, healthz and read-only ports 0).
// What is left reads the host only: machine facts and stats from /proc and
// /sys (so every node reports this machine's capacity), and the OOM watcher's
// /dev/kmsg where it may be read.
//
//   bun scripts/bench/hollow.ts NODES.json DIR
//
// NODES.json: [{ "node": "hollow-bunlet-000", "kubeconfig": "/path" }, ...].
// Each agent's root directory is DIR/<node>; the agents' log lines (warnings
// and info, node= on each) go to DIR/agents.log. One GC pacer watches the
// process's heap (the others see a heap that never grows: one pacer per heap,
// as in the agent). The event loop's lateness: a one-second timer writes
// `<unix ms> <lag ms>` to DIR/lag.log each tick. SIGTERM or SIGINT stops
// every agent and exits.
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runAgent } from "../../src/agent.ts";
import { kubeletVersion, loadConfig } from "../../src/config/index.ts";
import { FakeCri } from "../../src/cri/fake.ts";
import { realClock } from "../../src/util/clock.ts";
import { createLogger } from "../../src/util/log.ts";
import { FakeMounter } from "../../src/volumes/mount.ts";

const [nodesFile, dir] = process.argv.slice(2);
if (!nodesFile || !dir) {
  console.error("usage: bun scripts/bench/hollow.ts NODES.json DIR");
  process.exit(2);
}
const nodes = JSON.parse(readFileSync(nodesFile, "utf8")) as { node: string; kubeconfig: string }[];
/** Agents started at once; the next waits this long after the one before it (a start storm would delay the leases). */
const START_GAP_MS = Number(process.env.HOLLOW_START_GAP_MS ?? 100);
mkdirSync(dir, { recursive: true });
const log = Bun.file(join(dir, "agents.log")).writer();
const lagLog = Bun.file(join(dir, "lag.log")).writer();
const sink = { write: (line: string) => void log.write(`${line}\n`) };
const stop = new AbortController();
const version = kubeletVersion(undefined);

// The event loop's lateness, measured by a one-second timer.
let expected = performance.now() + 1000;
const tick = setInterval(() => {
  const now = performance.now();
  lagLog.write(`${Date.now()} ${Math.max(0, now - expected).toFixed(1)}\n`);
  void lagLog.flush();
  expected = now + 1000;
}, 1000);

const flatHeap = { sizeBytes: () => 0, collect: () => {} };
const running: Promise<unknown>[] = [];
const cris: FakeCri[] = [];
for (const [i, { node, kubeconfig }] of nodes.entries()) {
  if (stop.signal.aborted) break;
  const root = join(dir, node);
  const config = JSON.stringify({
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    podLogsDir: join(root, "pod-logs"),
    cgroupsPerQOS: false,
    enforceNodeAllocatable: [],
    enableServer: false,
    healthzPort: 0,
    readOnlyPort: 0,
  });
  const loaded = loadConfig(
    [
      "--config=/hollow/config.json",
      `--hostname-override=${node}`,
      `--root-dir=${join(root, "root")}`,
      `--cert-dir=${join(root, "pki")}`,
      `--kubeconfig=${kubeconfig}`,
      "--node-ip=127.0.0.1",
    ],
    { readFile: () => config, hostname: () => node },
  );
  if (loaded.kind !== "run") throw new Error(`${node}: config: ${JSON.stringify(loaded)}`);
  // A real directory for the image filesystem, as kubemark's fake cadvisor reports one: with the fake's
  // default (a path that does not exist) every node's image GC failed and posted ImageGCFailed every 5 min.
  const cri = new FakeCri({ clock: realClock, imageFsMountpoint: dir });
  cris.push(cri);
  const logger = createLogger({ verbosity: 0, sink, fields: { node } });
  running.push(
    runAgent(loaded.config, {
      logger,
      signal: stop.signal,
      clock: realClock,
      cri,
      mounter: new FakeMounter(),
      version,
      ...(i === 0 ? {} : { heap: flatHeap }),
    }).catch((err: unknown) => {
      logger.error("hollow agent failed", { err: err instanceof Error ? (err.stack ?? err.message) : String(err) });
      console.error(`hollow: ${node} failed: ${String(err)}`);
    }),
  );
  await Bun.sleep(START_GAP_MS);
}
console.error(`hollow: ${running.length} agents started`);

// The fake CRI records every call (for tests' assertions); nothing reads them here.
const trim = setInterval(() => {
  for (const c of cris) c.calls.length = 0;
}, 30_000);

const shutdown = async () => {
  if (stop.signal.aborted) return;
  stop.abort();
  clearInterval(tick);
  clearInterval(trim);
  await Promise.allSettled(running);
  await log.end();
  await lagLog.end();
  process.exit(0);
};
process.on("SIGTERM", () => void shutdown());
process.on("SIGINT", () => void shutdown());
