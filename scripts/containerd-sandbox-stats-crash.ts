// Does this containerd survive ListPodSandboxStats beside calls that read its sandbox store?
// containerd 1.6 before 1.6.22 (Debian 12: 1.6.20) does not: it writes its sandbox map under a
// read lock there and the Go runtime ends it ("concurrent map iteration and map write"). This is
// why the agent's stats never call it (src/stats/pod-network.ts). As root, from the repo:
//   bun scripts/containerd-sandbox-stats-crash.ts                        # ListPodSandboxStats: dies
//   STATS_CALL=containers bun scripts/containerd-sandbox-stats-crash.ts  # ListContainerStats: survives
// SANDBOXES (20) and SECONDS_TO_RUN (60) change the load; it uses a private containerd
// (test/harness/containerd.ts) and removes it afterwards.
import { createCriClient } from "../src/cri/client.ts";
import { NamespaceMode } from "../src/cri/index.ts";
import { createLogger } from "../src/util/log.ts";
import { startContainerd } from "../test/harness/containerd.ts";

const ctd = await startContainerd({ name: "repro" });
const cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
const n = Number(process.env.SANDBOXES ?? 20);
const seconds = Number(process.env.SECONDS_TO_RUN ?? 60);
try {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const name = `r${i}`;
    const config = {
      metadata: { name, namespace: "repro", uid: `uid-${name}`, attempt: 0 },
      hostname: name,
      logDirectory: `${ctd.dir}/logs/${name}`,
      labels: {},
      annotations: {},
      linux: {
        cgroupParent: `${ctd.cgroupParent}/${name}`,
        securityContext: { namespaceOptions: { network: NamespaceMode.POD, pid: NamespaceMode.CONTAINER, ipc: NamespaceMode.POD } },
      },
    };
    const sandbox = await cri.runPodSandbox(config);
    ids.push(sandbox);
    const container = await cri.createContainer(
      sandbox,
      { metadata: { name: "c", attempt: 0 }, image: { image: ctd.busyboxImage }, command: ["sleep", "3600"], logPath: "c.log" },
      config,
    );
    await cri.startContainer(container);
  }
  console.log(`${n} sandboxes; hammering for ${seconds}s`);
  const until = Date.now() + seconds * 1000;
  let stats = 0,
    reads = 0;
  // STATS_CALL=containers: ListContainerStats instead, the call the agent still makes.
  const statsCall = process.env.STATS_CALL === "containers" ? () => cri.listContainerStats() : () => cri.listPodSandboxStats();
  const statsLoop = async () => {
    while (Date.now() < until) {
      await statsCall();
      stats++;
    }
  };
  const readLoop = async () => {
    while (Date.now() < until) {
      await Promise.all([cri.listPodSandbox(), cri.listContainers(), ...ids.slice(0, 5).map((id) => cri.podSandboxStatus(id))]);
      reads++;
    }
  };
  try {
    await Promise.all([statsLoop(), statsLoop(), readLoop(), readLoop()]);
    console.log(`survived: ${stats} stats calls, ${reads} read rounds`);
  } catch (err) {
    console.log(`FAILED after ${stats} stats calls, ${reads} read rounds: ${err}`);
    await Bun.sleep(1000);
    console.log(ctd.describe(20));
    const log = await Bun.file(`${ctd.dir}/containerd.log`).text();
    const at = log.indexOf("fatal error");
    console.log(at >= 0 ? log.slice(at, at + 1500) : "no fatal error in the log");
  }
} finally {
  cri.close();
  await ctd.stop();
}
