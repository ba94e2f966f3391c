import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakePodObjects } from "../api/objects.ts";
import { CriError } from "../cri/errors.ts";
import { FakeCri } from "../cri/fake.ts";
import type { Pod } from "../pods/schema.ts";
import { PodHost } from "../sync/pod-host.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { withDefaultTag } from "./image-name.ts";
import { CriPodRuntime } from "./manager.ts";
import { PullQueue } from "./pull-queue.ts";
import { testRuntimeOptions, testNode } from "./testing.ts";

let logs: string;
beforeEach(() => (logs = mkdtempSync(join(tmpdir(), "podlogs-"))));
afterEach(() => rmSync(logs, { recursive: true, force: true }));

const pod = (over: Partial<Pod["spec"]["containers"][number]> = {}): Pod => ({
  metadata: { name: "web", namespace: "default", uid: "uid-1" },
  spec: { restartPolicy: "Always", containers: [{ name: "app", image: "busybox:1.0", ...over }] },
});

function setup(clock = new FakeClock(), cri = new FakeCri({ clock, images: ["busybox:1.0"] }), more: { pullQueue?: PullQueue; podObjects?: FakePodObjects } = {}) {
  const node = testNode({ podLogsDir: logs, podsCgroupParent: "/test/kubepods", hostDns: { servers: ["1.1.1.1"], searches: [], options: [] } });
  const host = PodHost.forNode(node);
  const events: string[] = [];
  const runtime = new CriPodRuntime(
    testRuntimeOptions({
      cri,
      clock,
      logger: memoryLogger().logger,
      node,
      host,
      recorder: { event: (_ref, type, reason, message) => void events.push(`${type} ${reason} ${message}`) },
      start: { pullQueue: more.pullQueue ?? new PullQueue(1) },
      ...(more.podObjects ? { config: { podObjects: more.podObjects } } : {}),
    }),
  );
  return { clock, cri, runtime, events };
}

/** A pull secret `default/regcred` with two credentials that both match reg.example.com/team/app. */
function twoCredentials(): FakePodObjects {
  const objects = new FakePodObjects();
  const b64 = (x: string) => Buffer.from(x).toString("base64");
  objects.secrets.set("default/regcred", {
    type: "kubernetes.io/dockerconfigjson",
    data: { ".dockerconfigjson": b64(JSON.stringify({ auths: { "reg.example.com": { auth: b64("a:1") }, "reg.example.com/team": { auth: b64("b:2") } } })) },
  });
  return objects;
}

const settle = async () => {
  for (let i = 0; i < 50; i++) await Bun.sleep(0);
};

describe("image pulls as upstream's image manager (pkg/kubelet/images/image_manager.go)", () => {
  test("a pull's Pulled event gives the pull's time, the time with waiting for the queue, and the image's size", async () => {
    const clock = new FakeClock();
    const cri = new FakeCri({ clock, images: [] });
    const { runtime, events } = setup(clock, cri);
    const release = cri.holdNext("pullImage");
    const syncing = runtime.syncPod(pod({ image: "registry.example/app:2" }));
    await settle();
    clock.advance(1234.6);
    release();
    await syncing;
    const size = Number((await cri.imageStatus({ image: "registry.example/app:2" }))!.size);
    expect(events).toContain(`Normal Pulled Successfully pulled image "registry.example/app:2" in 1.234s (1.234s including waiting). Image size: ${size} bytes.`);
  });

  test("within the back-off a sync waits with ImagePullBackOff, whose message carries the last pull's reason and error; the pod is synced again after 10 s", async () => {
    const { clock, cri, runtime, events } = setup();
    const p = pod({ imagePullPolicy: "Always" });
    cri.failNext("pullImage", "Unknown", "failed to resolve reference: not found");
    const failed = await runtime.syncPod(p);
    expect(failed.waiting.get("app")).toEqual({ reason: "ErrImagePull", message: "failed to resolve reference: not found" });
    expect(failed.retryAfterMs).toBe(10_000);
    expect(events).toContain('Warning Failed Failed to pull image "busybox:1.0": failed to resolve reference: not found');
    expect(events).toContain("Warning Failed Error: ErrImagePull");

    clock.advance(10_000);
    cri.failNext("pullImage", "NotFound", "no such image");
    const again = await runtime.syncPod(p);
    // Not Unknown: the gRPC error as grpc-go prints it, as the CRI client returns it.
    expect(again.waiting.get("app")).toEqual({ reason: "ErrImagePull", message: "rpc error: code = NotFound desc = no such image" });
    // The back-off is 20 s now; the next sync (the pod worker's error period, 10 s) is within it.
    expect(again.retryAfterMs).toBe(10_000);
    clock.advance(10_000);
    events.length = 0;
    const backingOff = await runtime.syncPod(p);
    expect(backingOff.waiting.get("app")).toEqual({
      reason: "ImagePullBackOff",
      message: 'Back-off pulling image "busybox:1.0": ErrImagePull: rpc error: code = NotFound desc = no such image',
    });
    expect(backingOff.retryAfterMs).toBe(10_000);
    expect(events).toEqual(['Normal BackOff Back-off pulling image "busybox:1.0"', "Warning Failed Error: ImagePullBackOff"]);
    expect(cri.callsOf("pullImage")).toHaveLength(2);
    clock.advance(10_000);
    await runtime.syncPod(p);
    expect(cri.callsOf("pullImage")).toHaveLength(3);
  });

  test("pull policy Never with the image absent: an ErrImageNeverPull event, then Failed 'Error: ErrImageNeverPull', as upstream", async () => {
    const { runtime, events } = setup();
    const outcome = await runtime.syncPod(pod({ image: "absent:1", imagePullPolicy: "Never" }));
    expect(outcome.waiting.get("app")).toEqual({ reason: "ErrImageNeverPull", message: 'Container image "absent:1" is not present with pull policy of Never' });
    expect(events.filter((e) => e.includes("ErrImageNeverPull"))).toEqual([
      'Warning ErrImageNeverPull Container image "absent:1" is not present with pull policy of Never',
      "Warning Failed Error: ErrImageNeverPull",
    ]);
  });

  test("an image status that fails: ImageInspectError with upstream's words (InspectFailed), no pull", async () => {
    const { cri, runtime, events } = setup();
    cri.failNext("imageStatus", new CriError({ kind: "Unknown", method: "ImageStatus", detail: "disk I/O error" }));
    const outcome = await runtime.syncPod(pod());
    const message = 'Failed to inspect image "": rpc error: code = Unknown desc = disk I/O error';
    expect(outcome.waiting.get("app")).toEqual({ reason: "ImageInspectError", message });
    expect(events).toContain(`Warning InspectFailed ${message}`);
    expect(events).toContain("Warning Failed Error: ImageInspectError");
    expect(cri.callsOf("pullImage")).toEqual([]);
  });

  test("the image status and the pull carry the pod's annotations, not the spec's name (image_manager.go:162-174, convert.go:63-81)", async () => {
    const clock = new FakeClock();
    const cri = new FakeCri({ clock, images: [] });
    const { runtime } = setup(clock, cri);
    const annotated: Pod = {
      ...pod({ image: "registry.example/app", imagePullPolicy: "IfNotPresent" }),
      metadata: { ...pod().metadata, annotations: { team: "web", "example.com/tier": "front" } },
    };
    await runtime.syncPod(annotated);
    const spec = { image: "registry.example/app:latest", annotations: { team: "web", "example.com/tier": "front" }, userSpecifiedImage: "", runtimeHandler: "" };
    // The precheck's status, the pull, then the size after it.
    expect(cri.callsOf("imageStatus").map((args) => args[0])).toEqual([spec, spec]);
    expect(cri.callsOf("pullImage").map((args) => args[0])).toEqual([spec]);
  });

  test("pull policy Always pulls without asking the runtime for a local copy first", async () => {
    const { cri, runtime } = setup();
    cri.failNext("imageStatus", "Unknown", "would fail");
    await runtime.syncPod(pod({ imagePullPolicy: "Always" }));
    expect(cri.callsOf("pullImage")).toHaveLength(1);
    expect((await runtime.observe({ uid: "uid-1", name: "web", namespace: "default" })).containers[0]).toMatchObject({ state: "running" });
  });

  test("a name the kubelet cannot parse waits with InvalidImageName and reaches no runtime call", async () => {
    const { cri, runtime, events } = setup();
    const outcome = await runtime.syncPod(pod({ image: "Busybox:1.0" }));
    const message =
      'Failed to apply default image tag "Busybox:1.0": couldn\'t parse image name "Busybox:1.0": invalid reference format: repository name (library/Busybox) must be lowercase';
    expect(outcome.waiting.get("app")).toEqual({ reason: "InvalidImageName", message });
    expect(events).toContain(`Warning InspectFailed ${message}`);
    expect(events).toContain("Warning Failed Error: InvalidImageName");
    expect(cri.callsOf("imageStatus")).toEqual([]);
    expect(cri.callsOf("pullImage")).toEqual([]);
  });

  test("the runtime is asked for the name with upstream's default tag; events name the image as the spec does", async () => {
    const clock = new FakeClock();
    const cri = new FakeCri({ clock, images: [] });
    const { runtime, events } = setup(clock, cri);
    await runtime.syncPod(pod({ image: "registry.example/app" }));
    expect(cri.pulls.map((x) => x.image)).toEqual(["registry.example/app:latest"]);
    expect(events).toContain('Normal Pulling Pulling image "registry.example/app"');
  });

  test("a runtime's RegistryUnavailable is its own reason with upstream's words (evalCRIPullErr)", async () => {
    const { cri, runtime } = setup();
    cri.failNext("pullImage", "Unknown", "RegistryUnavailable: dial tcp: connection refused");
    const outcome = await runtime.syncPod(pod({ imagePullPolicy: "Always" }));
    expect(outcome.waiting.get("app")).toEqual({
      reason: "RegistryUnavailable",
      message: "image pull failed for busybox:1.0 because the registry is unavailable: dial tcp: connection refused",
    });
  });

  test("registryPullQPS: a pull that tries two credentials takes one token, as upstream's throttled image service", async () => {
    const clock = new FakeClock();
    const cri = new FakeCri({ clock, images: [] });
    const { runtime } = setup(clock, cri, { podObjects: twoCredentials(), pullQueue: new PullQueue(1, { qps: 1, burst: 1, clock }) });
    cri.failNext("pullImage", "Unknown", "unauthorized");
    const p: Pod = { ...pod({ image: "reg.example.com/team/app:1.0" }), spec: { ...pod().spec, containers: [{ name: "app", image: "reg.example.com/team/app:1.0" }] } };
    (p.spec as { imagePullSecrets?: { name: string }[] }).imagePullSecrets = [{ name: "regcred" }];
    const outcome = await runtime.syncPod(p);
    expect(outcome.results.filter((r) => r.error)).toEqual([]);
    expect(cri.callsOf("pullImage")).toHaveLength(2);
  });

  test("FailedToRetrieveImagePullSecret comes with every sync while a pull secret cannot be retrieved, the image present or not; a secret of another type is not named", async () => {
    const objects = new FakePodObjects();
    objects.secrets.set("default/opaque", { type: "Opaque", data: {} });
    const { runtime, events } = setup(undefined, undefined, { podObjects: objects });
    const p = pod();
    (p.spec as { imagePullSecrets?: { name: string }[] }).imagePullSecrets = [{ name: "gone" }, { name: "opaque" }];
    await runtime.syncPod(p);
    await runtime.syncPod(p);
    const warning = "Warning FailedToRetrieveImagePullSecret Unable to retrieve some image pull secrets (gone); attempting to pull the image may not succeed.";
    expect(events.filter((e) => e.includes("FailedToRetrieveImagePullSecret"))).toEqual([warning, warning]);
  });

  test("credentials that all fail with the same error: the error once, without brackets (utilerrors aggregate)", async () => {
    const clock = new FakeClock();
    const cri = new FakeCri({ clock, images: [] });
    const { runtime } = setup(clock, cri, { podObjects: twoCredentials() });
    cri.failNext("pullImage", "Unknown", "unauthorized");
    cri.failNext("pullImage", "Unknown", "unauthorized");
    const p = pod({ image: "reg.example.com/team/app:1.0" });
    (p.spec as { imagePullSecrets?: { name: string }[] }).imagePullSecrets = [{ name: "regcred" }];
    const outcome = await runtime.syncPod(p);
    expect(outcome.waiting.get("app")).toEqual({ reason: "ErrImagePull", message: "unauthorized" });
  });

  test("serialized pulls: a pod that must stop while its pull waits behind another pod's leaves the queue at once, failing as upstream's cancelled pull; the pull under way goes on", async () => {
    const clock = new FakeClock();
    const { cri, runtime, events } = setup(clock, new FakeCri({ clock, images: [] }));
    const release = cri.holdNext("pullImage"); // the first pod's pull takes long
    const first = runtime.syncPod({ ...pod({ image: "first:1" }), metadata: { name: "first", namespace: "default", uid: "uid-first" } });
    await settle();
    const podMustStop = new AbortController();
    const queued = runtime.syncPod(pod(), podMustStop.signal);
    await settle();
    expect(cri.callsOf("pullImage")).toHaveLength(1);
    podMustStop.abort(new Error("pod sync cancelled: the pod must stop (deleted)"));
    expect((await queued).results.find((r) => r.error)).toMatchObject({
      action: "PullImage",
      error: { reason: "ErrImagePull", message: "rpc error: code = Canceled desc = context canceled" },
    });
    expect(events).toContain('Warning Failed Failed to pull image "busybox:1.0": rpc error: code = Canceled desc = context canceled');
    // It never reached the runtime; the first pod's pull was not touched.
    expect(cri.callsOf("pullImage")).toHaveLength(1);
    release();
    expect((await first).results.filter((r) => r.error)).toEqual([]);
  });
});

describe("withDefaultTag (upstream applyDefaultImageTag)", () => {
  test.each([
    ["busybox", "busybox:latest"],
    ["busybox:1.36", "busybox:1.36"],
    ["localhost:5000/app", "localhost:5000/app:latest"],
    ["registry.example/team/app:v1", "registry.example/team/app:v1"],
    [`busybox@sha256:${"a".repeat(64)}`, `busybox@sha256:${"a".repeat(64)}`],
    [`busybox:1@sha256:${"a".repeat(64)}`, `busybox:1@sha256:${"a".repeat(64)}`],
  ])("%s → %s", (image, tagged) => expect(withDefaultTag(image)).toBe(tagged));

  test.each([
    ["Busybox", "invalid reference format: repository name (library/Busybox) must be lowercase"],
    ["busybox:", "invalid reference format"],
    ["bad image", "invalid reference format"],
    ["a".repeat(64), `invalid repository name (${"a".repeat(64)}), cannot specify 64-byte hexadecimal strings`],
    [`busybox@sha256:${"a".repeat(40)}`, "invalid checksum digest length"],
    [`busybox@md5:${"a".repeat(32)}`, "unsupported digest algorithm"],
    ["Registry.Example/Team/app", "invalid reference format: repository name (Team/app) must be lowercase"],
  ])("%s: %s", (image, error) => expect(() => withDefaultTag(image)).toThrow(`Failed to apply default image tag "${image}": couldn't parse image name "${image}": ${error}`));
});
