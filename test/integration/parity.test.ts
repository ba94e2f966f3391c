// Parity with the rest of the upstream kubelet (issue #10) against a real
// control plane and a real containerd: service environment variables,
// RuntimeClass, /spec, OOM kills, the debugging handlers.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCriClient } from "../../src/cri/client.ts";
import { PodSandboxFilter, type CriService } from "../../src/cri/index.ts";
import { createLogger } from "../../src/util/log.ts";
import { eventually, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { issueCertificate } from "../harness/pki.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { adminKubectl, startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "parity-node";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
let cri: CriService;
let kubeletPort: number;
let inspectorPort: number;

const { kubectl, getJson, tryJson } = adminKubectl(() => cp);
/** Not the harness's apply: some tests expect kubectl to refuse, and read its result. */
const apply = async (name: string, obj: unknown) => {
  const file = join(cp.dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(obj));
  return cp.kubectl(["apply", "-f", file]);
};
const podSpec = (name: string, command: string[], extra: Record<string, unknown> = {}, container: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command, ...container }], ...extra },
});
const envOfLogs = (text: string) =>
  new Map(
    text
      .split("\n")
      .filter((l) => l.includes("="))
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
/** A client the API server authorizes (the admin's certificate), straight to the node's 10250. */
const adminTls = () => {
  const pki = join(cp.dir, "pki");
  return { ca: readFileSync(cp.caFile, "utf8"), cert: readFileSync(join(pki, "admin.crt"), "utf8"), key: readFileSync(join(pki, "admin.key"), "utf8") };
};

beforeAll(async () => {
  requireRoot();
  [ctd, cp] = await startTogether([startContainerd({ name: "parity" }), startControlPlane({ name: "parity" })]);
  cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
  const kubeconfig = await cp.nodeKubeconfig(NODE);
  const pki = join(cp.dir, "pki");
  issueCertificate({ caDir: pki, outDir: pki, name: "node-serving", subject: `/CN=${NODE}`, usage: "serverAuth", altNames: `IP:127.0.0.1,DNS:${NODE}` });
  kubeletPort = await freePort();
  inspectorPort = await freePort();
  agent = await startAgent(ctd, {
    nodeName: NODE,
    env: { BUN_INSPECT: `ws://127.0.0.1:${inspectorPort}/bunlet` },
    extraArgs: [`--kubeconfig=${kubeconfig}`, "--node-ip=127.0.0.1"],
    extraConfig: {
      port: kubeletPort,
      tlsCertFile: join(pki, "node-serving.crt"),
      tlsPrivateKeyFile: join(pki, "node-serving.key"),
      authentication: { x509: { clientCAFile: join(pki, "ca.crt") }, webhook: { enabled: true }, anonymous: { enabled: false } },
      authorization: { mode: "Webhook" },
      enableProfilingHandler: true, // off by default in bunlet
      shutdownGracePeriod: "6s",
      shutdownGracePeriodCriticalPods: "2s",
    },
  });
  await eventually("node registered", async () => (await tryJson("node", NODE)) !== undefined, 60_000);
}, 180_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  cri?.close();
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

describe("parity with the upstream kubelet", () => {
  test("service environment: KUBERNETES_SERVICE_HOST always, a Service's variables with service links, none of them with enableServiceLinks false", async () => {
    const kubernetes = await getJson("service", "kubernetes", "-n", "default");
    expect(kubernetes.spec.clusterIP).toBeTruthy();
    const created = await apply("redis-svc", {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "redis-primary", namespace: "default" },
      spec: {
        ports: [
          { name: "redis", port: 6379, protocol: "TCP" },
          { name: "metrics", port: 9121, protocol: "UDP" },
        ],
      },
    });
    expect(created.code).toBe(0);
    const redis = await getJson("service", "redis-primary");
    const ip = redis.spec.clusterIP as string;
    const command = ["sh", "-c", "env; sleep 3600"];
    await apply("linked", podSpec("linked", command, {}, { env: [{ name: "REDIS_URL", value: "redis://$(REDIS_PRIMARY_SERVICE_HOST):$(REDIS_PRIMARY_SERVICE_PORT)" }] }));
    await apply("unlinked", podSpec("unlinked", command, { enableServiceLinks: false }));
    const envOf = async (pod: string) =>
      eventually(
        `${pod} env`,
        async () => {
          const r = await cp.kubectl(["logs", pod]);
          return r.code === 0 && r.stdout.includes("KUBERNETES_SERVICE_HOST") ? envOfLogs(r.stdout) : undefined;
        },
        60_000,
      );
    const linked = await envOf("linked");
    expect(linked.get("KUBERNETES_SERVICE_HOST")).toBe(kubernetes.spec.clusterIP);
    expect(linked.get("KUBERNETES_SERVICE_PORT")).toBe(String(kubernetes.spec.ports[0].port));
    expect(linked.get("KUBERNETES_SERVICE_PORT_HTTPS")).toBe(String(kubernetes.spec.ports[0].port));
    expect(linked.get("REDIS_PRIMARY_SERVICE_HOST")).toBe(ip);
    expect(linked.get("REDIS_PRIMARY_SERVICE_PORT")).toBe("6379");
    expect(linked.get("REDIS_PRIMARY_SERVICE_PORT_METRICS")).toBe("9121");
    expect(linked.get("REDIS_PRIMARY_PORT")).toBe(`tcp://${ip}:6379`);
    expect(linked.get("REDIS_PRIMARY_PORT_9121_UDP_ADDR")).toBe(ip);
    expect(linked.get("REDIS_PRIMARY_PORT_9121_UDP_PROTO")).toBe("udp");
    expect(linked.get("REDIS_URL")).toBe(`redis://${ip}:6379`);
    const unlinked = await envOf("unlinked");
    expect(unlinked.get("KUBERNETES_SERVICE_HOST")).toBe(kubernetes.spec.clusterIP);
    expect([...unlinked.keys()].filter((k) => k.startsWith("REDIS_"))).toEqual([]);
  }, 120_000);

  test("RuntimeClass: a class naming containerd's runc handler runs the pod with that handler; an unknown class is refused (API server) or fails the sandbox (static pod)", async () => {
    expect((await apply("rc", { apiVersion: "node.k8s.io/v1", kind: "RuntimeClass", metadata: { name: "runc-class" }, handler: "runc" })).code).toBe(0);
    await apply("classy", podSpec("classy", ["sleep", "3600"], { runtimeClassName: "runc-class" }));
    const pod = await eventually(
      "classy Running",
      async () => {
        const p = await tryJson("pod", "classy");
        return p?.status?.phase === "Running" ? p : undefined;
      },
      60_000,
    );
    const [sandbox] = await cri.listPodSandbox(PodSandboxFilter.create({ labelSelector: { "io.kubernetes.pod.uid": pod.metadata.uid } }));
    expect(sandbox?.runtimeHandler).toBe("runc");

    // The API server's RuntimeClass admission refuses unknown classes before the node sees them.
    const refused = await apply("nope", podSpec("nope", ["sleep", "3600"], { runtimeClassName: "no-such-class" }));
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('pod rejected: RuntimeClass "no-such-class" not found');

    // A static pod reaches the node unchecked: no sandbox, upstream's lookup error as a FailedCreatePodSandBox event.
    writeFileSync(join(agent.manifests, "classless.json"), JSON.stringify(podSpec("classless", ["sleep", "3600"], { runtimeClassName: "no-such-class" })));
    const event = await eventually(
      "FailedCreatePodSandBox",
      async () => {
        const list = await getJson("events", "--field-selector", `involvedObject.name=classless-${NODE},reason=FailedCreatePodSandBox`);
        return list.items[0];
      },
      60_000,
    );
    expect(event.type).toBe("Warning");
    expect(event.message).toBe('Failed to create pod sandbox: runtimeclass.node.k8s.io "no-such-class" not found');
    const sandboxes = await cri.listPodSandbox(PodSandboxFilter.create({ labelSelector: { "io.kubernetes.pod.name": `classless-${NODE}` } }));
    expect(sandboxes).toEqual([]);
    const local = (await agent.pods()).items.find((p) => p.metadata.name === `classless-${NODE}`);
    expect(local?.status.phase).toBe("Pending");

    // A class whose handler containerd does not know: containerd's own refusal, as upstream prints the cri-client's
    // error (kuberuntime_manager.go:1358): grpc-go's "rpc error: code = Unknown desc = ...".
    expect((await apply("ghost-rc", { apiVersion: "node.k8s.io/v1", kind: "RuntimeClass", metadata: { name: "ghost-class" }, handler: "ghost" })).code).toBe(0);
    await apply("haunted", podSpec("haunted", ["sleep", "3600"], { runtimeClassName: "ghost-class" }));
    const refusal = await eventually(
      "haunted FailedCreatePodSandBox",
      async () => (await getJson("events", "--field-selector", "involvedObject.name=haunted,reason=FailedCreatePodSandBox")).items[0],
      60_000,
    );
    // containerd's own words differ by version (1.6: 'failed to get sandbox runtime: ...'; 2.x: 'unable to get OCI runtime for sandbox "<id>": ...').
    expect(refusal.message).toMatch(/^Failed to create pod sandbox: rpc error: code = Unknown desc = .*no runtime for "ghost" is configured$/);
    const haunted = await getJson("pod", "haunted");
    expect(haunted.status.phase).toBe("Pending");
    expect(haunted.status.containerStatuses[0].state).toEqual({ waiting: { reason: "ContainerCreating" } });
    await kubectl("delete", "pod", "haunted", "--wait=false");
  }, 120_000);

  test("/spec/ on 10250 for an authorized client and on the read-only port: cAdvisor's MachineInfo for this machine", async () => {
    const res = await fetch(`https://127.0.0.1:${kubeletPort}/spec/`, { tls: adminTls() } as RequestInit);
    expect(res.status).toBe(200);
    const spec = (await res.json()) as Record<string, unknown>;
    expect(spec.num_cores).toBe(navigator.hardwareConcurrency);
    expect(spec.memory_capacity).toBe(Number(/^MemTotal:\s+(\d+)/m.exec(readFileSync("/proc/meminfo", "utf8"))![1]) * 1024);
    expect(spec.boot_id).toBe(readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim());
    expect(Number(spec.num_physical_cores)).toBeGreaterThan(0);
    const node = await getJson("node", NODE);
    expect(spec.machine_id).toBe(node.status.nodeInfo.machineID);
    // (The API server's node proxy refuses loopback node addresses, so kubectl get --raw .../proxy/spec/ cannot be tried here.)
    const readOnly = await fetch(`http://127.0.0.1:${agent.readOnlyPort}/spec/`);
    expect(((await readOnly.json()) as { num_cores: number }).num_cores).toBe(spec.num_cores as number);
  }, 60_000);

  test("the read-only port serves what upstream's does without authentication: stats, every metrics endpoint; exec and logs are 405", async () => {
    const get = (path: string, init?: RequestInit) => fetch(`http://127.0.0.1:${agent.readOnlyPort}${path}`, init);
    const summary = (await (await get("/stats/summary")).json()) as { node: { nodeName: string }; pods: unknown[] };
    expect(summary.node.nodeName).toBe(NODE);
    expect(Array.isArray(summary.pods)).toBe(true);
    for (const [path, series] of [
      ["/metrics", "kubelet_running_pods"],
      ["/metrics/resource", "node_cpu_usage_seconds_total"],
      ["/metrics/probes", "prober_probe_total"],
      ["/metrics/cadvisor", "machine_cpu_cores"],
    ] as const) {
      const res = await get(path);
      expect([path, res.status]).toEqual([path, 200]);
      expect(await res.text()).toContain(series);
    }
    const exec = await get("/exec/default/x/y?command=id", { method: "POST" });
    expect([exec.status, await exec.text()]).toEqual([405, "Debug endpoints are disabled.\n"]);
    expect((await get("/containerLogs/default/x/y")).status).toBe(405);
  }, 60_000);

  test("a memory hog over its limit is OOM-killed: reason OOMKilled in the API status and an OOMKilling event from the kernel log", async () => {
    await apply("hog", podSpec("hog", ["dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1"], { restartPolicy: "Never" }, { resources: { limits: { memory: "16Mi" } } }));
    const pod = await eventually(
      "hog Failed",
      async () => {
        const p = await tryJson("pod", "hog");
        return p?.status?.phase === "Failed" ? p : undefined;
      },
      60_000,
    );
    expect(pod.status.containerStatuses[0].state.terminated).toMatchObject({ reason: "OOMKilled", exitCode: 137 });
    // The kernel's report of the kill, read from /dev/kmsg, as a Warning on the pod.
    const event = await eventually("OOMKilling event", async () => (await getJson("events", "--field-selector", "involvedObject.name=hog,reason=OOMKilling")).items[0], 30_000);
    expect(event.type).toBe("Warning");
    expect(event.message).toMatch(/^Memory cgroup out of memory: Killed process \d+ \(dd\)$/);
  }, 90_000);

  test("a system-wide OOM report in the kernel log is a SystemOOM Warning on the Node (the report is written to /dev/kmsg: a real global OOM would hurt the machine)", async () => {
    const pid = 4_000_000 + Math.floor(Math.random() * 100_000); // no real process has it (pid_max is at most 4194304)
    // One write is one record; as a real global OOM reports it: no oom_memcg (global_oom), then the kill.
    const report = [
      `<4>bunlet-oom-test invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0`,
      `<6>oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=bunlet-oom-test,pid=${pid},uid=0`,
      `<3>Out of memory: Killed process ${pid} (bunlet-oom-test) total-vm:1000kB, anon-rss:900kB`,
    ];
    const systemOom = async () => {
      const list = await getJson("events", "--field-selector", `involvedObject.kind=Node,involvedObject.name=${NODE},reason=SystemOOM`);
      return list.items.find((e: any) => e.message.includes(String(pid)));
    };
    // The kernel rate-limits what user space writes to /dev/kmsg (shared with everything else on the machine): write the report again until it is taken whole.
    const event = await eventually(
      "SystemOOM event",
      async () => {
        for (const line of report) writeFileSync("/dev/kmsg", line);
        return eventually("event", systemOom, 6_000).catch(() => undefined);
      },
      40_000,
      100,
    );
    expect(event.type).toBe("Warning");
    expect(event.message).toBe(`System OOM encountered, victim process: bunlet-oom-test, pid: ${pid}`);
    expect(event.source.component).toBe("kubelet");
  }, 60_000);

  test("debugging: a heap snapshot for an authorized client, refused (401, 403) without one; a short CPU profile; the inspector on a loopback port", async () => {
    const heap = await fetch(`https://127.0.0.1:${kubeletPort}/debug/heap`, { tls: adminTls() } as RequestInit);
    expect(heap.status).toBe(200);
    const snapshot = (await heap.json()) as { snapshot: { meta: { node_fields: string[] }; node_count: number } };
    expect(snapshot.snapshot.meta.node_fields).toContain("self_size");
    expect(snapshot.snapshot.node_count).toBeGreaterThan(1000);

    const ca = readFileSync(cp.caFile, "utf8");
    expect((await fetch(`https://127.0.0.1:${kubeletPort}/debug/heap`, { tls: { ca } } as RequestInit)).status).toBe(401);
    // A service account the API server authenticates but RBAC gives nothing: SubjectAccessReview says no to nodes/proxy.
    await kubectl("create", "serviceaccount", "nobody");
    const token = (await kubectl("create", "token", "nobody")).trim();
    const denied = await fetch(`https://127.0.0.1:${kubeletPort}/debug/heap`, { tls: { ca }, headers: { authorization: `Bearer ${token}` } } as RequestInit);
    expect(denied.status).toBe(403);
    expect(await denied.text()).toBe("Forbidden (user=system:serviceaccount:default:nobody, verb=get, resource=nodes, subresource(s)=[proxy])\n");

    const profile = await fetch(`https://127.0.0.1:${kubeletPort}/debug/profile?seconds=1`, { tls: adminTls() } as RequestInit);
    expect(profile.status).toBe(200);
    expect(await profile.text()).toContain("Sampling rate");

    // BUN_INSPECT: the runtime's inspector (WebKit protocol) answers on loopback, in the agent's own process.
    const ws = new WebSocket(`ws://127.0.0.1:${inspectorPort}/bunlet`);
    const answer = await new Promise<{ result: { result: { value: number } } }>((resolve, reject) => {
      ws.onopen = () => ws.send(JSON.stringify({ id: 1, method: "Runtime.evaluate", params: { expression: "process.pid" } }));
      ws.onmessage = (m) => resolve(JSON.parse(String(m.data)));
      ws.onerror = () => reject(new Error("inspector connection failed"));
    });
    ws.close();
    expect(answer.result.result.value).toBe(agent.pid()!);
    expect(agent.log()).toContain("the runtime's inspector is listening");
  }, 60_000);

  // Last: it stops the agent. No systemd here, so the tested path is the documented fallback: SIGTERM with a shutdown grace period.
  test("graceful node shutdown on SIGTERM (no systemd): regular pods stop first within 4 s, then critical ones within 2 s; Failed with reason Terminated; Ready False", async () => {
    expect(existsSync("/run/systemd/system")).toBe(false);
    const sleeper = (name: string, extra: Record<string, unknown>) => {
      const p = podSpec(name, ["sleep", "3600"], { terminationGracePeriodSeconds: 30, ...extra }); // sleep as PID 1 ignores SIGTERM: it runs until its grace period is over
      return p;
    };
    await apply("regular", sleeper("regular", {}));
    const critical = sleeper("critical", { priorityClassName: "system-node-critical" });
    critical.metadata.namespace = "kube-system";
    await apply("critical", critical);
    for (const [ns, name] of [
      ["default", "regular"],
      ["kube-system", "critical"],
    ] as const) {
      await eventually(`${name} Running`, async () => (await tryJson("pod", name, "-n", ns))?.status?.phase === "Running", 60_000);
    }
    expect((await getJson("pod", "critical", "-n", "kube-system")).spec.priority).toBe(2000001000);

    const t0 = Date.now();
    const code = await agent.kill("SIGTERM");
    const elapsed = Date.now() - t0;
    expect(code).toBe(0);
    expect(elapsed).toBeGreaterThan(5_500); // both budgets were used: 4 s, then 2 s
    expect(elapsed).toBeLessThan(15_000);

    const finishedAt = async (ns: string, name: string) => {
      const pod = await eventually(
        `${name} Failed`,
        async () => {
          const p = await tryJson("pod", name, "-n", ns);
          return p?.status?.phase === "Failed" ? p : undefined;
        },
        20_000,
      );
      expect(pod.status).toMatchObject({ phase: "Failed", reason: "Terminated", message: "Pod was terminated in response to imminent node shutdown." });
      return Date.parse(pod.status.containerStatuses[0].state.terminated.finishedAt);
    };
    const regularDone = await finishedAt("default", "regular");
    const criticalDone = await finishedAt("kube-system", "critical");
    // Times in the API have whole seconds: the regular pod ends 4 s in, the critical one 2 s after it.
    expect(regularDone - t0).toBeGreaterThan(2_500);
    expect(regularDone - t0).toBeLessThan(6_500);
    expect(criticalDone - regularDone).toBeGreaterThanOrEqual(1_000);
    expect(criticalDone - regularDone).toBeLessThan(4_000);

    const ready = (await getJson("node", NODE)).status.conditions.find((c: any) => c.type === "Ready");
    expect(ready).toMatchObject({ status: "False", reason: "KubeletNotReady", message: "node is shutting down" });
    const events = await getJson("events", "--field-selector", `involvedObject.kind=Node,involvedObject.name=${NODE},reason=Shutdown`);
    expect(events.items[0]?.message).toBe("Shutdown manager detected shutdown event");
    expect(agent.log()).toContain("SIGTERM: the node is shutting down");
  }, 120_000);
});
