// How the runtime manager uses the volume manager: volumes before anything
// starts (FailedMount otherwise), mounts into the container config, a mount
// error as CreateContainerConfigError, teardown with the pod.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeCri } from "../cri/fake.ts";
import { Mount } from "../cri/index.ts";
import type { EventRecorder } from "../events/recorder.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { VolumeMountError, VolumeSetupError, type VolumeManager } from "../volumes/index.ts";
import { CriPodRuntime } from "./manager.ts";
import { podRef } from "../pods/identity.ts";

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
    ...volumes,
  };
  const runtime = new CriPodRuntime({
    cri,
    clock,
    logger: memoryLogger().logger,
    recorder,
    volumes: manager,
    node: { podLogsDir: logs, podsCgroupParent: "", hostDns: { servers: [], searches: [], options: [] }, clusterDns: [], clusterDomain: "" },
  });
  return { cri, runtime, events, calls };
}

describe("CriPodRuntime with volumes", () => {
  test("volumes are set up on every sync; the container config carries their mounts; teardown follows removal", async () => {
    const { cri, runtime, calls } = setup({});
    await runtime.syncPod(pod);
    await runtime.syncPod(pod);
    const [, config] = cri.callsOf("createContainer")[0] as [string, { mounts: Mount[] }];
    expect(config.mounts).toMatchObject([{ containerPath: "/cfg", readonly: true }]);
    await runtime.killPod(podRef(pod), 0);
    await runtime.removePod(podRef(pod));
    expect(calls).toEqual(["setup uid-1", "setup uid-1", "teardown uid-1"]);
  });

  test("a volume that cannot be set up: FailedMount per volume with upstream's wording, nothing created, a retry soon, then less often", async () => {
    const { cri, runtime, events } = setup({
      setupPod: async () => {
        throw new VolumeSetupError([{ volume: "cfg", message: 'configmap "app" not found', mounted: false }]);
      },
    });
    const outcome = await runtime.syncPod(pod);
    expect(events).toEqual(['Warning FailedMount MountVolume.SetUp failed for volume "cfg" : configmap "app" not found']);
    expect(cri.callsOf("runPodSandbox")).toEqual([]);
    expect(outcome.retryAfterMs).toBe(500);
    expect(outcome.results[0]?.error?.reason).toBe("FailedMount");
    const retries: (number | undefined)[] = [];
    for (let i = 0; i < 6; i++) retries.push((await runtime.syncPod(pod)).retryAfterMs);
    expect(retries).toEqual([1000, 2000, 4000, 8000, 10_000, 10_000]);
  });

  test("a failed refresh of a volume set up before is a FailedMount event, and the pod still syncs", async () => {
    const { cri, runtime, events } = setup({
      setupPod: async () => {
        throw new VolumeSetupError([{ volume: "cfg", message: 'configmap "app" not found', mounted: true }]);
      },
    });
    await runtime.syncPod(pod);
    expect(events).toContain('Warning FailedMount MountVolume.SetUp failed for volume "cfg" : configmap "app" not found');
    expect(cri.callsOf("createContainer")).toHaveLength(1);
  });

  test("a mount that cannot be made is CreateContainerConfigError with the message", async () => {
    const { cri, runtime } = setup({
      mountsFor: async () => {
        throw new VolumeMountError('failed to prepare subPath for volumeMount "cfg" of container "app"');
      },
    });
    const outcome = await runtime.syncPod(pod);
    expect(outcome.waiting.get("app")).toEqual({ reason: "CreateContainerConfigError", message: 'failed to prepare subPath for volumeMount "cfg" of container "app"' });
    expect(cri.callsOf("createContainer")).toEqual([]);
  });
});
