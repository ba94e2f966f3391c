// Cluster mode against a real control plane (etcd, kube-apiserver,
// controller-manager, scheduler built from Go modules) and a real
// containerd: the agent joins as system:node:<name> with a client
// certificate, held to what NodeRestriction allows a node.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCriClient } from "../../src/cri/client.ts";
import { ContainerFilter, ContainerState, type CriService } from "../../src/cri/index.ts";
import { createLogger } from "../../src/util/log.ts";
import { eventually, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { issueCertificate } from "../harness/pki.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { adminKubectl, startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "it-node";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
let cri: CriService;
let kubeletPort: number;

const { kubectl, getJson, tryJson, apply: applyObjects } = adminKubectl(() => cp);
const readyOf = (node: any) => node.status.conditions.find((c: any) => c.type === "Ready");
const apply = (_name: string, obj: unknown) => applyObjects(obj);
const podSpec = (name: string, command: string[], extra: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: { containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command }], ...extra },
});
const containerIds = async () =>
  (await cri.listContainers(ContainerFilter.create({})))
    .filter((c) => c.state === ContainerState.CONTAINER_RUNNING)
    .map((c) => c.id)
    .sort();

beforeAll(async () => {
  requireRoot();
  [ctd, cp] = await startTogether([startContainerd({ name: "cluster" }), startControlPlane({ name: "cluster", nodeMonitorGracePeriod: "20s" })]);
  cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
  const kubeconfig = await cp.nodeKubeconfig(NODE);
  // A serving certificate for 10250 signed by the cluster CA; the API server reaches the node at 127.0.0.1.
  const pki = join(cp.dir, "pki");
  issueCertificate({ caDir: pki, outDir: pki, name: "node-serving", subject: `/CN=${NODE}`, usage: "serverAuth", altNames: `IP:127.0.0.1,DNS:${NODE}` });
  kubeletPort = await freePort();
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${kubeconfig}`, "--node-ip=127.0.0.1"],
    extraConfig: {
      port: kubeletPort,
      tlsCertFile: join(pki, "node-serving.crt"),
      tlsPrivateKeyFile: join(pki, "node-serving.key"),
      authentication: { x509: { clientCAFile: join(pki, "ca.crt") }, webhook: { enabled: true }, anonymous: { enabled: false } },
      authorization: { mode: "Webhook" },
      // Small and often, so that `kubectl logs -f` is seen following across a rotation.
      containerLogMaxSize: "20Ki",
      containerLogMonitorInterval: "3s",
    },
  });
}, 180_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  cri?.close();
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

describe("cluster mode on a real control plane", () => {
  test("the node registers Ready with its labels and info, and renews its Lease", async () => {
    const node = await eventually("node Ready", async () => {
      const n = await tryJson("node", NODE);
      return n && readyOf(n)?.status === "True" ? n : undefined;
    });
    expect(readyOf(node)).toMatchObject({ reason: "KubeletReady", message: "kubelet is posting ready status" });
    expect(node.metadata.labels).toMatchObject({ "kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64" });
    expect(node.status.nodeInfo.kubeletVersion).toStartWith("v1.34.0-bunlet");
    expect(node.status.nodeInfo.containerRuntimeVersion).toStartWith("containerd://");
    expect(Number(node.status.capacity.pods)).toBe(110);
    const renew = async () => (await getJson("lease", "-n", "kube-node-lease", NODE)).spec.renewTime as string;
    const first = await eventually("lease", renew);
    await eventually("lease renewed", async () => (await renew()) !== first, 20_000);
    // One multiplexed HTTP/2 connection, as upstream's client (no fallback to HTTP/1.1 logged).
    expect(agent.log()).toContain("speaking HTTP/2 to the API server");
    expect(agent.log()).not.toContain("does not offer HTTP/2");
  }, 60_000);

  test("a pod created through the API runs; its status has the IP, conditions and the kubelet's events", async () => {
    await apply("web", podSpec("web", ["sh", "-c", "echo hi > /tmp/index.html; exec httpd -f -p 8080 -h /tmp"]));
    const pod = await eventually("web Running", async () => {
      const p = await tryJson("pod", "web");
      return p?.status?.phase === "Running" && p.status.podIP ? p : undefined;
    });
    expect(Object.fromEntries(pod.status.conditions.map((c: any) => [c.type, c.status]))).toEqual({
      PodReadyToStartContainers: "True",
      Initialized: "True",
      Ready: "True",
      ContainersReady: "True",
      PodScheduled: "True",
    });
    expect(pod.status).toMatchObject({ qosClass: "BestEffort", containerStatuses: [{ name: "main", ready: true, restartCount: 0, started: true }] });
    const body = await eventually("httpd answers", async () => {
      const res = await fetch(`http://${pod.status.podIP}:8080/index.html`);
      return res.ok ? res.text() : undefined;
    });
    expect(body.trim()).toBe("hi");
    const events = await eventually("kubelet events", async () => {
      const list = await getJson("events", "--field-selector", "involvedObject.name=web");
      const reasons = list.items.filter((e: any) => e.source?.component === "kubelet").map((e: any) => e.reason);
      return reasons.includes("Started") ? reasons : undefined;
    });
    expect(events).toEqual(expect.arrayContaining(["Pulled", "Created", "Started"]));
  }, 60_000);

  test("a Ready condition another writer set to False (the node lifecycle controller after an outage) is set True again", async () => {
    const readyStatus = async () => (await tryJson("pod", "web"))?.status?.conditions?.find((c: any) => c.type === "Ready")?.status;
    expect(await readyStatus()).toBe("True");
    const patch = JSON.stringify({ status: { conditions: [{ type: "Ready", status: "False", reason: "NodeNotReady" }] } });
    const r = await kubectl("patch", "pod", "web", "--subresource=status", "--type=strategic", "-p", patch);
    expect(r).toContain("patched");
    await eventually("web Ready again", async () => (await readyStatus()) === "True", 15_000);
    expect(agent.log()).toContain("pod status changed by another writer");
  }, 30_000);

  test("kubectl logs reaches the agent's authenticated API through the API server; anonymous requests get 401", async () => {
    await apply("talker", podSpec("talker", ["sh", "-c", "for i in 1 2 3; do echo line $i; done; sleep 3600"]));
    await eventually("talker Running", async () => (await tryJson("pod", "talker"))?.status?.phase === "Running");
    const logs = await eventually("kubectl logs", async () => {
      const out = await kubectl("logs", "talker");
      return out.includes("line 3") ? out : undefined;
    });
    expect(logs).toBe("line 1\nline 2\nline 3\n");
    expect(await kubectl("logs", "talker", "--tail=1")).toBe("line 3\n");
    const anonymous = await fetch(`https://127.0.0.1:${kubeletPort}/pods`, { tls: { ca: readFileSync(cp.caFile, "utf8") } } as RequestInit);
    expect(anonymous.status).toBe(401);
  }, 60_000);

  test("Prometheus metrics on 10250 for a client the API server authorizes: kubelet, resource and probe metrics under upstream names", async () => {
    await apply("probed", {
      ...podSpec("probed", ["sleep", "3600"]),
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [
          { name: "c", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"], readinessProbe: { exec: { command: ["true"] }, periodSeconds: 1 } },
        ],
      },
    });
    await eventually("probed ready", async () => (await tryJson("pod", "probed"))?.status?.containerStatuses?.[0]?.ready === true);
    // As Prometheus scrapes: straight to the node, here with the admin's certificate (authorized by SubjectAccessReview).
    const pki = join(cp.dir, "pki");
    const tls = { ca: readFileSync(cp.caFile, "utf8"), cert: readFileSync(join(pki, "admin.crt"), "utf8"), key: readFileSync(join(pki, "admin.key"), "utf8") };
    const raw = async (path: string) => {
      const res = await fetch(`https://127.0.0.1:${kubeletPort}${path}`, { tls } as RequestInit);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toStartWith("text/plain; version=0.0.4");
      return await res.text();
    };
    const value = (text: string, series: string) =>
      text
        .split("\n")
        .find((l) => l.startsWith(`${series} `))
        ?.split(" ")[1];
    const kubelet = await raw("/metrics");
    expect(Number(value(kubelet, "kubelet_running_pods"))).toBeGreaterThanOrEqual(1);
    expect(Number(value(kubelet, 'kubelet_runtime_operations_total{operation_type="run_podsandbox"}'))).toBeGreaterThanOrEqual(1);
    expect(Number(value(kubelet, "kubelet_pod_start_duration_seconds_count"))).toBeGreaterThanOrEqual(1);
    expect(Number(value(kubelet, "kubelet_pleg_relist_duration_seconds_count"))).toBeGreaterThan(0);
    expect(Number(value(kubelet, "process_resident_memory_bytes"))).toBeGreaterThan(10 * 1024 * 1024);
    const resource = await eventually("the probed pod in /metrics/resource", async () => {
      const text = await raw("/metrics/resource");
      return text.includes('container_memory_working_set_bytes{container="c",namespace="default",pod="probed"}') ? text : undefined;
    });
    expect(Number(value(resource, "resource_scrape_error"))).toBe(0);
    expect(resource).toMatch(/^node_cpu_usage_seconds_total \d+(\.\d+)? \d+$/m);
    const probes = await raw("/metrics/probes");
    const uid = (await tryJson("pod", "probed")).metadata.uid;
    expect(
      Number(value(probes, `prober_probe_total{probe_type="Readiness",result="successful",container="c",pod="probed",namespace="default",pod_uid="${uid}"}`)),
    ).toBeGreaterThanOrEqual(1);
  }, 60_000);

  test("env from a configMap and a secret (keyRef and envFrom) through the watched cache; a missing one is CreateContainerConfigError", async () => {
    await apply("settings", { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "settings", namespace: "default" }, data: { color: "blue", size: "xl" } });
    await apply("creds", { apiVersion: "v1", kind: "Secret", metadata: { name: "creds", namespace: "default" }, stringData: { password: "s3cret" } });
    await apply("envy", {
      ...podSpec("envy", ["sh", "-c", 'echo "color=$COLOR password=$PASSWORD cfg_size=$CFG_size"; sleep 3600']),
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: "main",
            image: ctd.busyboxImage,
            imagePullPolicy: "IfNotPresent",
            command: ["sh", "-c", 'echo "color=$COLOR password=$PASSWORD cfg_size=$CFG_size"; sleep 3600'],
            env: [
              { name: "COLOR", valueFrom: { configMapKeyRef: { name: "settings", key: "color" } } },
              { name: "PASSWORD", valueFrom: { secretKeyRef: { name: "creds", key: "password" } } },
            ],
            envFrom: [{ prefix: "CFG_", configMapRef: { name: "settings" } }],
          },
        ],
      },
    });
    await eventually("envy Running", async () => (await tryJson("pod", "envy"))?.status?.phase === "Running");
    const out = await eventually("envy's output", async () => {
      const o = await kubectl("logs", "envy");
      return o.includes("color=") ? o : undefined;
    });
    expect(out).toBe("color=blue password=s3cret cfg_size=xl\n");
    await apply("lost", {
      ...podSpec("lost", ["sleep", "3600"]),
      spec: {
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: "main",
            image: ctd.busyboxImage,
            imagePullPolicy: "IfNotPresent",
            command: ["sleep", "3600"],
            env: [{ name: "X", valueFrom: { configMapKeyRef: { name: "missing", key: "k" } } }],
          },
        ],
      },
    });
    // ContainerCreating first (the status before the first step, as upstream's), then the step's reason.
    const waiting = await eventually("lost waiting", async () => {
      const w = (await tryJson("pod", "lost"))?.status?.containerStatuses?.[0]?.state?.waiting;
      return w?.reason === "ContainerCreating" ? undefined : w;
    });
    expect(waiting).toEqual({ reason: "CreateContainerConfigError", message: 'configmap "missing" not found' });
  }, 60_000);

  test("kubectl logs -f follows a container's log across rotations: every line once, in order", async () => {
    // About 7 KiB/s of log: with containerLogMaxSize 20Ki the file rotates every few seconds.
    await apply(
      "counter",
      podSpec("counter", ["sh", "-c", 'i=0; pad=$(head -c 100 /dev/zero | tr "\\0" x); while true; do i=$((i+1)); echo "n=$i $pad"; sleep 0.02; done'], {
        terminationGracePeriodSeconds: 1,
      }),
    );
    const pod = await eventually("counter Running", async () => {
      const p = await tryJson("pod", "counter");
      return p?.status?.phase === "Running" ? p : undefined;
    });
    const follow = Bun.spawn([join(cp.binDir, "kubectl"), "--kubeconfig", cp.adminKubeconfig, "logs", "-f", "counter"], { stdout: "pipe", stderr: "pipe" });
    const logDir = join(agent.podLogsDir, `default_counter_${pod.metadata.uid}`, "main");
    const rotatedFiles = () => readdirSync(logDir).filter((f) => f !== "0.log");
    let text = "";
    const reader = (async () => {
      for await (const chunk of follow.stdout as ReadableStream<Uint8Array>) text += new TextDecoder().decode(chunk);
    })();
    await eventually("two rotations while following", () => rotatedFiles().length >= 2 && text.length > 0, 45_000, 250);
    await Bun.sleep(1500);
    follow.kill();
    await reader.catch(() => {});
    const numbers = text
      .split("\n")
      .filter((l) => l.startsWith("n="))
      .map((l) => Number(l.slice(2, l.indexOf(" "))));
    expect(numbers.length).toBeGreaterThan(300);
    // Consecutive from the first line seen to the last: nothing lost or repeated at the rotations.
    expect(numbers).toEqual(numbers.map((_, i) => numbers[0]! + i));
  }, 90_000);

  test("a Deployment of 3 replicas gets 3 running pods through the scheduler", async () => {
    await apply("d3", {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "d3", namespace: "default" },
      spec: {
        replicas: 3,
        selector: { matchLabels: { app: "d3" } },
        template: {
          metadata: { labels: { app: "d3" } },
          spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "c", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"] }] },
        },
      },
    });
    await eventually(
      "3 running replicas",
      async () => (await getJson("pods", "-l", "app=d3")).items.filter((p: any) => p.status.phase === "Running" && p.spec.nodeName === NODE).length === 3,
      60_000,
    );
  }, 90_000);

  test("delete is graceful: the container gets SIGTERM, exits, and the object disappears", async () => {
    await apply("graceful", podSpec("graceful", ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"], { terminationGracePeriodSeconds: 30 }));
    const pod = await eventually("graceful Running", async () => {
      const p = await tryJson("pod", "graceful");
      return p?.status?.phase === "Running" ? p : undefined;
    });
    const id = pod.status.containerStatuses[0].containerID.replace("containerd://", "");
    let last: { state: ContainerState; exitCode: number } | undefined;
    const poll = setInterval(async () => {
      const s = (await cri.containerStatus(id).catch(() => undefined))?.status;
      if (s) last = { state: s.state, exitCode: s.exitCode };
    }, 100);
    const started = Date.now();
    await kubectl("delete", "pod", "graceful", "--wait=false");
    await eventually("object gone", async () => (await cp.kubectl(["get", "pod", "graceful"])).code !== 0, 30_000);
    clearInterval(poll);
    expect(Date.now() - started).toBeLessThan(15_000); // it exited on SIGTERM, well within the 30s grace
    expect(last).toEqual({ state: ContainerState.CONTAINER_EXITED, exitCode: 0 });
  }, 60_000);

  test("a pod asking for more CPU than the node has is Failed with OutOfcpu", async () => {
    const big = podSpec("big", ["sleep", "3600"], { nodeName: NODE });
    (big.spec.containers[0] as Record<string, unknown>).resources = { requests: { cpu: "64" } };
    await apply("big", big);
    const pod = await eventually("big Failed", async () => {
      const p = await tryJson("pod", "big");
      return p?.status?.phase === "Failed" ? p : undefined;
    });
    expect(pod.status.reason).toBe("OutOfcpu");
    expect(pod.status.message).toMatch(/^Node didn't have enough resource: cpu, requested: 64000, used: \d+, capacity: \d+$/);
  }, 30_000);

  test("kubectl shows init progress: Init:0/1 while it runs, Init:Error when it fails for good", async () => {
    const withInit = (name: string, command: string[]) => ({
      ...podSpec(name, ["sleep", "3600"], { restartPolicy: "Never" }),
      spec: {
        restartPolicy: "Never",
        initContainers: [{ name: "init", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command }],
        containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"] }],
      },
    });
    await apply("init-slow", withInit("init-slow", ["sleep", "60"]));
    await apply("init-fail", withInit("init-fail", ["sh", "-c", "exit 3"]));
    const column = async (name: string) => (await kubectl("get", "pod", name, "--no-headers")).trim().split(/\s+/)[2];
    await eventually("Init:0/1", async () => (await column("init-slow")) === "Init:0/1");
    await eventually("Init:Error", async () => (await column("init-fail")) === "Init:Error");
    const failed = await getJson("pod", "init-fail");
    expect(failed.status.phase).toBe("Failed");
    expect(failed.status.conditions.find((c: any) => c.type === "Initialized")).toMatchObject({ status: "False", reason: "ContainersNotInitialized" });
  }, 60_000);

  test("a static pod gets a mirror pod owned by the node", async () => {
    writeFileSync(join(agent.manifests, "static.json"), JSON.stringify(podSpec("static", ["sleep", "3600"])));
    const mirror = await eventually("mirror Running", async () => {
      const p = await tryJson("pod", `static-${NODE}`);
      return p?.status?.phase === "Running" ? p : undefined;
    });
    expect(mirror.metadata.annotations["kubernetes.io/config.mirror"]).toBeTruthy();
    expect(mirror.metadata.ownerReferences).toMatchObject([{ kind: "Node", name: NODE }]);
  }, 30_000);

  test("a watch broken by restarting kube-apiserver resumes without recreating pods", async () => {
    const before = await containerIds();
    await cp.restartApiServer();
    await apply("after-restart", podSpec("after-restart", ["sleep", "3600"]));
    await eventually("new pod Running after the restart", async () => (await tryJson("pod", "after-restart"))?.status?.phase === "Running", 60_000);
    const after = await containerIds();
    expect(after.filter((id) => before.includes(id))).toEqual(before);
    expect(after.length).toBe(before.length + 1);
  }, 120_000);

  test("the node goes NotReady when the agent stops past its lease, and Ready again on restart without restarting containers", async () => {
    const before = await containerIds();
    await agent.kill("SIGTERM");
    await eventually("node NotReady", async () => readyOf(await getJson("node", NODE))?.status === "Unknown" || undefined, 60_000, 1000);
    agent.start();
    await eventually("node Ready again", async () => readyOf(await getJson("node", NODE))?.status === "True" || undefined, 30_000, 500);
    await Bun.sleep(3000);
    expect(await containerIds()).toEqual(before);
  }, 120_000);
});
