/**
 * The CRI contract: behaviour the agent relies on, run against FakeCri
 * (fake.test.ts), the gRPC client talking to FakeCri (client.test.ts) and
 * the gRPC client talking to a real containerd (test/integration/cri.test.ts).
 * Where runtimes differ legitimately (a method an older runtime lacks),
 * the test accepts kind Unimplemented and says so.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import {
  ContainerState,
  ContainerEventType,
  NamespaceMode,
  PodSandboxState,
  isCriError,
  isNotFound,
  type ContainerConfig,
  type ContainerEventResponse,
  type CriService,
  type In,
  type PodSandboxConfig,
} from "./index.ts";

export interface ContractEnv {
  cri: CriService;
  /** An image present in the runtime with busybox's sh, sleep, echo and false. */
  busyboxImage: string;
  /** Sandboxes get this cgroup parent (real runtimes: inside the test's own cgroup). */
  cgroupParent: string;
  /** Where sandbox logs go; must exist or be creatable by the runtime. */
  logDirectory: string;
  /**
   * Resolves once the container, started with `sh -c "exit N"`, has exited
   * by itself. A real runtime just needs polling; the fake is told to.
   */
  containerExited(cri: CriService, containerId: string, exitCode: number): Promise<void>;
  /** Whether sandboxes on the pod network get an IP (a runtime with CNI). */
  podNetwork: boolean;
  teardown?(): Promise<void>;
}

let seq = 0;
const uniq = () => `${Date.now().toString(36)}-${++seq}`;

export function criContract(name: string, setup: () => Promise<ContractEnv>): void {
  describe(`CRI contract: ${name}`, () => {
    let env: ContractEnv;
    let cri: CriService;
    const sandboxes: string[] = [];

    beforeAll(async () => {
      env = await setup();
      cri = env.cri;
    });
    afterAll(async () => {
      await env?.teardown?.();
    });
    afterEach(async () => {
      for (const id of sandboxes.splice(0)) await cri.removePodSandbox(id).catch(() => {});
    });

    function sandboxConfig(over: { hostNetwork?: boolean; labels?: Record<string, string>; annotations?: Record<string, string> } = {}): In<PodSandboxConfig> {
      const podName = `contract-${uniq()}`;
      return {
        metadata: { name: podName, namespace: "contract", uid: `uid-${podName}`, attempt: 0 },
        // A host-network sandbox shares the node's UTS namespace: runc refuses a hostname.
        hostname: over.hostNetwork ? "" : podName.slice(0, 63),
        logDirectory: `${env.logDirectory}/${podName}`,
        labels: { "io.kubernetes.pod.name": podName, "io.kubernetes.pod.namespace": "contract", ...over.labels },
        annotations: { "contract.test/owner": "cri", ...over.annotations },
        linux: {
          cgroupParent: `${env.cgroupParent}/${podName}`,
          securityContext: { namespaceOptions: { network: over.hostNetwork ? NamespaceMode.NODE : NamespaceMode.POD, pid: NamespaceMode.CONTAINER, ipc: NamespaceMode.POD } },
        },
      };
    }

    async function runSandbox(over: Parameters<typeof sandboxConfig>[0] = { hostNetwork: true }) {
      const config = sandboxConfig(over);
      const id = await cri.runPodSandbox(config);
      sandboxes.push(id);
      return { id, config };
    }

    function containerConfig(cmd: string[], extra: In<ContainerConfig> = {}): In<ContainerConfig> {
      const name = `c-${uniq()}`;
      return {
        metadata: { name, attempt: 0 },
        image: { image: env.busyboxImage },
        command: cmd,
        logPath: `${name}.log`,
        labels: { "io.kubernetes.container.name": name },
        annotations: { "contract.test/container": name },
        ...extra,
      };
    }

    async function createContainer(sandbox: { id: string; config: In<PodSandboxConfig> }, cmd: string[], extra?: In<ContainerConfig>) {
      return cri.createContainer(sandbox.id, containerConfig(cmd, extra), sandbox.config);
    }

    async function expectKind(p: Promise<unknown>, kind: string, method?: string, target?: string) {
      const err = await p.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isCriError(err)).toBe(true);
      if (!isCriError(err)) return;
      expect(err.kind).toBe(kind as never);
      if (method) expect(err.method).toBe(method);
      if (target) expect(err.message).toContain(target);
    }

    test("Version answers with the v1 API", async () => {
      const v = await cri.version();
      expect(v.runtimeApiVersion).toBe("v1");
      expect(v.runtimeName).not.toBe("");
    });

    test("Status reports RuntimeReady", async () => {
      const s = await cri.status();
      const ready = s.status?.conditions.find((c) => c.type === "RuntimeReady");
      expect(ready?.status).toBe(true);
    });

    test("RuntimeConfig names a cgroup driver, or is Unimplemented on older runtimes", async () => {
      try {
        const rc = await cri.runtimeConfig();
        expect(rc.linux).toBeDefined();
      } catch (e) {
        expect(isCriError(e, "Unimplemented")).toBe(true);
      }
    });

    test("sandbox lifecycle: run, status, list, stop (twice), remove (twice)", async () => {
      const { id, config } = await runSandbox({ hostNetwork: !env.podNetwork, labels: { "contract.test/big": "no" } });
      const st = await cri.podSandboxStatus(id);
      expect(st.status?.id).toBe(id);
      expect(st.status?.state).toBe(PodSandboxState.SANDBOX_READY);
      expect(st.status?.metadata?.name).toBe(config.metadata!.name!);
      expect(st.status?.metadata?.uid).toBe(config.metadata!.uid!);
      expect(st.status?.labels["contract.test/big"]).toBe("no");
      expect(st.status?.annotations["contract.test/owner"]).toBe("cri");
      expect(st.status?.createdAt).toBeGreaterThan(0n);
      if (env.podNetwork) expect(st.status?.network?.ip).toMatch(/^\d+\.\d+\.\d+\.\d+$/);

      const byId = await cri.listPodSandbox({ id });
      expect(byId.map((s) => s.id)).toEqual([id]);
      const byLabel = await cri.listPodSandbox({ labelSelector: { "io.kubernetes.pod.name": config.metadata!.name! } });
      expect(byLabel.map((s) => s.id)).toEqual([id]);
      const ready = await cri.listPodSandbox({ state: { state: PodSandboxState.SANDBOX_READY } });
      expect(ready.map((s) => s.id)).toContain(id);

      await cri.stopPodSandbox(id);
      await cri.stopPodSandbox(id);
      expect((await cri.podSandboxStatus(id)).status?.state).toBe(PodSandboxState.SANDBOX_NOTREADY);
      const notReady = await cri.listPodSandbox({ state: { state: PodSandboxState.SANDBOX_NOTREADY } });
      expect(notReady.map((s) => s.id)).toContain(id);

      await cri.removePodSandbox(id);
      await cri.removePodSandbox(id);
      await expectKind(cri.podSandboxStatus(id), "NotFound", "PodSandboxStatus", id);
      expect(await cri.listPodSandbox({ id })).toEqual([]);
    });

    test("container round trip: create, start, RUNNING, stop, EXITED 137, remove", async () => {
      const sb = await runSandbox();
      const cid = await createContainer(sb, ["sleep", "3600"], { labels: { "contract.test/l": "v" }, annotations: { "contract.test/a": "w" } });
      let st = (await cri.containerStatus(cid)).status!;
      expect(st.state).toBe(ContainerState.CONTAINER_CREATED);
      expect(st.labels["contract.test/l"]).toBe("v");
      expect(st.annotations["contract.test/a"]).toBe("w");
      expect(st.createdAt).toBeGreaterThan(0n);

      await cri.startContainer(cid);
      st = (await cri.containerStatus(cid)).status!;
      expect(st.state).toBe(ContainerState.CONTAINER_RUNNING);
      expect(st.startedAt).toBeGreaterThanOrEqual(st.createdAt);
      expect(st.imageRef).not.toBe("");

      const listed = await cri.listContainers({ podSandboxId: sb.id });
      expect(listed.map((c) => c.id)).toEqual([cid]);
      expect(listed[0]!.labels["contract.test/l"]).toBe("v");
      expect(listed[0]!.state).toBe(ContainerState.CONTAINER_RUNNING);
      expect((await cri.listContainers({ state: { state: ContainerState.CONTAINER_RUNNING }, podSandboxId: sb.id })).length).toBe(1);

      // sleep as PID 1 ignores SIGTERM, so a stop with no grace is a SIGKILL.
      await cri.stopContainer(cid, 0);
      await cri.stopContainer(cid, 0);
      st = (await cri.containerStatus(cid)).status!;
      expect(st.state).toBe(ContainerState.CONTAINER_EXITED);
      expect(st.exitCode).toBe(137);
      expect(st.finishedAt).toBeGreaterThanOrEqual(st.startedAt);

      await cri.removeContainer(cid);
      await cri.removeContainer(cid);
      await expectKind(cri.containerStatus(cid), "NotFound", "ContainerStatus", cid);
      expect(await cri.listContainers({ id: cid })).toEqual([]);
    });

    test("a container that exits by itself reports its exit code", async () => {
      const sb = await runSandbox();
      const cid = await createContainer(sb, ["sh", "-c", "exit 3"]);
      await cri.startContainer(cid);
      await env.containerExited(cri, cid, 3);
      const st = (await cri.containerStatus(cid)).status!;
      expect(st.state).toBe(ContainerState.CONTAINER_EXITED);
      expect(st.exitCode).toBe(3);
      expect(st.reason).toBe("Error");
      // Not >= startedAt: containerd stamps startedAt after the task starts,
      // and a process this short can finish before that (measured on 1.6.20).
      expect(st.finishedAt).toBeGreaterThanOrEqual(st.createdAt);
    });

    test("unknown ids are NotFound, except removals (and, on containerd 2.x, stops), which succeed", async () => {
      const ghost = "0".repeat(64);
      await expectKind(cri.podSandboxStatus(ghost), "NotFound", "PodSandboxStatus", ghost);
      // The stops are idempotent in the CRI: containerd 2.x answers an unknown id with success,
      // 1.6 with NotFound; the agent treats both as stopped.
      const stopSandbox = await cri.stopPodSandbox(ghost).then(
        () => undefined,
        (e: unknown) => e,
      );
      if (stopSandbox !== undefined) await expectKind(Promise.reject(stopSandbox), "NotFound", "StopPodSandbox", ghost);
      await expectKind(cri.containerStatus(ghost), "NotFound", "ContainerStatus", ghost);
      await expectKind(cri.startContainer(ghost), "NotFound", "StartContainer", ghost);
      const stopContainer = await cri.stopContainer(ghost, 0).then(
        () => undefined,
        (e: unknown) => e,
      );
      if (stopContainer !== undefined) await expectKind(Promise.reject(stopContainer), "NotFound", "StopContainer", ghost);
      await expectKind(cri.execSync(ghost, ["true"], 5), "NotFound", "ExecSync", ghost);
      // Not expect(p).resolves: on Bun 1.4.5 it blocks without serving
      // grpc-js's HTTP/2 I/O, so the call only settles at its deadline.
      expect(await cri.removeContainer(ghost)).toBeUndefined();
      expect(await cri.removePodSandbox(ghost)).toBeUndefined();
      expect(isNotFound(await cri.containerStatus(ghost).catch((e: unknown) => e))).toBe(true);
    });

    test("StopPodSandbox stops its running containers", async () => {
      const sb = await runSandbox();
      const cid = await createContainer(sb, ["sleep", "3600"]);
      await cri.startContainer(cid);
      await cri.stopPodSandbox(sb.id);
      const st = (await cri.containerStatus(cid)).status!;
      expect(st.state).toBe(ContainerState.CONTAINER_EXITED);
      expect(st.exitCode).not.toBe(0);
    });

    test("RemovePodSandbox removes its containers, running or not", async () => {
      const sb = await runSandbox();
      const running = await createContainer(sb, ["sleep", "3600"]);
      await cri.startContainer(running);
      const created = await createContainer(sb, ["sleep", "3600"]);
      await cri.removePodSandbox(sb.id);
      expect(await cri.listContainers({ podSandboxId: sb.id })).toEqual([]);
      await expectKind(cri.containerStatus(running), "NotFound");
      await expectKind(cri.containerStatus(created), "NotFound");
    });

    test("creating a container in a stopped sandbox fails", async () => {
      const sb = await runSandbox();
      await cri.stopPodSandbox(sb.id);
      const err = await createContainer(sb, ["sleep", "1"]).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isCriError(err)).toBe(true);
    });

    test("ExecSync returns output and exit codes; a non-zero exit is not an error", async () => {
      const sb = await runSandbox();
      const cid = await createContainer(sb, ["sleep", "3600"]);
      await cri.startContainer(cid);
      const ok = await cri.execSync(cid, ["echo", "hello", "world"], 10);
      expect(new TextDecoder().decode(ok.stdout)).toBe("hello world\n");
      expect(ok.exitCode).toBe(0);
      const bad = await cri.execSync(cid, ["false"], 10);
      expect(bad.exitCode).toBe(1);
    });

    test("Exec, Attach and PortForward hand out streaming URLs", async () => {
      const sb = await runSandbox();
      const cid = await createContainer(sb, ["sleep", "3600"]);
      await cri.startContainer(cid);
      expect(await cri.exec({ containerId: cid, cmd: ["sh"], stdout: true, stderr: true })).toMatch(/^https?:\/\//);
      expect(await cri.attach({ containerId: cid, stdout: true })).toMatch(/^https?:\/\//);
      expect(await cri.portForward(sb.id, [80])).toMatch(/^https?:\/\//);
    });

    test("ReopenContainerLog works on a running container", async () => {
      const sb = await runSandbox();
      const cid = await createContainer(sb, ["sleep", "3600"]);
      await cri.startContainer(cid);
      await cri.reopenContainerLog(cid);
    });

    test("ListContainerStats covers a running container", async () => {
      const sb = await runSandbox();
      const cid = await createContainer(sb, ["sleep", "3600"]);
      await cri.startContainer(cid);
      const stats = await cri.listContainerStats({ podSandboxId: sb.id });
      expect(stats.map((s) => s.attributes?.id)).toContain(cid);
      const one = await cri.containerStats(cid);
      expect(one.attributes?.id).toBe(cid);
    });

    test("ListContainers and ListPodSandbox answers over 64 KiB arrive intact", async () => {
      // containerd caps each label at 4 KiB, so size comes from many annotations.
      const big: Record<string, string> = {};
      for (let i = 0; i < 12; i++) big[`contract.test/big-${i}`] = String(i % 10).repeat(4000);
      const sb = await runSandbox({ hostNetwork: true, annotations: big });
      const ids: string[] = [];
      for (let i = 0; i < 2; i++) ids.push(await createContainer(sb, ["sleep", "3600"], { annotations: big }));
      const listed = await cri.listContainers({ podSandboxId: sb.id });
      expect(listed.map((c) => c.id).sort()).toEqual([...ids].sort());
      let bytes = 0;
      for (const c of listed) {
        for (const [k, v] of Object.entries(big)) expect(c.annotations[k]).toBe(v);
        bytes += Object.values(c.annotations).reduce((n, v) => n + v.length, 0);
      }
      expect(bytes).toBeGreaterThan(64 * 1024);
      const sandboxes = await cri.listPodSandbox({ id: sb.id });
      expect(sandboxes[0]?.annotations["contract.test/big-11"]).toBe(big["contract.test/big-11"]!);
    });

    test("images: status of present and absent images, list, filesystem info", async () => {
      const present = await cri.imageStatus({ image: env.busyboxImage });
      expect(present?.id).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(present?.repoTags.some((t) => t.includes("busybox"))).toBe(true);
      expect(await cri.imageStatus({ image: "localhost/contract/absent:0" })).toBeUndefined();
      const all = await cri.listImages();
      expect(all.map((i) => i.id)).toContain(present!.id);
      // containerd 1.6 ignores the filter (and may list more); it must not drop the match.
      const filtered = await cri.listImages({ image: { image: env.busyboxImage } });
      expect(filtered.map((i) => i.id)).toContain(present!.id);
      await cri.removeImage({ image: "localhost/contract/absent:0" });
      const fs = await cri.imageFsInfo();
      expect(fs.imageFilesystems.length).toBeGreaterThan(0);
      expect(fs.imageFilesystems[0]?.fsId?.mountpoint).not.toBe("");
    });

    test("GetContainerEvents streams lifecycle events, or is Unimplemented on older runtimes", async () => {
      const abort = new AbortController();
      const events: ContainerEventResponse[] = [];
      const consumer = (async () => {
        for await (const ev of cri.containerEvents(abort.signal)) events.push(ev);
      })();
      const outcome = consumer.then(
        () => "ended",
        (e: unknown) => e,
      );
      // Give the stream a moment to open (or be refused) before acting.
      await Promise.race([outcome, new Promise((r) => setTimeout(r, 200))]);
      const sb = await runSandbox();
      const cid = await createContainer(sb, ["sleep", "3600"]);
      await cri.startContainer(cid);
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline && !events.some((e) => e.containerId === cid && e.containerEventType === ContainerEventType.CONTAINER_STARTED_EVENT)) {
        const settled = await Promise.race([outcome, new Promise((r) => setTimeout(() => r(undefined), 50))]);
        if (settled !== undefined) break;
      }
      abort.abort();
      const end = await outcome;
      if (isCriError(end)) {
        expect(end.kind).toBe("Unimplemented");
        return;
      }
      expect(end).toBe("ended");
      const mine = events.filter((e) => e.containerId === cid).map((e) => e.containerEventType);
      expect(mine).toContain(ContainerEventType.CONTAINER_CREATED_EVENT);
      expect(mine).toContain(ContainerEventType.CONTAINER_STARTED_EVENT);
    });
  });
}
