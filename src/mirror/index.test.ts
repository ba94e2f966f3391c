import { describe, expect, test } from "bun:test";
import { FakeKubeApi } from "../api/fake.ts";
import { applyStaticPodDefaults } from "../sources/defaults.ts";
import { memoryLogger } from "../util/log.ts";
import { MirrorPods } from "./index.ts";
import { LastReported } from "../status/api.ts";
import type { Pod } from "../pods/schema.ts";
import { isMirrorPod } from "../pods/source.ts";

const staticPod = (image = "busybox"): Pod =>
  applyStaticPodDefaults({ metadata: { name: "web" }, spec: { containers: [{ name: "c", image }] } }, { nodeName: "n1", source: "file", location: "/etc/manifests/web.yaml" });

function setup() {
  const api = new FakeKubeApi();
  let nodeUid: string | undefined = "node-uid";
  const mirrors = new MirrorPods({ api, nodeName: "n1", node: { uid: () => nodeUid }, logger: memoryLogger().logger });
  const refresh = () => mirrors.mirrorPodsChanged([...api.pods.values()].filter((p) => isMirrorPod(p as never)) as unknown as Pod[]);
  return { api, mirrors, refresh, setNodeUid: (u: string | undefined) => (nodeUid = u) };
}

describe("MirrorPods", () => {
  test("creates a mirror owned by the node, annotated with the static pod's hash", async () => {
    const { api, mirrors, refresh } = setup();
    const p = staticPod();
    await mirrors.sync([p]);
    refresh();
    const mirror = api.pods.get("default/web-n1")!;
    expect((mirror.metadata as { annotations: Record<string, string> }).annotations["kubernetes.io/config.mirror"]).toBe(p.metadata.uid!);
    expect((mirror.metadata as { ownerReferences: unknown[] }).ownerReferences).toEqual([{ apiVersion: "v1", kind: "Node", name: "n1", uid: "node-uid", controller: true }]);
    expect(mirror.metadata?.uid).not.toBe(p.metadata.uid);
    await mirrors.sync([p]);
    expect(api.calls.filter((c) => c.method === "createPod")).toHaveLength(1);
  });

  test("until the API source's first list, a static pod's report is pending; a mirror's status is its report after", async () => {
    const { api, mirrors, refresh } = setup();
    const reported = new LastReported(mirrors);
    const p = staticPod();
    const pending = reported.pending(p);
    expect(pending).toBeInstanceOf(Promise);
    expect(reported.pending({ ...p, metadata: { ...p.metadata, annotations: { "kubernetes.io/config.source": "api" } } })).toBeUndefined();
    refresh(); // the first list: no mirror yet, which now says something
    await pending;
    expect(reported.pending(p)).toBeUndefined();
    expect(reported.reportedContainer(p, "c", "abc")).toBeUndefined();
    await mirrors.sync([p]);
    const mirror = api.pods.get("default/web-n1")!;
    api.putPod({ ...mirror, status: { containerStatuses: [{ name: "c", containerID: "containerd://abc", ready: true, started: true }] } } as never);
    refresh();
    expect(reported.reportedContainer(p, "c", "abc")).toEqual({ ready: true, started: true });
  });

  test("waits for the node's UID", async () => {
    const { api, mirrors, setNodeUid } = setup();
    setNodeUid(undefined);
    await mirrors.sync([staticPod()]);
    expect(api.pods.size).toBe(0);
  });

  test("a changed static pod replaces its mirror; a removed one deletes it; a deleted mirror comes back", async () => {
    const { api, mirrors, refresh } = setup();
    await mirrors.sync([staticPod()]);
    refresh();
    const changed = staticPod("busybox:2");
    await mirrors.sync([changed]);
    refresh();
    expect(api.calls.filter((c) => c.method === "deletePod")).toHaveLength(1);
    expect((api.pods.get("default/web-n1")!.metadata as { annotations: Record<string, string> }).annotations["kubernetes.io/config.mirror"]).toBe(changed.metadata.uid!);
    api.removePod("default", "web-n1");
    refresh();
    await mirrors.sync([changed]);
    refresh();
    expect(api.pods.has("default/web-n1")).toBe(true);
    // Marked for deletion (kubectl delete with a grace period): deleted for good, then made again.
    const marked = api.pods.get("default/web-n1")!;
    api.putPod({ ...marked, metadata: { ...marked.metadata, deletionTimestamp: "2026-01-01T00:00:00Z" } });
    refresh();
    await mirrors.sync([changed]);
    refresh();
    expect(api.pods.has("default/web-n1")).toBe(true);
    await mirrors.sync([]);
    expect(api.pods.has("default/web-n1")).toBe(false);
  });
});
