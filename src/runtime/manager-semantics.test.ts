// The runtime manager's pod semantics with a FakeCri: pod files (hosts,
// termination messages), reasons, env references, DNS, sysctls and pulls.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { PodHost } from "../sync/pod-host.ts";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakePodObjects } from "../api/objects.ts";
import { FakeCri } from "../cri/fake.ts";
import { podDirs } from "../pods/dirs.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { CriPodRuntime } from "./manager.ts";
import type { ContainerConfigSources, StartPolicy } from "./options.ts";
import { testRuntimeOptions, testNode } from "./testing.ts";
import { podRef } from "../pods/identity.ts";
import { ContainerConfig, CriError, NamespaceMode, PodSandboxConfig } from "../cri/index.ts";
import { PodUserNamespaces, UserNamespaceManager } from "../userns/index.ts";

let dir: string;
beforeEach(() => (dir = mkdtempSync(join(tmpdir(), "semantics-"))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const pod = (container: Partial<Pod["spec"]["containers"][number]> = {}, spec: Partial<Pod["spec"]> = {}): Pod => ({
  metadata: { name: "web", namespace: "default", uid: "uid-1" },
  spec: { containers: [{ name: "app", image: "busybox:1.0", ...container }], ...spec },
});

interface Over {
  cri?: FakeCri;
  clock?: FakeClock;
  config?: Partial<ContainerConfigSources>;
  start?: Partial<StartPolicy>;
}

function setup(over: Over = {}, nodeHostsPath?: string) {
  const clock = over.clock ?? new FakeClock();
  const cri = over.cri ?? new FakeCri({ clock, images: ["busybox:1.0"] });
  const events: string[] = [];
  const node = testNode({ podLogsDir: join(dir, "logs"), hostDns: { servers: ["1.1.1.1"], searches: [], options: [] }, clusterDomain: "cluster.local" });
  const host = PodHost.forNode(node, { podDirs: podDirs(join(dir, "root")), random: () => 0.5, ...(nodeHostsPath ? { nodeHostsPath } : {}) });
  const runtime = new CriPodRuntime(
    testRuntimeOptions({
      cri,
      clock,
      logger: memoryLogger().logger,
      node,
      host,
      recorder: { event: (_ref, type, reason, message) => void events.push(`${type} ${reason} ${message}`) },
      ...(over.config ? { config: over.config } : {}),
      ...(over.start ? { start: over.start } : {}),
    }),
  );
  return { clock, cri, runtime, events, host };
}

const sync = async (runtime: CriPodRuntime, p: Pod) => runtime.syncPod(p);
type Created = [string, { mounts: { containerPath: string; hostPath: string }[]; envs: { key: string; value: string }[] }];
const created = (cri: FakeCri) => cri.callsOf("createContainer") as Created[];

describe("pod files", () => {
  test("containers mount the managed /etc/hosts and a fresh termination message file; both go with the pod's host side", async () => {
    const { cri, runtime, host } = setup();
    const p = pod({}, { hostAliases: [{ ip: "1.2.3.4", hostnames: ["alias"] }] } as Partial<Pod["spec"]>);
    await sync(runtime, p);
    const [[, config]] = created(cri) as [Created];
    const root = join(dir, "root/pods/uid-1");
    expect(config.mounts).toEqual([
      expect.objectContaining({ containerPath: "/etc/hosts", hostPath: join(root, "etc-hosts") }),
      expect.objectContaining({ containerPath: "/dev/termination-log", hostPath: join(root, "containers/app/80000000") }),
    ]);
    const ip = (await runtime.observe(podRef(p))).sandboxes[0]!.ip!;
    expect(readFileSync(join(root, "etc-hosts"), "utf8")).toEndWith(`${ip}\tweb\n\n# Entries added by HostAliases.\n1.2.3.4\talias\n`);
    await runtime.killPod(podRef(p), 0);
    await runtime.removePod(podRef(p));
    await host.teardown(podRef(p));
    expect(existsSync(root)).toBe(false);
  });

  test("a host-network pod mounts the node's hosts file under the host-network header; its IP is the node's", async () => {
    writeFileSync(join(dir, "node-hosts"), "127.0.0.1 localhost thisnode\n");
    const { cri, runtime } = setup({ config: { hostIP: "192.0.2.7" } }, join(dir, "node-hosts"));
    await sync(runtime, pod({ env: [{ name: "IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } }] }, { hostNetwork: true }));
    const [[, config]] = created(cri) as [Created];
    expect(config.mounts.map((m) => m.containerPath)).toEqual(["/etc/hosts", "/dev/termination-log"]);
    expect(readFileSync(join(dir, "root/pods/uid-1/etc-hosts"), "utf8")).toBe("# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost thisnode\n");
    expect(config.envs).toEqual([{ key: "IP", value: "192.0.2.7" }]);
  });

  test("a container mounting its own /etc/hosts does not get the managed one", async () => {
    const { cri, runtime } = setup();
    await sync(runtime, pod({ volumeMounts: [{ name: "h", mountPath: "/etc/hosts" }] }));
    expect(created(cri)[0]![1].mounts.map((m) => m.containerPath)).toEqual(["/dev/termination-log"]);
  });

  test("the termination message written by the container is the terminated state's message, also for a restarted agent", async () => {
    const { cri, runtime, clock } = setup();
    const p = pod({}, { restartPolicy: "Never" });
    await sync(runtime, p);
    const hostPath = created(cri)[0]![1].mounts.find((m) => m.containerPath === "/dev/termination-log")!.hostPath;
    writeFileSync(hostPath, "all done");
    cri.exitContainer((await runtime.observe(podRef(p))).containers[0]!.id, 0);
    expect((await runtime.observe(podRef(p))).containers[0]).toMatchObject({ reason: "Completed", message: "all done", exitCode: 0 });
    const restarted = setup({ cri, clock }).runtime;
    expect((await restarted.observe(podRef(p))).containers[0]!.message).toBe("all done");
  });
});

describe("reasons", () => {
  test("OOMKilled and Error come from the runtime; a failed start waits with RunContainerError and the runtime's message", async () => {
    const { cri, runtime } = setup();
    const p = pod();
    await sync(runtime, p);
    cri.exitContainer((await runtime.observe(podRef(p))).containers[0]!.id, 137, "OOMKilled");
    expect((await runtime.observe(podRef(p))).containers[0]).toMatchObject({ state: "exited", exitCode: 137, reason: "OOMKilled" });
    cri.failNext("startContainer", "Unknown", 'exec: "nope": executable file not found in $PATH');
    const outcome = await sync(runtime, p);
    expect(outcome.waiting.get("app")).toEqual({ reason: "RunContainerError", message: expect.stringContaining('exec: "nope": executable file not found') });
  });

  test("failed creates and starts carry the runtime's words alone, as upstream's (grpc status Message); the start's event names the container, not its ID", async () => {
    const { cri, runtime, events } = setup();
    cri.failNext("createContainer", "Unknown", "failed to reserve container name");
    const created = await sync(runtime, pod());
    expect(created.waiting.get("app")).toEqual({ reason: "CreateContainerError", message: "failed to reserve container name" });
    expect(events).toContain("Warning Failed Error: failed to reserve container name");
    const start = cri.startContainer.bind(cri);
    cri.startContainer = async (id: string) => {
      await start(id);
      throw new CriError({
        kind: "Unknown",
        method: "StartContainer",
        target: id,
        detail: `failed to start containerd task "${id}": exec: "nope": executable file not found in $PATH`,
      });
    };
    const started = await sync(runtime, pod());
    const id = (await runtime.observe(podRef(pod()))).containers[0]!.id;
    expect(started.waiting.get("app")).toEqual({
      reason: "RunContainerError",
      message: `failed to start containerd task "${id}": exec: "nope": executable file not found in $PATH`,
    });
    expect(events).toContain('Warning Failed Error: failed to start containerd task "app": exec: "nope": executable file not found in $PATH');
  });

  test("a failed postStart hook: the killed container waits with PostStartHookError and the hook's message until it is started again, as upstream's reason cache", async () => {
    const { cri, runtime } = setup();
    cri.setExecHandler(() => ({ stdout: "", stderr: "boom\n", exitCode: 1 }));
    const outcome = await sync(runtime, pod({ lifecycle: { postStart: { exec: { command: ["fail"] } } } }));
    const failure = outcome.results.find((r) => r.error)!.error!;
    expect(failure.reason).toBe("PostStartHookError");
    expect(outcome.waiting.get("app")).toEqual({ reason: "PostStartHookError", message: failure.message });
    const never = await sync(runtime, {
      ...pod({ lifecycle: { postStart: { exec: { command: ["fail"] } } } }, { restartPolicy: "Never" }),
      metadata: { name: "n", namespace: "default", uid: "uid-n" },
    });
    expect(never.waiting.has("app")).toBe(false);
  });

  test("an httpGet hook without a host on a host-network pod fails as upstream's (handlers.go:151-159): the runtime reports it no IP", async () => {
    const { runtime, events } = setup({ config: { hostIP: "192.0.2.7" } });
    const p = pod({ lifecycle: { postStart: { httpGet: { port: 80, path: "/started" } }, preStop: { httpGet: { port: 80, path: "/stopping" } } } }, { hostNetwork: true });
    const outcome = await sync(runtime, p);
    const where = 'for Container "app" in Pod "web_default(uid-1)"';
    const failure = (path: string) => `HTTP lifecycle hook (${path}) ${where} failed - error: failed to find networking container: &{uid-1 web default []}`;
    expect(outcome.results.find((r) => r.error)!.error).toEqual({ reason: "PostStartHookError", message: failure("/started") });
    expect(outcome.waiting.get("app")).toEqual({ reason: "PostStartHookError", message: failure("/started") });
    expect(events).toContain("Warning FailedPostStartHook PostStartHook failed");
    // The preStop hook of a running host-network container: the same failure, its own event; the stop goes on.
    const restarted = await sync(runtime, {
      ...p,
      spec: { ...p.spec, containers: [{ name: "app", image: "busybox:1.0", lifecycle: { preStop: { httpGet: { port: 80, path: "/stopping" } } } }] },
    });
    expect(restarted.results.filter((r) => r.error)).toEqual([]);
    await runtime.killPod(podRef(p), 5, p);
    expect(events).toContain("Warning FailedPreStopHook PreStopHook failed");
    expect((await runtime.observe(podRef(p))).containers.every((c) => c.state === "exited")).toBe(true);
  });

  test("with restartPolicy Never a failed start is not reported as waiting: it will not be retried", async () => {
    const { cri, runtime } = setup();
    cri.failNext("startContainer", "Unknown", "no such file");
    const outcome = await sync(runtime, pod({}, { restartPolicy: "Never" }));
    expect(outcome.waiting.has("app")).toBe(false);
    expect(outcome.results.find((r) => r.error)).toMatchObject({ error: { reason: "RunContainerError" } });
  });
});

describe("env references through the runtime", () => {
  test("configMapKeyRef from PodObjects reaches the container; a missing key waits with CreateContainerConfigError and upstream's message", async () => {
    const objects = new FakePodObjects();
    objects.configMaps.set("default/cfg", { data: { mode: "fast" }, binaryData: {} });
    const { cri, runtime, events } = setup({ config: { podObjects: objects, nodeAllocatable: { cpuMilli: 2000, memoryBytes: 1 << 30, ephemeralStorageBytes: 0 } } });
    await sync(
      runtime,
      pod({
        env: [
          { name: "MODE", valueFrom: { configMapKeyRef: { name: "cfg", key: "mode" } } },
          { name: "CPUS", valueFrom: { resourceFieldRef: { resource: "limits.cpu" } } },
        ],
      }),
    );
    expect(created(cri)[0]![1].envs).toEqual([
      { key: "MODE", value: "fast" },
      { key: "CPUS", value: "2" },
    ]);
    const outcome = await sync(runtime, {
      ...pod({ env: [{ name: "X", valueFrom: { configMapKeyRef: { name: "cfg", key: "nope" } } }] }),
      metadata: { name: "other", namespace: "default", uid: "uid-2" },
    });
    expect(outcome.waiting.get("app")).toEqual({ reason: "CreateContainerConfigError", message: "couldn't find key nope in ConfigMap default/cfg" });
    expect(events).toContain("Warning Failed Error: couldn't find key nope in ConfigMap default/cfg");
  });
});

describe("sandbox settings", () => {
  test("pod sysctls go to the sandbox; DNS cut to upstream's limits is a DNSConfigForming event on the pod", async () => {
    const { cri, runtime, events } = setup();
    const p = pod({}, {
      securityContext: { sysctls: [{ name: "kernel.shm_rmid_forced", value: "1" }] },
      dnsPolicy: "None",
      dnsConfig: { nameservers: ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"], searches: ["a.example"], options: [{ name: "ndots", value: "1" }] },
    } as Partial<Pod["spec"]>);
    await sync(runtime, p);
    const [sandbox] = cri.callsOf("runPodSandbox")[0] as [{ linux: { sysctls: Record<string, string> }; dnsConfig: unknown }];
    expect(sandbox.linux.sysctls).toEqual({ "kernel.shm_rmid_forced": "1" });
    expect(sandbox.dnsConfig).toEqual({ servers: ["1.1.1.1", "2.2.2.2", "3.3.3.3"], searches: ["a.example"], options: ["ndots:1"] });
    expect(events).toContain(
      "Warning DNSConfigForming Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 1.1.1.1 2.2.2.2 3.3.3.3",
    );
  });
});

describe("image pulls", () => {
  test("imagePullSecrets reach the runtime as AuthConfig; a failing credential is followed by the next; a missing secret is an event", async () => {
    const objects = new FakePodObjects();
    const b64 = (s: string) => Buffer.from(s).toString("base64");
    objects.secrets.set("default/regcred", {
      type: "kubernetes.io/dockerconfigjson",
      data: {
        ".dockerconfigjson": b64(JSON.stringify({ auths: { "reg.example.com": { auth: b64("first:one") }, "reg.example.com/team": { username: "team", password: "two" } } })),
      },
    });
    const { cri, runtime, events } = setup({ config: { podObjects: objects } });
    cri.failNext("pullImage", "Unknown", "unauthorized");
    const p = pod({ image: "reg.example.com/team/app:1.0" }, { imagePullSecrets: [{ name: "regcred" }, { name: "absent" }] } as Partial<Pod["spec"]>);
    const outcome = await sync(runtime, p);
    expect(outcome.results.filter((r) => r.error)).toEqual([]);
    const auths = (cri.callsOf("pullImage") as [unknown, { username: string; password: string }][]).map(([, a]) => `${a.username}:${a.password}`);
    expect(auths).toEqual(["team:two", "first:one"]);
    expect(cri.pulls.map((x) => x.auth?.username)).toEqual(["first"]);
    expect(events).toContain("Warning FailedToRetrieveImagePullSecret Unable to retrieve some image pull secrets (absent); attempting to pull the image may not succeed.");
  });

  test("without matching credentials the pull is anonymous; pulls of different pods wait for each other when serialized", async () => {
    const { PullQueue } = await import("./pull-queue.ts");
    const queue = new PullQueue(1);
    const { cri, runtime } = setup({ start: { pullQueue: queue } });
    const release = cri.holdNext("pullImage");
    const first = sync(runtime, pod({ image: "other.io/a:1" }));
    const second = sync(runtime, { ...pod({ image: "other.io/b:1" }), metadata: { name: "b", namespace: "default", uid: "uid-b" } });
    await new Promise((r) => setTimeout(r, 10));
    expect(queue.size).toEqual({ active: 1, waiting: 1 });
    expect(cri.callsOf("pullImage")).toHaveLength(1);
    release();
    await Promise.all([first, second]);
    expect(cri.pulls.map((x) => [x.image, x.auth])).toEqual([
      ["other.io/a:1", undefined],
      ["other.io/b:1", undefined],
    ]);
  });
});

describe("hostname", () => {
  test("setHostnameAsFQDN makes the sandbox hostname the FQDN; one longer than 64 characters fails the sandbox with upstream's message", async () => {
    const { cri, runtime, events } = setup();
    await sync(runtime, pod({}, { hostname: "h", subdomain: "sub", setHostnameAsFQDN: true } as Partial<Pod["spec"]>));
    expect((cri.callsOf("runPodSandbox")[0] as [{ hostname: string }])[0].hostname).toBe("h.sub.default.svc.cluster.local");
    const long = {
      ...pod({}, { hostname: "a".repeat(40), subdomain: "sub", setHostnameAsFQDN: true } as Partial<Pod["spec"]>),
      metadata: { name: "long", namespace: "default", uid: "uid-long" },
    };
    const outcome = await sync(runtime, long);
    expect(outcome.results.find((r) => r.error)).toMatchObject({ action: "CreatePodSandbox", error: { reason: "CreatePodSandboxError" } });
    expect(events.find((e) => e.includes("FailedCreatePodSandBox"))).toContain(
      `FQDN ${"a".repeat(40)}.sub.default.svc.cluster.local is too long (64 characters is the max, 70 characters requested)`,
    );
  });
});

describe("sandbox creation errors", () => {
  test("a RunPodSandbox the runtime refuses is FailedCreatePodSandBox with the CRI error as grpc-go prints it (kuberuntime_manager.go:1358)", async () => {
    const { cri, runtime, events } = setup();
    cri.failNext("runPodSandbox", "Unknown", 'failed to get sandbox runtime: no runtime for "nope" is configured');
    const outcome = await sync(runtime, pod());
    expect(outcome.results.find((r) => r.error)).toMatchObject({ action: "CreatePodSandbox", error: { reason: "CreatePodSandboxError" } });
    expect(events).toContain(
      'Warning FailedCreatePodSandBox Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "nope" is configured',
    );
  });

  test("a new sandbox whose status cannot be read fails the step with FailedStatusPodSandBox, no container started (kuberuntime_manager.go:1363-1373)", async () => {
    const { cri, runtime, events } = setup();
    cri.failNext("podSandboxStatus", "Unavailable", "connection closed");
    const outcome = await sync(runtime, pod());
    expect(outcome.results.find((r) => r.error)).toMatchObject({ action: "CreatePodSandbox", error: { reason: "FailedStatusPodSandBox" } });
    expect(outcome.retryAfterMs).toBe(10_000);
    expect(events).toContain("Warning FailedStatusPodSandBox Unable to get pod sandbox status: rpc error: code = Unavailable desc = connection closed");
    expect(cri.callsOf("createContainer")).toEqual([]);
  });
});

describe("user namespaces (hostUsers: false)", () => {
  const withUserns = (cri: FakeCri, supported: boolean) => {
    const status = cri.status.bind(cri);
    cri.status = async (verbose?: boolean) => ({
      ...(await status(verbose)),
      runtimeHandlers: [{ name: "", features: { recursiveReadOnlyMounts: true, userNamespaces: supported } }],
    });
    const manager = new UserNamespaceManager({
      range: { firstId: 65536 * 2, length: 65536 * 4 },
      idsPerPod: 65536,
      maxPods: 4,
      podDir: podDirs(join(dir, "root")).pod,
      podsRoot: podDirs(join(dir, "root")).podsRoot,
      random: () => 0,
    });
    return new PodUserNamespaces(manager, cri);
  };

  test("the sandbox and its containers carry mode POD with the pod's slot, on the wire as the CRI's userns_options", async () => {
    const clock = new FakeClock();
    const cri = new FakeCri({ clock, images: ["busybox:1.0"] });
    const { runtime } = setup({ cri, clock, config: { userNamespaces: withUserns(cri, true) } });
    await sync(runtime, pod({}, { hostUsers: false } as Partial<Pod["spec"]>));
    const mapping = [{ hostId: 131072, containerId: 0, length: 65536 }];
    const [sandbox] = cri.callsOf("runPodSandbox")[0] as [PodSandboxConfig];
    // Encoded and decoded as containerd reads it: field 5 of NamespaceOption.
    const wire = PodSandboxConfig.fromBinary(PodSandboxConfig.toBinary(PodSandboxConfig.create(sandbox)));
    expect(wire.linux?.securityContext?.namespaceOptions?.usernsOptions).toEqual({ mode: NamespaceMode.POD, uids: mapping, gids: mapping });
    const [, config, sandboxOfContainer] = cri.callsOf("createContainer")[0] as [string, ContainerConfig, PodSandboxConfig];
    const cwire = ContainerConfig.fromBinary(ContainerConfig.toBinary(ContainerConfig.create(config)));
    expect(cwire.linux?.securityContext?.namespaceOptions?.usernsOptions).toEqual({ mode: NamespaceMode.POD, uids: mapping, gids: mapping });
    expect(sandboxOfContainer.linux?.securityContext?.namespaceOptions?.usernsOptions?.uids).toEqual(mapping);
    // Every mount is idmapped with the pod's mappings (upstream applyPlatformSpecificContainerConfig).
    expect(cwire.mounts.length).toBeGreaterThan(0);
    for (const m of cwire.mounts) expect([m.uidMappings, m.gidMappings]).toEqual([mapping, mapping]);
    // The mapping is kept in the pod's directory.
    expect(JSON.parse(readFileSync(join(dir, "root", "pods", "uid-1", "userns"), "utf8")).uidMappings).toEqual(mapping);
  });

  test("a pod that leaves hostUsers unset gets mode NODE, as upstream with the gate on", async () => {
    const clock = new FakeClock();
    const cri = new FakeCri({ clock, images: ["busybox:1.0"] });
    const { runtime } = setup({ cri, clock, config: { userNamespaces: withUserns(cri, true) } });
    await sync(runtime, pod());
    const [sandbox] = cri.callsOf("runPodSandbox")[0] as [PodSandboxConfig];
    expect(sandbox.linux?.securityContext?.namespaceOptions?.usernsOptions).toEqual({ mode: NamespaceMode.NODE, uids: [], gids: [] });
  });

  test("a runtime that does not report user namespaces fails the sandbox with upstream's message and takes no slot", async () => {
    const clock = new FakeClock();
    const cri = new FakeCri({ clock, images: ["busybox:1.0"] });
    const { runtime, events } = setup({ cri, clock, config: { userNamespaces: withUserns(cri, false) } });
    const outcome = await sync(runtime, pod({}, { hostUsers: false } as Partial<Pod["spec"]>));
    expect(outcome.results.find((r) => r.error)).toMatchObject({ action: "CreatePodSandbox", error: { reason: "CreatePodSandboxError" } });
    expect(events).toContain("Warning FailedCreatePodSandBox Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces");
    expect(cri.callsOf("runPodSandbox")).toHaveLength(0);
    expect(existsSync(join(dir, "root", "pods", "uid-1", "userns"))).toBe(false);
  });

  test("a RuntimeClass handler the runtime does not list is named in the refusal", async () => {
    const cri = new FakeCri({ clock: new FakeClock(), images: ["busybox:1.0"] });
    const userns = withUserns(cri, true);
    await expect(userns.forPod(pod({}, { hostUsers: false } as Partial<Pod["spec"]>), "kata")).rejects.toThrow(
      'can\'t set `spec.hostUsers: false`, RuntimeClass handler "kata" does not support user namespaces: the handler "kata" is not known',
    );
  });
});
