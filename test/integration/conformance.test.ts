// Behaviours the upstream node conformance suite (`[NodeConformance]`,
// issue #17) found different from the upstream kubelet, each checked here
// on a real control plane and a real containerd the way the suite checks
// it: what `kubectl` and the API object show.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { createCriClient } from "../../src/cri/client.ts";
import type { CriService } from "../../src/cri/index.ts";
import { createLogger } from "../../src/util/log.ts";
import { eventually, explainFailure, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { issueCertificate } from "../harness/pki.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { adminKubectl, startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "conformance-node";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
let cri: CriService;

const { tryJson, apply } = adminKubectl(() => cp);
/** A pod bound to the node (no scheduler round trip) with one busybox container. */
const podOf = (name: string, container: Record<string, unknown>, spec: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: { nodeName: NODE, terminationGracePeriodSeconds: 1, ...spec, containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", ...container }] },
});
const statusOf = async (name: string) => (await tryJson("pod", name))?.status;
const mainState = async (name: string) => (await statusOf(name))?.containerStatuses?.[0];
const explained = <T>(body: () => Promise<T>) => explainFailure(body, () => agent);

beforeAll(async () => {
  requireRoot();
  [ctd, cp] = await startTogether([startContainerd({ name: "conformance" }), startControlPlane({ name: "conformance" })]);
  cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
  const kubeconfig = await cp.nodeKubeconfig(NODE);
  // A serving certificate the API server trusts: `kubectl logs` goes through it to 10250.
  const pki = join(cp.dir, "pki");
  issueCertificate({ caDir: pki, outDir: pki, name: "node-serving", subject: `/CN=${NODE}`, usage: "serverAuth", altNames: `IP:127.0.0.1,DNS:${NODE}` });
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${kubeconfig}`, "--node-ip=127.0.0.1"],
    extraConfig: {
      port: await freePort(),
      tlsCertFile: join(pki, "node-serving.crt"),
      tlsPrivateKeyFile: join(pki, "node-serving.key"),
      authentication: { x509: { clientCAFile: join(pki, "ca.crt") }, webhook: { enabled: true }, anonymous: { enabled: false } },
      authorization: { mode: "Webhook" },
    },
  });
  await eventually("node registered", async () => (await tryJson("node", NODE)) !== undefined, 60_000);
}, 180_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  cri?.close();
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

describe("node conformance behaviours", () => {
  test(
    "output whose last line has no newline: kubectl logs shows it, and it is the FallbackToLogsOnError message",
    explained(async () => {
      // The suite's "should report termination message from log output if TerminationMessagePolicy FallbackToLogsOnError is set".
      await apply(
        podOf("no-newline-failed", { command: ["sh", "-c", "echo -n DONE; false"], terminationMessagePolicy: "FallbackToLogsOnError" }, { restartPolicy: "Never" }),
        podOf("no-newline-ok", { command: ["sh", "-c", "echo first; echo -n DONE"] }, { restartPolicy: "Never" }),
      );
      const terminated = (name: string) => eventually(`${name} terminated`, async () => (await mainState(name))?.state?.terminated, 60_000);
      expect(await terminated("no-newline-failed")).toMatchObject({ exitCode: 1, reason: "Error", message: "DONE" });
      await terminated("no-newline-ok");
      const logs = await cp.kubectl(["logs", "no-newline-ok"]);
      expect(logs.stderr).toBe("");
      expect(logs.stdout).toBe("first\nDONE");
      expect((await cp.kubectl(["logs", "no-newline-ok", "--tail=1"])).stdout).toBe("DONE");
      expect((await cp.kubectl(["logs", "no-newline-failed"])).stdout).toBe("DONE");
    }),
    120_000,
  );

  test(
    "init containers: completed ones are ready; after a failed one the rest wait PodInitializing, the app never starts, a RestartNever pod fails",
    explained(async () => {
      const init = (name: string, command: string[]) => ({ name, image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command });
      await apply(
        {
          ...podOf("init-ok", { command: ["sleep", "3600"] }),
          spec: { ...podOf("init-ok", { command: ["sleep", "3600"] }).spec, initContainers: [init("init1", ["true"]), init("init2", ["true"])] },
        },
        {
          ...podOf("init-fails", { command: ["true"] }, { restartPolicy: "Never" }),
          spec: { ...podOf("init-fails", { command: ["true"] }, { restartPolicy: "Never" }).spec, initContainers: [init("init1", ["false"]), init("init2", ["true"])] },
        },
      );
      const ok = await eventually(
        "init-ok running",
        async () => {
          const s = await statusOf("init-ok");
          return s?.containerStatuses?.[0]?.state?.running ? s : undefined;
        },
        60_000,
      );
      expect(ok.initContainerStatuses.map((c: any) => [c.name, c.ready, c.state.terminated?.reason])).toEqual([
        ["init1", true, "Completed"],
        ["init2", true, "Completed"],
      ]);
      expect(ok.conditions.find((c: any) => c.type === "Initialized").status).toBe("True");

      const failed = await eventually(
        "init-fails Failed",
        async () => {
          const s = await statusOf("init-fails");
          return s?.phase === "Failed" ? s : undefined;
        },
        60_000,
      );
      expect(failed.initContainerStatuses[0]).toMatchObject({ name: "init1", ready: false, state: { terminated: { exitCode: 1, reason: "Error" } } });
      expect(failed.initContainerStatuses[1]).toMatchObject({ name: "init2", ready: false, state: { waiting: { reason: "PodInitializing" } } });
      expect(failed.containerStatuses[0]).toMatchObject({ name: "main", ready: false, state: { waiting: { reason: "PodInitializing" } } });
      const condition = (type: string) => failed.conditions.find((c: any) => c.type === type);
      expect(condition("Initialized")).toMatchObject({ status: "False", reason: "ContainersNotInitialized", message: "containers with incomplete status: [init1 init2]" });
      expect(condition("Ready")).toMatchObject({ status: "False", reason: "PodFailed" });
      expect(condition("ContainersReady")).toMatchObject({ status: "False", reason: "PodFailed" });
      // The app container was never created.
      const created = (await cri.listContainers()).filter((c) => c.labels["io.kubernetes.pod.name"] === "init-fails");
      expect(created.map((c) => c.metadata?.name)).toEqual(["init1"]);
    }),
    120_000,
  );

  test(
    "a liveness probe's terminationGracePeriodSeconds overrides the pod's when the probe kills the container",
    explained(async () => {
      // The suite's "should override timeoutGracePeriodSeconds when LivenessProbe field is set": `sh` as PID 1
      // ignores SIGTERM, so the kill takes the whole grace period: the probe's 5 s, not the pod's 500.
      const probe = { exec: { command: ["false"] }, initialDelaySeconds: 1, periodSeconds: 1, failureThreshold: 1, terminationGracePeriodSeconds: 5 };
      await apply(podOf("probe-grace", { command: ["sh", "-c", "sleep 1000"], livenessProbe: probe }, { terminationGracePeriodSeconds: 500 }));
      const startedAt = await eventually("probe-grace running", async () => (await mainState("probe-grace"))?.state?.running?.startedAt, 60_000);
      const restarted = await eventually(
        "probe-grace restarted",
        async () => {
          const s = await mainState("probe-grace");
          return s?.restartCount >= 1 ? s : undefined;
        },
        40_000,
      );
      const killed = restarted.lastState.terminated;
      expect(killed.exitCode).toBe(137);
      const tookMs = Date.parse(killed.finishedAt) - Date.parse(startedAt);
      expect(tookMs).toBeLessThan(15_000);
      expect(tookMs).toBeGreaterThanOrEqual(5_000);
      await cp.kubectl(["delete", "pod", "probe-grace", "--grace-period=1", "--wait=false"]);
    }),
    120_000,
  );

  test(
    "a pod deleted while a liveness kill waits out its grace period never gets its container started again",
    explained(async () => {
      const probe = { exec: { command: ["false"] }, initialDelaySeconds: 1, periodSeconds: 1, failureThreshold: 1 };
      await apply(podOf("kill-then-delete", { command: ["sh", "-c", "sleep 1000"], livenessProbe: probe }, { terminationGracePeriodSeconds: 12 }));
      await eventually("kill-then-delete running", async () => (await mainState("kill-then-delete"))?.state?.running, 60_000);
      const ofPod = async () => (await cri.listContainers()).filter((c) => c.labels["io.kubernetes.pod.name"] === "kill-then-delete");
      // The probe fails at once; the kill waits the pod's 12 s (sh ignores SIGTERM). Delete the pod meanwhile.
      await Bun.sleep(4000);
      expect((await cp.kubectl(["delete", "pod", "kill-then-delete", "--grace-period=1", "--wait=false"])).code).toBe(0);
      const seen = new Set<string>();
      await eventually(
        "kill-then-delete gone from the API",
        async () => {
          for (const c of await ofPod()) seen.add(c.id);
          return (await cp.kubectl(["get", "pod", "kill-then-delete"])).code !== 0;
        },
        60_000,
        100,
      );
      for (const c of await ofPod()) seen.add(c.id);
      expect(seen.size).toBe(1);
    }),
    120_000,
  );

  test(
    "a pod whose spec.os.name is not the node's OS is rejected at admission: Failed, reason PodOSNotSupported, an event",
    explained(async () => {
      await apply(podOf("windows-pod", { command: ["sleep", "3600"] }, { os: { name: "windows" } }));
      const status = await eventually(
        "windows-pod Failed",
        async () => {
          const s = await statusOf("windows-pod");
          return s?.phase === "Failed" ? s : undefined;
        },
        60_000,
      );
      expect(status).toMatchObject({ reason: "PodOSNotSupported", message: "Failed to admit pod as the OS field doesn't match node OS" });
      const events = await eventually(
        "PodOSNotSupported event",
        async () => {
          const r = await cp.kubectl(["get", "events", "--field-selector", "involvedObject.name=windows-pod,reason=PodOSNotSupported", "-o", "json"]);
          const items = r.code === 0 ? JSON.parse(r.stdout).items : [];
          return items.length ? items : undefined;
        },
        30_000,
      );
      expect(events[0].type).toBe("Warning");
      expect((await cri.listPodSandbox()).filter((s) => s.metadata?.name === "windows-pod")).toEqual([]);
    }),
    120_000,
  );

  test(
    "pull policy Always with a registry that cannot be reached: ErrImagePull, not the local copy",
    explained(async () => {
      // The busybox image is present (imported); its registry (localhost) answers nothing.
      await apply(podOf("pull-always", { command: ["sleep", "3600"], imagePullPolicy: "Always" }));
      const reasons = new Set<string>();
      await eventually(
        "ImagePullBackOff",
        async () => {
          const s = await mainState("pull-always");
          expect(s?.state?.running).toBeUndefined();
          if (s?.state?.waiting?.reason) reasons.add(s.state.waiting.reason);
          return reasons.has("ImagePullBackOff");
        },
        60_000,
        100,
      );
      // ErrImagePull comes first and is soon ImagePullBackOff: the event is what stays. Reason Failed also
      // carries "Error: ErrImagePull" and "Error: ImagePullBackOff" (as upstream), in no fixed order.
      const failed = await eventually(
        "Failed pull event",
        async () => {
          const r = await cp.kubectl(["get", "events", "--field-selector", "involvedObject.name=pull-always,reason=Failed", "-o", "json"]);
          if (r.code !== 0) return undefined;
          return (JSON.parse(r.stdout).items as { message: string }[]).find((e) => e.message.startsWith("Failed to pull image"));
        },
        30_000,
      );
      expect(failed.message).toStartWith(`Failed to pull image "${ctd.busyboxImage}"`);
      expect((await mainState("pull-always")).restartCount).toBe(0);
    }),
    120_000,
  );

  test(
    "readiness gates: Ready stays False until every gate's condition is True, and follows the condition when it changes",
    explained(async () => {
      await apply(podOf("gated", { command: ["sleep", "3600"] }, { readinessGates: [{ conditionType: "k8s.io/test-condition1" }, { conditionType: "k8s.io/test-condition2" }] }));
      const condition = async (type: string) => (await statusOf("gated"))?.conditions?.find((c: any) => c.type === type);
      await eventually("containers ready", async () => (await condition("ContainersReady"))?.status === "True", 60_000);
      expect(await condition("Ready")).toMatchObject({ status: "False", reason: "ReadinessGatesNotReady" });
      const setGate = async (type: string, status: string) => {
        const patch = JSON.stringify({ status: { conditions: [{ type, status }] } });
        const r = await cp.kubectl(["patch", "pod", "gated", "--subresource=status", "--type=strategic", "-p", patch]);
        expect(r.stderr).toBe("");
      };
      await setGate("k8s.io/test-condition1", "True");
      await Bun.sleep(3000);
      expect((await condition("Ready"))?.status).toBe("False");
      expect((await condition("k8s.io/test-condition1"))?.status).toBe("True");
      await setGate("k8s.io/test-condition2", "True");
      await eventually("Ready True", async () => (await condition("Ready"))?.status === "True", 30_000);
      await setGate("k8s.io/test-condition1", "False");
      await eventually("Ready False again", async () => (await condition("Ready"))?.status === "False", 30_000);
      expect(await condition("Ready")).toMatchObject({
        reason: "ReadinessGatesNotReady",
        message: 'the status of pod readiness gate "k8s.io/test-condition1" is not "True", but False',
      });
      // The agent's patches keep the gates' conditions.
      expect((await condition("k8s.io/test-condition2"))?.status).toBe("True");
    }),
    120_000,
  );

  test(
    "a sidecar's readiness probe: the sidecar and the pod are not Ready until it passes",
    explained(async () => {
      // The suite's restartable-init-container readiness checks: the prober probed app containers only,
      // so a running sidecar was ready at once, whatever its probe said.
      const sidecar = {
        name: "proxy",
        image: ctd.busyboxImage,
        imagePullPolicy: "IfNotPresent",
        restartPolicy: "Always",
        command: ["sleep", "3600"],
        readinessProbe: { exec: { command: ["cat", "/tmp/ready"] }, periodSeconds: 1 },
      };
      const base = podOf("sidecar-ready", { command: ["sleep", "3600"] });
      await apply({ ...base, spec: { ...base.spec, initContainers: [sidecar] } });
      const running = await eventually(
        "app running",
        async () => {
          const s = await statusOf("sidecar-ready");
          return s?.containerStatuses?.[0]?.state?.running ? s : undefined;
        },
        60_000,
      );
      await Bun.sleep(3000);
      const now = (await statusOf("sidecar-ready")) ?? running;
      expect(now.initContainerStatuses[0]).toMatchObject({ name: "proxy", ready: false, started: true });
      expect(now.conditions.find((c: any) => c.type === "ContainersReady")).toMatchObject({ status: "False", message: "containers with unready status: [proxy]" });
      const r = await cp.kubectl(["exec", "sidecar-ready", "-c", "proxy", "--", "touch", "/tmp/ready"]);
      expect(r.code).toBe(0);
      await eventually("pod Ready", async () => (await statusOf("sidecar-ready"))?.conditions?.find((c: any) => c.type === "Ready")?.status === "True", 30_000);
      expect((await statusOf("sidecar-ready")).initContainerStatuses[0].ready).toBe(true);
    }),
    120_000,
  );
});
