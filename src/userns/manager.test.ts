import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { posix } from "node:path";
import { DEFAULT_RANGE, kubeletMappings, UserNamespaceManager } from "./manager.ts";

function setup(over: { range?: { firstId: number; length: number }; idsPerPod?: number; maxPods?: number; random?: () => number } = {}) {
  const root = mkdtempSync(posix.join(tmpdir(), "userns-"));
  const podsRoot = posix.join(root, "pods");
  const podDir = (uid: string) => posix.join(podsRoot, uid);
  const make = () =>
    new UserNamespaceManager({
      range: over.range ?? { firstId: 65536, length: 65536 * 4 },
      idsPerPod: over.idsPerPod ?? 65536,
      maxPods: over.maxPods ?? 2,
      podDir,
      podsRoot,
      random: over.random ?? (() => 0),
    });
  return { podDir, podsRoot, make };
}

describe("UserNamespaceManager", () => {
  test("each pod gets its own slot of idsPerPod, 0 → the slot's first host ID, UIDs and GIDs alike", () => {
    const { make } = setup();
    const m = make();
    const a = m.mappingsFor("a");
    const b = m.mappingsFor("b");
    expect(a).toEqual({ uids: [{ hostId: 65536, containerId: 0, length: 65536 }], gids: [{ hostId: 65536, containerId: 0, length: 65536 }] });
    expect(b.uids[0]).toEqual({ hostId: 131072, containerId: 0, length: 65536 });
    // The same pod asks again: the same slot.
    expect(m.mappingsFor("a")).toEqual(a);
  });

  test("the scan starts at a random slot, as upstream's allocator", () => {
    const { make } = setup({ random: () => 0.99 });
    expect(make().mappingsFor("a").uids[0]!.hostId).toBe(65536 * 4);
  });

  test("the mapping is written to the pod's directory in upstream's form and read back after a restart", () => {
    const { make, podDir } = setup();
    make().mappingsFor("a");
    const file = posix.join(podDir("a"), "userns");
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({
      uidMappings: [{ hostId: 65536, containerId: 0, length: 65536 }],
      gidMappings: [{ hostId: 65536, containerId: 0, length: 65536 }],
    });
    const restarted = make();
    expect(restarted.allocated().get("a")).toBe(65536);
    // The slot stays taken: a new pod gets another one.
    expect(restarted.mappingsFor("b").uids[0]!.hostId).toBe(131072);
  });

  test("release frees the slot and removes the file", () => {
    const { make, podDir } = setup({ range: { firstId: 65536, length: 65536 * 2 } });
    const m = make();
    m.mappingsFor("a");
    m.mappingsFor("b");
    m.release("a");
    expect(existsSync(posix.join(podDir("a"), "userns"))).toBe(false);
    expect(m.mappingsFor("c").uids[0]!.hostId).toBe(65536);
  });

  test("the orphan sweep releases slots of unknown pods and of pods whose directory is gone, as upstream's housekeeping", () => {
    const { make, podDir } = setup({ range: { firstId: 65536, length: 65536 * 4 }, maxPods: 4 });
    const m = make();
    for (const uid of ["kept", "running-only", "unknown", "dir-gone"]) m.mappingsFor(uid);
    mkdirSync(podDir("no-slot"), { recursive: true }); // a pod directory without a user namespace: nothing to release
    rmSync(podDir("dir-gone"), { recursive: true });
    const known = new Set(["kept", "running-only", "dir-gone"]);
    expect(m.cleanupOrphans((uid) => known.has(uid)).sort()).toEqual(["dir-gone", "unknown"]);
    expect([...m.allocated().keys()].sort()).toEqual(["kept", "running-only"]);
    expect(existsSync(posix.join(podDir("unknown"), "userns"))).toBe(false);
    expect(existsSync(posix.join(podDir("kept"), "userns"))).toBe(true);
    // The freed slots are given out again: two new pods fit beside the two kept.
    m.mappingsFor("new1");
    m.mappingsFor("new2");
    expect(() => m.mappingsFor("new3")).toThrow("could not find an empty slot");
    // Nothing left to sweep; a missing pods directory is no pod at all.
    expect(m.cleanupOrphans(() => true)).toEqual([]);
  });

  test("the sweep with no pods directory releases every slot (no pod has a directory)", () => {
    const { make, podsRoot } = setup();
    const m = make();
    m.mappingsFor("a");
    rmSync(podsRoot, { recursive: true });
    expect(m.cleanupOrphans(() => true)).toEqual(["a"]);
    expect(m.allocated().size).toBe(0);
  });

  test("with no slot held the sweep does not read the pods directory (it runs every housekeeping pass)", () => {
    const { make, podsRoot } = setup();
    const m = make();
    // A pods directory that cannot be read: the sweep would fail if it read it.
    mkdirSync(posix.dirname(podsRoot), { recursive: true });
    writeFileSync(podsRoot, "not a directory");
    expect(m.cleanupOrphans(() => false)).toEqual([]);
  });

  test("exhaustion fails with upstream's error and takes nothing", () => {
    const { make } = setup({ range: { firstId: 65536, length: 65536 * 2 } });
    const m = make();
    m.mappingsFor("a");
    m.mappingsFor("b");
    expect(() => m.mappingsFor("c")).toThrow("create user namespace: could not find an empty slot to allocate a user namespace");
    expect(m.allocated().has("c")).toBe(false);
  });

  test("a range that does not fit is refused with upstream's messages", () => {
    expect(() => setup({ idsPerPod: 65536 * 2, range: { firstId: 65536, length: 65536 * 4 } }).make()).toThrow("kubelet user assigned ID 65536 is not a multiple of 131072");
    expect(() => setup({ idsPerPod: 1000 }).make()).toThrow("kubelet user namespace length 1000 is not a multiple of 65536");
    expect(() => setup({ maxPods: 110 }).make()).toThrow("kubelet user assigned IDs are not enough to support 110 pods");
    // The default range holds 65535 slots of 65536: 110 pods fit.
    expect(() => setup({ range: DEFAULT_RANGE, maxPods: 110 }).make()).not.toThrow();
  });

  test("a bad mappings file on disk is refused with upstream's messages", () => {
    const { make, podDir } = setup();
    mkdirSync(podDir("x"), { recursive: true });
    const m = { hostId: 65536, containerId: 1, length: 65536 };
    writeFileSync(posix.join(podDir("x"), "userns"), JSON.stringify({ uidMappings: [m], gidMappings: [m] }));
    expect(() => make()).toThrow("record pod mappings: invalid user namespace configuration: UID 0 must be mapped");
    writeFileSync(posix.join(podDir("x"), "userns"), "{");
    expect(() => make()).toThrow("invalid user namespace mappings file");
  });
});

describe("kubeletMappings", () => {
  const files = { passwd: "/p", subuid: "/u", subgid: "/g" };
  test("no kubelet user: upstream's default range", () => {
    expect(kubeletMappings(files, { read: (p) => (p === "/p" ? "root:x:0:0::/root:/bin/sh\n" : undefined) })).toEqual(DEFAULT_RANGE);
  });
  test("a kubelet user: its one subordinate range, the same for UIDs and GIDs", () => {
    const fs: Record<string, string> = { "/p": "kubelet:x:999:999::/:/bin/false\n", "/u": "kubelet:1048576:1048576\n", "/g": "kubelet:1048576:1048576\n" };
    expect(kubeletMappings(files, { read: (p) => fs[p] })).toEqual({ firstId: 1048576, length: 1048576 });
    fs["/g"] = "kubelet:2097152:1048576\n";
    expect(() => kubeletMappings(files, { read: (p) => fs[p] })).toThrow('mismatched subuids and subgids for user "kubelet"');
  });
});
