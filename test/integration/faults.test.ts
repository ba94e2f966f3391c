// Faults an edge node meets, on a real control plane and a real containerd
// (issue #8): kill -9 of the agent while a pod is created and while one is
// terminated, the agent restarting (after a simulated reboot) while
// kube-apiserver is down, a truncated checkpoint file, kube-apiserver down
// while a container crashes and a static pod is added, containerd restarting
// under 20 pods, and SIGTERM. Each checks through the runtime itself that
// nothing was lost or duplicated: container and sandbox IDs and restart
// counts before and after.
//
// The crash-while-offline outage lasts the 2 minutes; the one around
// the reboot, 40 s: both longer than the control plane's node monitor grace
// period here (20 s) and the node Lease, so the node goes stale and recovers
// as in a long outage; nothing in the agent depends on the outage's length
// beyond its retry caps (10 s for statuses, 30 s for watches).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCriClient } from "../../src/cri/client.ts";
import { ContainerFilter, ContainerState, PodSandboxFilter, PodSandboxState, type CriService } from "../../src/cri/index.ts";
import { createLogger } from "../../src/util/log.ts";
import { eventually, explainFailure, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, runtimeUnderTest, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { adminKubectl, startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "fault-node";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
let cri: CriService;

const { kubectl, tryJson, apply } = adminKubectl(() => cp);
const sleeper = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  image: ctd.busyboxImage,
  imagePullPolicy: "IfNotPresent",
  command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
  ...extra,
});
const apiPod = (name: string, containers: unknown[], extra: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  // Bound directly: the scheduler is not what these tests are about.
  spec: { nodeName: NODE, terminationGracePeriodSeconds: 2, containers, ...extra },
});
const runningPod = async (name: string) =>
  eventually(
    `${name} Running in the API`,
    async () => {
      const p = await tryJson("pod", name);
      return p?.status?.phase === "Running" && p.status.containerStatuses?.every((c: any) => c.state?.running) ? p : undefined;
    },
    60_000,
  );

const sandboxesOf = (uid: string) => cri.listPodSandbox(PodSandboxFilter.create({ labelSelector: { "io.kubernetes.pod.uid": uid } }));
const containersOf = (uid: string) => cri.listContainers(ContainerFilter.create({ labelSelector: { "io.kubernetes.pod.uid": uid } }));
/** container name → IDs of its running containers; more than one would be a duplicate. */
async function runningByName(uid: string): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const c of await containersOf(uid)) {
    if (c.state !== ContainerState.CONTAINER_RUNNING) continue;
    (out[c.metadata?.name ?? ""] ??= []).push(c.id);
  }
  return out;
}
const readySandboxes = async (uid: string) => (await sandboxesOf(uid)).filter((s) => s.state === PodSandboxState.SANDBOX_READY).map((s) => s.id);
/** What must not change across a fault: the pod's ready sandboxes and running containers. */
const runtimeView = async (uids: string[]) =>
  Object.fromEntries(await Promise.all(uids.map(async (uid) => [uid, { sandboxes: await readySandboxes(uid), containers: await runningByName(uid) }] as const)));
/** The agent's own view of restart counts and container IDs (read-only /pods: works without the API server). */
const localStatuses = async () =>
  Object.fromEntries(
    (await agent.pods()).items.map((p) => [
      p.metadata.uid,
      Object.fromEntries(p.status.containerStatuses.map((c: any) => [c.name, { id: c.containerID as string, restartCount: c.restartCount }])),
    ]),
  );

/** What a reboot does to the pods' volumes: every mount below the pods directory is gone, and so is tmpfs content. */
function forgetPodVolumes(podsDir: string): void {
  const mounts = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" ")[4] ?? "")
    .filter((m) => m.startsWith(`${podsDir}/`))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) Bun.spawnSync(["umount", "-l", m]);
  rmSync(podsDir, { recursive: true, force: true });
}

const checkpointDir = () => join(agent.dir, "root", "checkpoints", "pods");
async function apiReachable(): Promise<boolean> {
  try {
    await fetch(`${cp.apiServerUrl}/readyz`, { tls: { rejectUnauthorized: false } } as RequestInit);
    return true;
  } catch {
    return false;
  }
}
/** Stops kube-apiserver for `seconds` in the background; resolves once it is down, with the promise of its return. */
async function apiServerOutage(seconds: number): Promise<{ back: Promise<void> }> {
  const back = cp.restartApiServer({ downSeconds: seconds });
  await eventually("kube-apiserver down", async () => !(await apiReachable()), 30_000, 100);
  return { back };
}
const nodeReady = async () => {
  const n = await tryJson("node", NODE);
  return n?.status?.conditions?.find((c: any) => c.type === "Ready")?.status === "True";
};

/** A failed test also prints the agent's and containerd's state and last problems. */
const explained = (body: () => Promise<void>) =>
  explainFailure(
    body,
    () => agent,
    () => ctd,
  );

beforeAll(async () => {
  requireRoot();
  [ctd, cp] = await startTogether([startContainerd({ name: "faults" }), startControlPlane({ name: "faults", nodeMonitorGracePeriod: "20s" })]);
  cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
  const kubeconfig = await cp.nodeKubeconfig(NODE);
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${kubeconfig}`, "--node-ip=127.0.0.1"],
    // The cluster CA verifies the API server's client certificate: `kubectl logs -f` and `exec` reach 10250 (SIGTERM test).
    extraConfig: { fileCheckFrequency: "2s", authentication: { x509: { clientCAFile: cp.caFile } } },
  });
  await eventually("node Ready", nodeReady, 60_000);
}, 180_000);

afterAll(async () => {
  if (process.env.BUNLET_KEEP_AGENT_LOG) Bun.write(process.env.BUNLET_KEEP_AGENT_LOG, agent?.log() ?? "");
  await agent?.kill("SIGKILL");
  cri?.close();
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

describe("faults (issue #8)", () => {
  test(
    "kill -9 of the agent while it creates a pod: after the restart one sandbox and one running container per name",
    explained(async () => {
      await apply(apiPod("born", [sleeper("a"), sleeper("b"), sleeper("c")]));
      const uid = await eventually("born has a UID", async () => (await tryJson("pod", "born"))?.metadata?.uid as string | undefined);
      await eventually("born's sandbox exists", async () => (await sandboxesOf(uid)).length > 0, 30_000, 10);
      expect(await agent.kill("SIGKILL")).not.toBe(0);
      agent.start();
      await runningPod("born");
      const running = await eventually("three running containers", async () => {
        const r = await runningByName(uid);
        return Object.keys(r).length === 3 ? r : undefined;
      });
      expect(Object.values(running).map((ids) => ids.length)).toEqual([1, 1, 1]);
      expect(await sandboxesOf(uid)).toHaveLength(1);
    }),
    90_000,
  );

  test(
    "kill -9 of the agent while it terminates a pod: the restart finishes the deletion and starts nothing again",
    explained(async () => {
      // TERM makes the container linger 4 s, so the agent is killed mid-termination.
      await apply(apiPod("lingers", [sleeper("c", { command: ["sh", "-c", "trap 'sleep 4; exit 0' TERM; while true; do sleep 1; done"] })], { terminationGracePeriodSeconds: 30 }));
      const pod = await runningPod("lingers");
      const uid = pod.metadata.uid as string;
      const before = await runtimeView([uid]);
      const logBefore = agent.log().length;
      await kubectl("delete", "pod", "lingers", "--wait=false");
      await eventually("the agent kills lingers", () => agent.log().slice(logBefore).includes("killing pod"), 30_000, 50);
      await agent.kill("SIGKILL");
      agent.start();
      await eventually("lingers gone from the API", async () => (await cp.kubectl(["get", "pod", "lingers"])).code !== 0, 60_000);
      expect(await runningByName(uid)).toEqual({});
      // Nothing was started again: no sandbox or container other than the ones it had (the agent may have removed them).
      for (const s of await sandboxesOf(uid)) expect(before[uid]!.sandboxes).toContain(s.id);
      for (const c of await containersOf(uid)) expect(before[uid]!.containers["c"]!).toContain(c.id);
      expect(agent.log().slice(logBefore)).not.toContain('created pod sandbox" pod=lingers');
    }),
    90_000,
  );

  test(
    "restart after a reboot while kube-apiserver is down: pods come back from the checkpoint, a truncated file is reported and ignored, the reconnect applies the API's view and recreates nothing",
    explained(async () => {
      await apply(
        apiPod("edge-a", [sleeper("main")]),
        apiPod("edge-b", [sleeper("main"), sleeper("side")]),
        apiPod("edge-c", [sleeper("main")]),
        apiPod("edge-gone", [sleeper("main")]),
      );
      const uids = Object.fromEntries(await Promise.all(["edge-a", "edge-b", "edge-c", "edge-gone"].map(async (n) => [n, (await runningPod(n)).metadata.uid as string] as const)));
      await eventually("checkpoint files of the edge pods", () => Object.values(uids).every((uid) => existsSync(join(checkpointDir(), `${uid}.json`))));

      // The reboot: the agent dies, every container on the node stops, and every tmpfs is gone:
      // the pods' service account token volumes must be rebuilt from the checkpoint, offline.
      await agent.kill("SIGKILL");
      for (const s of await cri.listPodSandbox()) await cri.stopPodSandbox(s.id);
      forgetPodVolumes(join(agent.dir, "root", "pods"));
      const truncated = join(checkpointDir(), `${uids["edge-c"]}.json`);
      const text = readFileSync(truncated, "utf8");
      writeFileSync(truncated, text.slice(0, Math.floor(text.length / 2)));
      // Deleted while the agent was down: the checkpoint still has it, the API's view will not.
      await kubectl("delete", "pod", "edge-gone", "--force", "--grace-period=0");

      const outage = await apiServerOutage(40);
      const logBefore = agent.log().length;
      agent.start();
      for (const name of ["edge-a", "edge-b", "edge-gone"]) {
        await eventually(`${name} runs again from the checkpoint`, async () => Object.keys(await runningByName(uids[name]!)).length === (name === "edge-b" ? 2 : 1), 45_000);
      }
      const offlineLog = agent.log().slice(logBefore);
      expect(offlineLog).toContain("running the pods of the local checkpoint");
      expect(offlineLog).toContain("ignoring corrupt checkpoint");
      expect(offlineLog).toContain("the API cannot issue a token; using the checkpointed one until it expires");
      expect(offlineLog).toContain("the API cannot answer; using the checkpointed copy");
      expect(offlineLog).toContain(truncated);
      expect(await runningByName(uids["edge-c"]!)).toEqual({}); // its checkpoint was ignored
      // Startup did not wait for the API server: the syncLoop runs and the agent reports itself healthy.
      expect(await (await fetch(`http://127.0.0.1:${agent.healthzPort}/healthz`)).text()).toBe("ok");
      expect(await apiReachable()).toBe(false);
      // Let the offline agent settle (statuses, probes), then take the reference view.
      await eventually("the agent reports the restored pods", async () => {
        const local = await localStatuses();
        return [uids["edge-a"]!, uids["edge-b"]!].every((uid) => Object.values(local[uid] ?? {}).length > 0 && Object.values(local[uid]!).every((c: any) => c.id));
      });
      const restored = [uids["edge-a"]!, uids["edge-b"]!];
      const offline = await runtimeView(restored);
      const offlineLocal = await localStatuses();

      await outage.back;
      // edge-c exists in the API: it runs once the API answers; its checkpoint is written whole again.
      await runningPod("edge-c");
      await eventually("edge-c checkpoint rewritten", () => {
        try {
          return JSON.parse(readFileSync(truncated, "utf8")).key === uids["edge-c"];
        } catch {
          return false;
        }
      });
      // The statuses queued offline reach the API: the restored containers' IDs.
      for (const uid of restored) {
        const name = Object.entries(uids).find(([, u]) => u === uid)![0];
        await eventually(
          `${name} status in the API shows the restored containers`,
          async () => {
            const p = await tryJson("pod", name);
            return p?.status?.containerStatuses?.every((c: any) => c.containerID === offlineLocal[uid]![c.name]!.id && c.restartCount === offlineLocal[uid]![c.name]!.restartCount);
          },
          45_000,
        );
      }
      expect(agent.log().slice(logBefore)).toContain("API server reachable again");
      // The API's view wins: the pod deleted meanwhile is stopped, and its checkpoint removed.
      await eventually("edge-gone stopped", async () => Object.keys(await runningByName(uids["edge-gone"]!)).length === 0, 45_000);
      await eventually("edge-gone's checkpoint removed", () => !existsSync(join(checkpointDir(), `${uids["edge-gone"]}.json`)));
      // Zero recreations on reconnect: same sandboxes, containers and restart counts.
      expect(await runtimeView(restored)).toEqual(offline);
      const local = await localStatuses();
      for (const uid of restored) expect(local[uid]).toEqual(offlineLocal[uid]!);
    }),
    150_000,
  );

  // Part of the containerd 1.6 line only, as scripts/test.sh chooses whole files for the 2.x line (it runs this file on
  // both): what this test adds is the API side of a long outage (statuses queued offline, the mirror pod created late,
  // the node Ready again), which no runtime changes. Its runtime steps are each proven on containerd 2.x by other tests:
  // a crash noticed and restarted (pleg, static-pods), exec readiness probes (prober), a static pod started
  // (static-pods), a reconnect that recreates nothing (the reboot test above). On the 2.x line it was 150 s of the same,
  // most of it the outage itself.
  if (runtimeUnderTest() !== "containerd2")
    test(
      "kube-apiserver down 2 minutes: a crashed container is restarted, probes run, a static pod file starts; the reconnect reconciles statuses and recreates nothing",
      explained(async () => {
        const readiness = { exec: { command: ["true"] }, periodSeconds: 1 };
        await apply(apiPod("crashy", [sleeper("main", { readinessProbe: readiness })]));
        const uid = (await runningPod("crashy")).metadata.uid as string;
        const first = (await runningByName(uid))["main"]![0]!;

        const outage = await apiServerOutage(120);
        await cri.stopContainer(first, 0); // the crash
        const restarted = await eventually(
          "crashy restarted while offline, and ready again",
          async () => {
            const p = (await agent.pods()).items.find((i) => i.metadata.uid === uid);
            const c = p?.status.containerStatuses[0] as any;
            return c && c.restartCount === 1 && c.ready && c.containerID && !c.containerID.endsWith(first) ? c : undefined;
          },
          40_000,
        );
        writeFileSync(join(agent.manifests, "offline-static.json"), JSON.stringify(apiPod("offline-static", [sleeper("main")], { nodeName: undefined })));
        const staticPod = await eventually(
          "the static pod runs while offline",
          async () => (await agent.pods()).items.find((p) => p.metadata.name === `offline-static-${NODE}` && p.status.phase === "Running"),
          30_000,
        );
        expect(await apiReachable()).toBe(false);
        const everyUid = (await agent.pods()).items.map((p) => p.metadata.uid);
        const offline = await runtimeView(everyUid);
        const offlineLocal = await localStatuses();

        await outage.back;
        await eventually(
          "crashy's status in the API has the restart",
          async () => {
            const c = (await tryJson("pod", "crashy"))?.status?.containerStatuses?.[0];
            return c?.restartCount === 1 && c.containerID === restarted.containerID && c.ready === true;
          },
          45_000,
        );
        await eventually(
          "the static pod's mirror is Running in the API",
          async () => {
            const m = await tryJson("pod", `offline-static-${NODE}`);
            return m?.metadata?.annotations?.["kubernetes.io/config.mirror"] === staticPod.metadata.uid && m.status?.phase === "Running";
          },
          45_000,
        );
        await eventually("node Ready again", nodeReady, 45_000);
        expect(await runtimeView(everyUid)).toEqual(offline);
        expect(await localStatuses()).toEqual(offlineLocal);
      }),
      240_000,
    );

  test(
    "containerd restart with 20 pods running: the agent reconnects and recreates nothing the runtime kept",
    explained(async () => {
      const names = Array.from({ length: 20 }, (_, i) => `many-${i}`);
      const logAtCreate = agent.log().length;
      await apply(...names.map((n) => apiPod(n, [sleeper("main")])));
      const uids = await Promise.all(names.map(async (n) => (await runningPod(n)).metadata.uid as string));
      const before = await runtimeView(uids);
      for (const uid of uids) expect(Object.values(before[uid]!.containers).flat()).toHaveLength(1);
      const logBefore = agent.log().length;

      await ctd.restart();
      // The agent still works: a new pod runs through the restarted runtime.
      await apply(apiPod("after-restart", [sleeper("main")]));
      await runningPod("after-restart");
      // A few PLEG relists and resyncs later, nothing was recreated.
      await Bun.sleep(5000);
      const after = await runtimeView(uids);
      const runtimeLog = readFileSync(join(ctd.dir, "containerd.log"), "utf8").split("\n");
      const agentLog = agent.log().slice(logAtCreate).split("\n");
      // containerd itself can lose a sandbox around its restart: its connection to the pod's shim closes and it cleans the
      // shim up ("shim disconnected", at info and warning level) though nobody stopped the sandbox. The sandbox is then not
      // ready and a new one is what upstream makes too. Such a pod is left out; any other change fails, and the error says
      // what the agent and containerd logged about the pod (CI shows only the end of a failed test's output).
      const lostByRuntime = (sandboxId: string) => {
        const disconnected = runtimeLog.findIndex((l) => l.includes(`msg="shim disconnected" id=${sandboxId}`));
        const stopAsked = runtimeLog.findIndex((l) => l.includes(`msg="StopPodSandbox for \\"${sandboxId}\\""`));
        return disconnected >= 0 && (stopAsked < 0 || stopAsked > disconnected);
      };
      const nameOf = (uid: string) => names[uids.indexOf(uid)]!;
      const recreated = uids.filter((uid) => !Bun.deepEquals(after[uid], before[uid]));
      const lost = recreated.filter((uid) => lostByRuntime(before[uid]!.sandboxes[0]!));
      const unexplained = recreated
        .filter((uid) => !lost.includes(uid))
        .flatMap((uid) => {
          const name = nameOf(uid);
          const old = [...before[uid]!.sandboxes, ...Object.values(before[uid]!.containers).flat()];
          const mentions = (l: string) => l.includes(uid) || [`pod=${name} `, `pod=${name}_`, `pod=default/${name} `].some((m) => l.includes(m));
          return [
            `${name} ${JSON.stringify(before[uid])} → ${JSON.stringify(after[uid])}; the agent's lines about it:`,
            ...agentLog.filter(mentions).slice(-20),
            "containerd's lines about its old sandbox and container:",
            ...runtimeLog.filter((l) => old.some((id) => l.includes(id))).slice(-12),
          ].map((l) => l.slice(0, 300));
        });
      if (unexplained.length) throw new Error(`recreated across the containerd restart:\n${unexplained.join("\n")}`);
      if (lost.length) console.log(`containerd lost the sandboxes of ${lost.length} pod(s) in its restart; the agent made new ones: ${lost.join(", ")}`);
      const keptNames = uids.filter((uid) => !lost.includes(uid)).map(nameOf);
      const statuses = await Promise.all(keptNames.map((n) => tryJson("pod", n)));
      expect(statuses.map((p) => p?.status?.containerStatuses?.[0]?.restartCount)).toEqual(keptNames.map(() => 0));
      for (const n of keptNames) expect(agent.log().slice(logBefore)).not.toContain(`created pod sandbox" pod=${n} `);
      await fetch(`http://127.0.0.1:${agent.healthzPort}/healthz`).then(async (r) => expect(await r.text()).toBe("ok"));
    }),
    150_000,
  );

  test(
    "SIGTERM stops the agent within seconds, with a log stream, an exec session and a container stop in flight, and leaves every pod running",
    explained(async () => {
      // What held a SIGTERM'd agent open in a conformance run: work in flight. A `kubectl logs -f` and an exec session
      // through the API server to 10250, and a pod being deleted whose container ignores SIGTERM (sleep as PID 1), so
      // its stop waits out the 20 s grace period.
      await apply(
        apiPod("chatty", [sleeper("main", { command: ["sh", "-c", "trap 'exit 0' TERM; while true; do echo tick; sleep 1; done"] })]),
        apiPod("stubborn", [sleeper("main", { command: ["sleep", "3600"] })], { terminationGracePeriodSeconds: 20 }),
      );
      await Promise.all([runningPod("chatty"), runningPod("stubborn")]);
      const kubectlArgv = (...args: string[]) => [join(cp.binDir, "kubectl"), "--kubeconfig", cp.adminKubeconfig, ...args];
      const follow = Bun.spawn(kubectlArgv("logs", "-f", "chatty"), { stdout: "pipe", stderr: "pipe" });
      const exec = Bun.spawn(kubectlArgv("exec", "-i", "chatty", "--", "cat"), { stdin: "pipe", stdout: "pipe", stderr: "pipe" });
      try {
        const seen = { follow: "", exec: "" };
        void (async () => {
          for await (const b of follow.stdout) seen.follow += new TextDecoder().decode(b);
        })();
        void (async () => {
          for await (const b of exec.stdout) seen.exec += new TextDecoder().decode(b);
        })();
        await eventually("kubectl logs -f streaming", () => seen.follow.includes("tick"), 30_000);
        exec.stdin.write("ping\n");
        exec.stdin.flush();
        await eventually("the exec session answering", () => seen.exec.includes("ping"), 30_000);
        const stubborn = (await tryJson("pod", "stubborn")).metadata.uid as string;
        await kubectl("delete", "pod", "stubborn", "--wait=false");
        // The agent's Killing event says the stop began; the container ignores it for its 20 s.
        await eventually(
          "the stubborn container's stop in flight",
          async () => (await kubectl("get", "events", "--field-selector", "involvedObject.name=stubborn,reason=Killing", "-o", "name")).trim() !== "",
          30_000,
        );

        const uids = (await agent.pods()).items.map((p) => p.metadata.uid).filter((uid) => uid !== stubborn);
        const before = await runtimeView(uids);
        const stopping = Date.now();
        expect(await agent.kill("SIGTERM")).toBe(0);
        // The pod workers give the stop in flight 2 s; nothing else waits (it took the 20 s grace period before).
        expect(Date.now() - stopping).toBeLessThan(6_000);
        const log = agent.log();
        expect(log).toContain("stopping node agent; pods keep running");
        expect(log).toContain("stopping with pod steps in flight; the next start takes them up");
        expect(log).toMatch(/"stopped" component=stop part="kubelet API server" ms=\d+/);
        expect(log).toContain('"node agent stopped"');
        expect(log).not.toContain("stopping with pod statuses the API server has not accepted");
        expect(await runtimeView(uids)).toEqual(before);
        // The streams ended with the agent.
        expect(await Promise.race([Promise.all([follow.exited, exec.exited]).then(() => "ended"), Bun.sleep(10_000).then(() => "still open")])).toBe("ended");

        agent.start();
        await eventually("node Ready after the restart", nodeReady, 45_000);
        await eventually("the agent adopted the pods", async () => (await agent.pods()).items.filter((p) => p.metadata.uid !== stubborn).length === uids.length);
        expect(await runtimeView(uids)).toEqual(before);
        // The restarted agent finishes the stop it was given 2 s for: the pod's grace period (20 s) again, as upstream's,
        // then the API pod's final DELETE (grace 0, UID precondition). Before that DELETE carried its body over HTTP/2
        // the pod, not terminal in the API, stayed there with its deletionTimestamp.
        await eventually("the stubborn pod gone from the API", async () => (await tryJson("pod", "stubborn")) === undefined, 45_000);
      } finally {
        follow.kill();
        exec.kill();
      }
    }),
    150_000,
  );
});
