// How a pod's host side goes with its runtime steps: volumes before anything
// starts (FailedMount otherwise), mounts into the container config, a mount
// error as CreateContainerConfigError, teardown after the runtime removed the pod.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeCri } from "../cri/fake.ts";
import { CriPodRuntime } from "../runtime/manager.ts";
import { testRuntimeOptions, testNode } from "../runtime/testing.ts";
import { LocalStatusStore } from "../status/index.ts";
import { Mount } from "../cri/index.ts";
import type { EventRecorder } from "../events/recorder.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { VolumeMountError, VolumeSetupError, type VolumeManager } from "../volumes/index.ts";
import { podRef } from "../pods/identity.ts";
import { PodHost } from "./pod-host.ts";
import { HostPodSyncer, type SyncPodResult } from "./pod-syncer.ts";

let logs: string;
beforeEach(() => (logs = mkdtempSync(join(tmpdir(), "podlogs-"))));
afterEach(() => rmSync(logs, { recursive: true, force: true }));

const pod: Pod = {
  metadata: { name: "web", namespace: "default", uid: "uid-1" },
  spec: { containers: [{ name: "app", image: "busybox:1.0", volumeMounts: [{ name: "cfg", mountPath: "/cfg" }] }], volumes: [{ name: "cfg", configMap: { name: "app" } }] },
};

function setup(volumes: Partial<VolumeManager>) {
  const clock = new FakeClock();
  const cri = new FakeCri({ clock, images: ["busybox:1.0"] });
  const events: string[] = [];
  const recorder: EventRecorder = { event: (_o, type, reason, message) => void events.push(`${type} ${reason} ${message}`) };
  const calls: string[] = [];
  const manager: VolumeManager = {
    setupPod: async (p) => void calls.push(`setup ${p.metadata.uid}`),
    mountsFor: async () => [Mount.create({ containerPath: "/cfg", hostPath: "/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~configmap/cfg", readonly: true })],
    teardownPod: async (uid) => void calls.push(`teardown ${uid}`),
    cleanupOrphans: async () => {},
    claimVolumes: () => [],
    driverVolumeStats: async () => [],
    ...volumes,
  };
  const host = new PodHost({ podLogsDir: logs, podsCgroupParent: "", clusterDomain: "", recorder, volumes: manager });
  const logger = memoryLogger().logger;
  const node = testNode({ podLogsDir: logs });
  const runtime = new CriPodRuntime(testRuntimeOptions({ cri, clock, logger, recorder, host, node }));
  const status = new LocalStatusStore();
  const syncer = new HostPodSyncer({ runtime, host, status, clock, logger, recorder });
  const sync = (p: Pod) => syncer.syncPod({ ref: podRef(p), pod: p, seenAt: 0, others: () => [], signal: new AbortController().signal });
  return { cri, syncer, sync, status, events, calls };
}

const retryOf = (r: SyncPodResult) => (r.kind === "running" ? r.retryAfterMs : undefined);

describe("PodHost with the pod syncer and the CRI runtime", () => {
  test("volumes are set up on every sync; the container config carries their mounts; teardown follows removal", async () => {
    const { cri, syncer, sync, calls } = setup({});
    await sync(pod);
    await sync(pod);
    const [, config] = cri.callsOf("createContainer")[0] as [string, { mounts: Mount[] }];
    expect(config.mounts).toMatchObject([{ containerPath: "/cfg", readonly: true }]);
    await syncer.syncTerminatingPod({ ref: podRef(pod), pod, state: { stage: "terminating", gracePeriodSeconds: 0, reason: "deleted", deleted: true } });
    expect(calls).toEqual(["setup uid-1", "setup uid-1"]);
    await syncer.syncTerminatedPod(podRef(pod), pod);
    expect(calls).toEqual(["setup uid-1", "setup uid-1", "teardown uid-1"]);
    expect(cri.callsOf("removePodSandbox")).toHaveLength(1);
  });

  test("a volume that cannot be set up: FailedMount per volume with upstream's wording, nothing created, a retry soon, then less often", async () => {
    const { cri, sync, status, events } = setup({
      setupPod: async () => {
        throw new VolumeSetupError([{ volume: "cfg", message: 'configmap "app" not found', mounted: false }]);
      },
    });
    expect(await sync(pod)).toMatchObject({ kind: "running", failed: true, retryAfterMs: 500 });
    expect(events).toEqual(['Warning FailedMount MountVolume.SetUp failed for volume "cfg" : configmap "app" not found']);
    expect(cri.callsOf("runPodSandbox")).toEqual([]);
    expect(status.get("uid-1")!.phase).toBe("Pending");
    const retries: (number | undefined)[] = [];
    for (let i = 0; i < 6; i++) retries.push(retryOf(await sync(pod)));
    expect(retries).toEqual([1000, 2000, 4000, 8000, 10_000, 10_000]);
  });

  test("a failed refresh of a volume set up before is a FailedMount event, and the pod still syncs", async () => {
    const { cri, sync, events } = setup({
      setupPod: async () => {
        throw new VolumeSetupError([{ volume: "cfg", message: 'configmap "app" not found', mounted: true }]);
      },
    });
    await sync(pod);
    expect(events).toContain('Warning FailedMount MountVolume.SetUp failed for volume "cfg" : configmap "app" not found');
    expect(cri.callsOf("createContainer")).toHaveLength(1);
  });

  test("a mount that cannot be made is CreateContainerConfigError with the message", async () => {
    const { cri, sync, status } = setup({
      mountsFor: async () => {
        throw new VolumeMountError('failed to prepare subPath for volumeMount "cfg" of container "app"');
      },
    });
    await sync(pod);
    expect(status.get("uid-1")!.containerStatuses[0]!.state).toEqual({
      waiting: { reason: "CreateContainerConfigError", message: 'failed to prepare subPath for volumeMount "cfg" of container "app"' },
    });
    expect(cri.callsOf("createContainer")).toEqual([]);
  });
});
