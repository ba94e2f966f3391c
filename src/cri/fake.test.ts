import { describe, expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import { criContract } from "./contract.ts";
import { CriError, isCriError } from "./errors.ts";
import { FakeCri } from "./fake.ts";
import { ContainerEventType, ContainerState, PodSandboxState, type ContainerEventResponse } from "./index.ts";

const BUSYBOX = "localhost/bunlet/busybox:1.0";

criContract("FakeCri", async () => {
  const cri = new FakeCri({ clock: new FakeClock(), images: [BUSYBOX] });
  return {
    cri,
    busyboxImage: BUSYBOX,
    cgroupParent: "/fake",
    logDirectory: "/fake/logs",
    podNetwork: true,
    async containerExited(_cri, id, exitCode) {
      cri.exitContainer(id, exitCode);
    },
  };
});

function setup() {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const cri = new FakeCri({ clock, images: [BUSYBOX] });
  return { clock, cri };
}

const sandboxConfig = { metadata: { name: "web", namespace: "default", uid: "u1", attempt: 0 }, labels: { app: "web" } };

async function running(cri: FakeCri) {
  const sb = await cri.runPodSandbox(sandboxConfig);
  const c = await cri.createContainer(sb, { metadata: { name: "main" }, image: { image: "localhost/bunlet/busybox:1.0" } }, sandboxConfig);
  await cri.startContainer(c);
  return { sb, c };
}

describe("FakeCri", () => {
  test("timestamps come from the injected clock, in nanoseconds", async () => {
    const { clock, cri } = setup();
    const t0 = BigInt(clock.now()) * 1_000_000n;
    const sb = await cri.runPodSandbox(sandboxConfig);
    clock.advance(1500);
    const c = await cri.createContainer(sb, { metadata: { name: "main" }, image: { image: BUSYBOX } }, sandboxConfig);
    clock.advance(1000);
    await cri.startContainer(c);
    clock.advance(2000);
    cri.exitContainer(c, 0);
    const st = (await cri.containerStatus(c)).status!;
    expect((await cri.podSandboxStatus(sb)).status?.createdAt).toBe(t0);
    expect(st.createdAt).toBe(t0 + 1_500_000_000n);
    expect(st.startedAt).toBe(t0 + 2_500_000_000n);
    expect(st.finishedAt).toBe(t0 + 4_500_000_000n);
    expect(st.reason).toBe("Completed");
    expect(st.exitCode).toBe(0);
  });

  test("records every call with its arguments, failed ones included", async () => {
    const { cri } = setup();
    await cri.version();
    cri.failNext("podSandboxStatus", "Unavailable");
    await cri.podSandboxStatus("x").catch(() => {});
    expect(cri.calls.map((c) => c.method)).toEqual(["version", "podSandboxStatus"]);
    expect(cri.callsOf("podSandboxStatus")).toEqual([["x", false]]);
  });

  test("failNext injects one error per call, in order, as CriError with the wire method name", async () => {
    const { cri } = setup();
    cri.failNext("listContainers", "DeadlineExceeded");
    cri.failNext("listContainers", new CriError({ kind: "Unknown", method: "ListContainers", detail: "boom" }));
    const e1 = await cri.listContainers().catch((e: unknown) => e);
    const e2 = await cri.listContainers().catch((e: unknown) => e);
    expect(e1).toBeInstanceOf(CriError);
    expect((e1 as CriError).kind).toBe("DeadlineExceeded");
    expect((e1 as CriError).method).toBe("ListContainers");
    expect((e1 as CriError).code).toBe(4);
    expect((e2 as CriError).detail).toBe("boom");
    expect(await cri.listContainers()).toEqual([]);
  });

  test("holdNext keeps a call pending until released", async () => {
    const { cri } = setup();
    const release = cri.holdNext("version");
    let done = false;
    const p = cri.version().then(() => (done = true));
    await Bun.sleep(5);
    expect(done).toBe(false);
    release();
    await p;
    expect(done).toBe(true);
  });

  test("labels and annotations are kept as given, and later caller mutation does not leak in", async () => {
    const { cri } = setup();
    const cfg = { metadata: { name: "p", namespace: "n", uid: "u", attempt: 1 }, labels: { a: "1", "x/y": "z" }, annotations: { note: "ü ✓" } };
    const sb = await cri.runPodSandbox(cfg);
    cfg.labels.a = "changed";
    const st = (await cri.podSandboxStatus(sb)).status!;
    expect(st.labels).toEqual({ a: "1", "x/y": "z" });
    expect(st.annotations).toEqual({ note: "ü ✓" });
    expect(st.metadata?.attempt).toBe(1);
    // Results are copies too.
    st.labels.a = "mutated";
    expect((await cri.podSandboxStatus(sb)).status?.labels.a).toBe("1");
  });

  test("exitContainer ends a running container with the given code and reason; only running ones", async () => {
    const { cri } = setup();
    const { c } = await running(cri);
    cri.exitContainer(c, 137, "OOMKilled", "out of memory");
    const st = (await cri.containerStatus(c)).status!;
    expect(st.state).toBe(ContainerState.CONTAINER_EXITED);
    expect([st.exitCode, st.reason, st.message]).toEqual([137, "OOMKilled", "out of memory"]);
    expect(() => cri.exitContainer(c, 1)).toThrow(/not running/);
    expect(() => cri.exitContainer("nope", 1)).toThrow(/no container/);
  });

  test("a container needs a present image, and only a created container starts", async () => {
    const { cri } = setup();
    const { sb, c } = await running(cri);
    const missing = await cri.createContainer(sb, { metadata: { name: "m" }, image: { image: "nginx" } }, sandboxConfig).catch((e: unknown) => e);
    expect((missing as CriError).kind).toBe("NotFound");
    const again = await cri.startContainer(c).catch((e: unknown) => e);
    expect((again as CriError).kind).toBe("Unknown"); // what containerd 1.6 answers
    expect((again as CriError).detail).toContain("CONTAINER_RUNNING");
  });

  test("names are reserved per attempt, as containerd does, and released on removal", async () => {
    const { cri } = setup();
    const sb = await cri.runPodSandbox(sandboxConfig);
    const dup = await cri.runPodSandbox(sandboxConfig).catch((e: unknown) => e);
    expect((dup as CriError).detail).toContain('"web_default_u1_0" is reserved');
    const next = await cri.runPodSandbox({ ...sandboxConfig, metadata: { ...sandboxConfig.metadata, attempt: 1 } });
    const cc = { metadata: { name: "main", attempt: 0 }, image: { image: BUSYBOX } };
    const c = await cri.createContainer(sb, cc, sandboxConfig);
    expect((await cri.createContainer(sb, cc, sandboxConfig).catch((e: unknown) => e)) as CriError).toMatchObject({ kind: "Unknown" });
    await cri.removeContainer(c);
    await cri.createContainer(sb, cc, sandboxConfig);
    await cri.removePodSandbox(sb);
    await cri.removePodSandbox(next);
    await cri.runPodSandbox(sandboxConfig);
  });

  test("pulls are recorded, make the image present, and resolve short names", async () => {
    const { cri } = setup();
    expect(await cri.imageStatus({ image: "nginx:1.27" })).toBeUndefined();
    const ref = await cri.pullImage({ image: "nginx:1.27" }, { username: "u", password: "p" });
    expect(ref).toMatch(/^sha256:/);
    expect(cri.pulls).toHaveLength(1);
    expect(cri.pulls[0]?.image).toBe("nginx:1.27");
    expect(cri.pulls[0]?.auth?.username).toBe("u");
    const img = await cri.imageStatus({ image: "docker.io/library/nginx:1.27" });
    expect(img?.id).toBe(ref);
    expect(img?.repoTags).toEqual(["docker.io/library/nginx:1.27"]);
    expect((await cri.imageStatus({ image: ref }))?.id).toBe(ref);
    await cri.removeImage({ image: "nginx:1.27" });
    expect(await cri.imageStatus({ image: ref })).toBeUndefined();
  });

  test("an aborted pull is Canceled", async () => {
    const { cri } = setup();
    const abort = new AbortController();
    abort.abort();
    const err = await cri.pullImage({ image: "nginx" }, undefined, undefined, { signal: abort.signal }).catch((e: unknown) => e);
    expect((err as CriError).kind).toBe("Canceled");
  });

  test("exec handler decides output; default echo/false", async () => {
    const { cri } = setup();
    const { c } = await running(cri);
    cri.setExecHandler((_id, cmd) => ({ stdout: "x".repeat(Number(cmd[1])), stderr: "e", exitCode: 2 }));
    const r = await cri.execSync(c, ["big", "70000"], 1);
    expect(r.stdout.length).toBe(70000);
    expect(new TextDecoder().decode(r.stderr)).toBe("e");
    expect(r.exitCode).toBe(2);
  });

  test("Status conditions are controllable", async () => {
    const { cri } = setup();
    cri.setCondition("NetworkReady", false, "NetworkPluginNotReady", "cni config uninitialized");
    const conds = (await cri.status()).status!.conditions;
    expect(conds.find((c) => c.type === "NetworkReady")).toMatchObject({ status: false, reason: "NetworkPluginNotReady" });
    expect(conds.find((c) => c.type === "RuntimeReady")?.status).toBe(true);
  });

  test("events carry the sandbox and its container statuses; the stream ends on abort", async () => {
    const { cri } = setup();
    const abort = new AbortController();
    const seen: ContainerEventResponse[] = [];
    const done = (async () => {
      for await (const ev of cri.containerEvents(abort.signal)) seen.push(ev);
    })();
    await Bun.sleep(0);
    const { sb, c } = await running(cri);
    await cri.stopPodSandbox(sb);
    await cri.removePodSandbox(sb);
    await Bun.sleep(0);
    abort.abort();
    await done;
    // As containerd 2.x: the sandbox's own events carry its id as the container id.
    expect(seen.map((e) => [e.containerId, e.containerEventType])).toEqual([
      [sb, ContainerEventType.CONTAINER_CREATED_EVENT],
      [sb, ContainerEventType.CONTAINER_STARTED_EVENT],
      [c, ContainerEventType.CONTAINER_CREATED_EVENT],
      [c, ContainerEventType.CONTAINER_STARTED_EVENT],
      [c, ContainerEventType.CONTAINER_STOPPED_EVENT],
      [sb, ContainerEventType.CONTAINER_STOPPED_EVENT],
      [c, ContainerEventType.CONTAINER_DELETED_EVENT],
      [sb, ContainerEventType.CONTAINER_DELETED_EVENT],
    ]);
    expect(seen[3]?.podSandboxStatus?.id).toBe(sb);
    expect(seen[3]?.containersStatuses.map((s) => [s.id, s.state])).toEqual([[c, ContainerState.CONTAINER_RUNNING]]);
    expect(seen[4]?.podSandboxStatus?.state).toBe(PodSandboxState.SANDBOX_READY);
    expect(seen[5]?.podSandboxStatus?.state).toBe(PodSandboxState.SANDBOX_NOTREADY);
    // Removed: containerd can no longer read the sandbox's status.
    expect(seen[7]?.podSandboxStatus).toBeUndefined();
    expect(cri.counts()).toEqual({ sandboxes: 0, containers: 0, images: 1 });
  });

  test("breakEventStreams fails every open stream with the given kind", async () => {
    const { cri } = setup();
    const iter = cri.containerEvents(new AbortController().signal)[Symbol.asyncIterator]();
    const next = iter.next();
    await Bun.sleep(0);
    expect(cri.eventSubscribers()).toBe(1);
    cri.breakEventStreams("Unavailable", "containerd went away");
    const err = await next.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isCriError(err, "Unavailable")).toBe(true);
    expect(cri.eventSubscribers()).toBe(0);
  });

  test("ids resolve by unique prefix, as containerd's truncindex", async () => {
    const { cri } = setup();
    const { sb, c } = await running(cri);
    expect((await cri.containerStatus(c.slice(0, 12))).status?.id).toBe(c);
    expect((await cri.podSandboxStatus(sb.slice(0, 12))).status?.id).toBe(sb);
  });

  test("after close every call is Canceled", async () => {
    const { cri } = setup();
    cri.close();
    const err = await cri.version().catch((e: unknown) => e);
    expect((err as CriError).kind).toBe("Canceled");
  });
});
