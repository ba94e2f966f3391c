import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakePodObjects, type TokenRequestSpec } from "../api/objects.ts";
import { MountPropagation } from "../cri/index.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { VolumeMountError, VolumeSetupError, type VolumeFailure } from "./index.ts";
import { memoryVolumeSize, PodVolumeManager } from "./manager.ts";
import { FakeMounter } from "./mount.ts";
import { TokenManager, type TokenSource } from "./token.ts";

let root: string;
beforeEach(() => (root = mkdtempSync(join(tmpdir(), "volmgr-"))));
afterEach(() => rmSync(root, { recursive: true, force: true }));

const GiB = 2 ** 30;
const node = { cpuMilli: 2000, memoryBytes: 4 * GiB, ephemeralStorageBytes: 50 * GiB };

function setup() {
  const mounter = new FakeMounter();
  const objects = new FakePodObjects();
  const requested: TokenRequestSpec[] = [];
  const forgotten: string[] = [];
  const tokens: TokenSource = {
    token: async (s) => (requested.push(s), `token-${requested.length}`),
    forgetPod: (uid) => void forgotten.push(uid),
  };
  const manager = new PodVolumeManager({ rootDir: root, mounter, objects, tokens, node, clock: new FakeClock(), logger: memoryLogger().logger, pid: 99 });
  return { manager, mounter, objects, requested, forgotten };
}

// Without mounts given, the container mounts every volume (a volume no container uses is never set up).
const pod = (
  volumes: NonNullable<Pod["spec"]["volumes"]>,
  mounts: NonNullable<Pod["spec"]["containers"][number]["volumeMounts"]> = volumes.map((v) => ({ name: v.name, mountPath: `/mnt/${v.name}` })),
  extra: Partial<Pod["spec"]> = {},
): Pod => ({
  metadata: { name: "p", namespace: "ns", uid: "uid-1", labels: { app: "p" } },
  spec: { containers: [{ name: "c", image: "busybox", volumeMounts: mounts }], volumes, ...extra },
});
const volDir = (plugin: string, name: string) => join(root, "pods/uid-1/volumes", plugin, name);
const b64 = (s: string) => Buffer.from(s).toString("base64");

async function failures(fn: () => Promise<unknown>): Promise<VolumeFailure[]> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof VolumeSetupError) return err.failures;
    throw err;
  }
  return [];
}

describe("PodVolumeManager", () => {
  test("emptyDir on disk: a 0777 directory under kubernetes.io~empty-dir, mounted read-write", async () => {
    const { manager } = setup();
    const p = pod([{ name: "scratch", emptyDir: {} }], [{ name: "scratch", mountPath: "/data" }]);
    await manager.setupPod(p);
    expect(statSync(volDir("kubernetes.io~empty-dir", "scratch")).mode & 0o777).toBe(0o777);
    const [m] = await manager.mountsFor(p, p.spec.containers[0]!);
    expect(m).toMatchObject({ containerPath: "/data", hostPath: volDir("kubernetes.io~empty-dir", "scratch"), readonly: false, propagation: MountPropagation.PROPAGATION_PRIVATE });
  });

  test("emptyDir Memory is one tmpfs sized by sizeLimit, mounted once across syncs (an adopted pod keeps it)", async () => {
    const { manager, mounter } = setup();
    const p = pod([{ name: "m", emptyDir: { medium: "Memory", sizeLimit: "16Mi" } }]);
    await manager.setupPod(p);
    await manager.setupPod(p);
    expect(mounter.calls.filter((c) => c.startsWith("tmpfs"))).toHaveLength(1);
    expect(mounter.mounts.get(volDir("kubernetes.io~empty-dir", "m"))).toEqual({ kind: "tmpfs", sizeBytes: 16 * 2 ** 20 });
  });

  describe("emptyDir HugePages (upstream setupHugepages)", () => {
    const MI = 2 ** 20;
    const hugePod = (medium: string, limits: Record<string, string>, init: Record<string, string> = {}): Pod => ({
      ...pod([{ name: "hp", emptyDir: { medium } }]),
      spec: {
        volumes: [{ name: "hp", emptyDir: { medium } }],
        containers: [{ name: "c", image: "busybox", volumeMounts: [{ name: "hp", mountPath: "/hugepages" }], resources: { limits: { memory: "64Mi", ...limits } } }],
        ...(Object.keys(init).length ? { initContainers: [{ name: "i", image: "busybox", resources: { limits: { memory: "64Mi", ...init } } }] } : {}),
      },
    });

    test("HugePages: a hugetlbfs with the page size of the pod's request, mounted once across syncs, its root left 0755", async () => {
      const { manager, mounter } = setup();
      const p = hugePod("HugePages", { "hugepages-2Mi": "8Mi" });
      await manager.setupPod(p);
      await manager.setupPod(p);
      expect(mounter.calls.filter((c) => c.startsWith("hugetlbfs"))).toEqual([`hugetlbfs ${volDir("kubernetes.io~empty-dir", "hp")} pagesize=2Mi`]);
      expect(mounter.mounts.get(volDir("kubernetes.io~empty-dir", "hp"))).toEqual({ kind: "hugetlbfs", pageSize: "2Mi", pageSizeBytes: 2 * MI });
      const [m] = await manager.mountsFor(p, p.spec.containers[0]!);
      expect(m).toMatchObject({ containerPath: "/hugepages", hostPath: volDir("kubernetes.io~empty-dir", "hp"), readonly: false });
    });

    test("HugePages-<size> picks that size among several; an init container's request counts", async () => {
      const { manager, mounter } = setup();
      await manager.setupPod(hugePod("HugePages-1Gi", { "hugepages-2Mi": "8Mi" }, { "hugepages-1Gi": "1Gi" }));
      expect(mounter.mounts.get(volDir("kubernetes.io~empty-dir", "hp"))).toMatchObject({ kind: "hugetlbfs", pageSize: "1Gi" });
    });

    test("upstream's refusals: no request of that size, several sizes for plain HugePages; nothing mounted", async () => {
      const cases: [Pod, string][] = [
        [hugePod("HugePages", {}), "medium HugePages: hugePages storage requested, but there is no resource request for huge pages"],
        [hugePod("HugePages-1Gi", { "hugepages-2Mi": "8Mi" }), "medium HugePages-1Gi: hugePages storage requested, but there is no resource request for huge pages"],
        [hugePod("HugePages", { "hugepages-2Mi": "8Mi" }, { "hugepages-1Gi": "1Gi" }), "medium: HugePages can't be used if container requests multiple huge page sizes"],
      ];
      for (const [p, message] of cases) {
        const { manager, mounter } = setup();
        expect(await failures(() => manager.setupPod(p))).toEqual([expect.objectContaining({ volume: "hp", message })]);
        expect(mounter.mounts.size).toBe(0);
      }
    });

    test("a hugetlbfs already mounted (restart) is kept when its page size is the medium's, an error naming both when not", async () => {
      const { manager, mounter } = setup();
      const dir = volDir("kubernetes.io~empty-dir", "hp");
      await mounter.mountHugetlbfs(dir, "2Mi");
      await manager.setupPod(hugePod("HugePages-2Mi", { "hugepages-2Mi": "8Mi" }));
      expect(mounter.calls.filter((c) => c.startsWith("hugetlbfs"))).toHaveLength(1);
      const [failure] = await failures(() => manager.setupPod(hugePod("HugePages-1Gi", { "hugepages-1Gi": "1Gi" })));
      expect(failure?.message).toContain(`mounted dir ${dir} pagesize '2Mi' and requested medium size '1Gi' differ`);
    });
  });

  test("memory volume size: node allocatable, lowered by the pod's memory limit, then by sizeLimit", () => {
    const limited = pod([], [], { containers: [{ name: "c", image: "i", resources: { limits: { memory: "1Gi" } } }] });
    expect(memoryVolumeSize(pod([]), undefined, 4 * GiB)).toBe(4 * GiB);
    expect(memoryVolumeSize(limited, undefined, 4 * GiB)).toBe(GiB);
    expect(memoryVolumeSize(limited, "2Gi", 4 * GiB)).toBe(GiB);
    expect(memoryVolumeSize(limited, "100Mi", 4 * GiB)).toBe(100 * 2 ** 20);
  });

  test("configMap: atomic files, read-only mount, updates on the next setup, upstream's not-found message, optional is empty", async () => {
    const { manager, objects } = setup();
    objects.configMaps.set("ns/app", { data: { a: "1" }, binaryData: {} });
    const p = pod([{ name: "cfg", configMap: { name: "app" } }], [{ name: "cfg", mountPath: "/cfg" }]);
    await manager.setupPod(p);
    const dir = volDir("kubernetes.io~configmap", "cfg");
    expect(readFileSync(join(dir, "a"), "utf8")).toBe("1");
    expect(readlinkSync(join(dir, "a"))).toBe("..data/a");
    objects.configMaps.set("ns/app", { data: { a: "2" }, binaryData: {} });
    await manager.setupPod(p);
    expect(readFileSync(join(dir, "a"), "utf8")).toBe("2");
    expect((await manager.mountsFor(p, p.spec.containers[0]!))[0]?.readonly).toBe(true);
    objects.configMaps.clear();
    expect(await failures(() => manager.setupPod(p))).toEqual([{ volume: "cfg", message: 'configmap "app" not found', mounted: true }]);
    expect(readFileSync(join(dir, "a"), "utf8")).toBe("2"); // a failed refresh leaves the last content
    await manager.setupPod(pod([{ name: "opt", configMap: { name: "app", optional: true } }]));
    expect(existsSync(join(volDir("kubernetes.io~configmap", "opt"), "..data"))).toBe(true);
  });

  test("secret: on a tmpfs, with defaultMode", async () => {
    const { manager, objects, mounter } = setup();
    objects.secrets.set("ns/creds", { data: { password: b64("s3cret") } });
    await manager.setupPod(pod([{ name: "s", secret: { secretName: "creds", defaultMode: 0o400 } }]));
    const dir = volDir("kubernetes.io~secret", "s");
    expect(mounter.mounts.get(dir)?.kind).toBe("tmpfs");
    expect(readFileSync(join(dir, "password"), "utf8")).toBe("s3cret");
    expect(statSync(join(dir, "password")).mode & 0o777).toBe(0o400);
    expect(await failures(() => manager.setupPod(pod([{ name: "t", secret: { secretName: "gone" } }])))).toEqual([
      { volume: "t", message: 'secret "gone" not found', mounted: false },
    ]);
  });

  test("projected: every failing source in one message, bracketed and without duplicates as upstream's aggregate", async () => {
    const { manager } = setup();
    const sources = [{ configMap: { name: "a" } }, { secret: { name: "b" } }, { configMap: { name: "a" } }];
    expect(await failures(() => manager.setupPod(pod([{ name: "p", projected: { sources } }])))).toEqual([
      { volume: "p", message: '[configmap "a" not found, secret "b" not found]', mounted: false },
    ]);
    expect(await failures(() => manager.setupPod(pod([{ name: "q", projected: { sources: [{ configMap: { name: "a" } }] } }])))).toEqual([
      { volume: "q", message: 'configmap "a" not found', mounted: false },
    ]);
  });

  test("projected: clusterTrustBundle and podCertificate sources fail the volume as upstream's managers with their gates off", async () => {
    const { manager } = setup();
    const sources = [
      { clusterTrustBundle: { signerName: "example.com/ca", path: "ca.pem" } },
      { clusterTrustBundle: { path: "x.pem" } },
      { podCertificate: { signerName: "example.com/s" } },
    ];
    expect(await failures(() => manager.setupPod(pod([{ name: "p", projected: { sources } }])))).toEqual([
      {
        volume: "p",
        message:
          "[ClusterTrustBundle projection is not supported in static kubelet mode, ClusterTrustBundle projection requires either name or signerName to be set, unimplemented]",
        mounted: false,
      },
    ]);
  });

  test("projected: token bound to the pod, kube-root-ca.crt and the namespace in one tmpfs volume", async () => {
    const { manager, objects, requested, mounter } = setup();
    objects.configMaps.set("ns/kube-root-ca.crt", { data: { "ca.crt": "CA" }, binaryData: {} });
    const p = pod(
      [
        {
          name: "kube-api-access",
          projected: {
            defaultMode: 0o644,
            sources: [
              { serviceAccountToken: { path: "token", expirationSeconds: 3607 } },
              { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
              { downwardAPI: { items: [{ path: "namespace", fieldRef: { fieldPath: "metadata.namespace" } }] } },
            ],
          },
        },
      ],
      undefined,
      { serviceAccountName: "robot" } as Partial<Pod["spec"]>,
    );
    await manager.setupPod(p);
    const dir = volDir("kubernetes.io~projected", "kube-api-access");
    expect(mounter.mounts.get(dir)?.kind).toBe("tmpfs");
    expect(["token", "ca.crt", "namespace"].map((f) => readFileSync(join(dir, f), "utf8"))).toEqual(["token-1", "CA", "ns"]);
    expect(requested).toEqual([{ namespace: "ns", serviceAccount: "robot", audiences: [], expirationSeconds: 3607, pod: { name: "p", uid: "uid-1" } }]);
  });

  test("a projected token is rewritten in place once the token manager refreshes it (80% of its lifetime)", async () => {
    const clock = new FakeClock();
    let issued = 0;
    const tokens = new TokenManager({ clock, random: () => 0, request: async (s) => ({ token: `jwt-${++issued}`, expiresAt: clock.now() + s.expirationSeconds * 1000 }) });
    const manager = new PodVolumeManager({ rootDir: root, mounter: new FakeMounter(), objects: new FakePodObjects(), tokens, node, clock, logger: memoryLogger().logger });
    const p = pod([{ name: "t", projected: { sources: [{ serviceAccountToken: { path: "token", expirationSeconds: 600 } }] } }]);
    const file = join(volDir("kubernetes.io~projected", "t"), "token");
    await manager.setupPod(p);
    expect(readFileSync(file, "utf8")).toBe("jwt-1");
    clock.advance(470_000);
    await manager.setupPod(p);
    expect(readFileSync(file, "utf8")).toBe("jwt-1");
    clock.advance(11_000); // past 480 s
    await manager.setupPod(p);
    expect(readFileSync(file, "utf8")).toBe("jwt-2");
  });

  test("hostPath: the type is checked and the host path is mounted; other volumes still set up when one fails", async () => {
    const { manager } = setup();
    writeFileSync(join(root, "file"), "x");
    const p = pod(
      [
        { name: "bad", hostPath: { path: join(root, "file"), type: "Directory" } },
        { name: "ok", hostPath: { path: join(root, "file"), type: "File" } },
        { name: "e", emptyDir: {} },
      ],
      [{ name: "ok", mountPath: "/f", readOnly: true }],
      {
        initContainers: [
          {
            name: "init",
            image: "busybox",
            volumeMounts: [
              { name: "bad", mountPath: "/b" },
              { name: "e", mountPath: "/e" },
            ],
          },
        ],
      },
    );
    expect(await failures(() => manager.setupPod(p))).toEqual([{ volume: "bad", message: `hostPath type check failed: ${join(root, "file")} is not a directory`, mounted: false }]);
    expect(existsSync(volDir("kubernetes.io~empty-dir", "e"))).toBe(true);
    expect(await manager.mountsFor(p, p.spec.containers[0]!)).toMatchObject([{ containerPath: "/f", hostPath: join(root, "file"), readonly: true }]);
  });

  test("a volume no container mounts is neither set up nor waited for (upstream skips unused volumes); an ephemeral container's mount counts", async () => {
    const { manager } = setup();
    const volumes = [
      { name: "used", emptyDir: {} },
      { name: "scratch", emptyDir: {} },
      { name: "cfg", configMap: { name: "absent" } },
    ];
    const p = pod(volumes, [{ name: "used", mountPath: "/u" }]);
    await manager.setupPod(p);
    expect(existsSync(volDir("kubernetes.io~empty-dir", "used"))).toBe(true);
    expect(existsSync(volDir("kubernetes.io~empty-dir", "scratch"))).toBe(false);
    const debugged = pod(volumes, [{ name: "used", mountPath: "/u" }], {
      ephemeralContainers: [{ name: "debugger", image: "busybox", volumeMounts: [{ name: "scratch", mountPath: "/s" }] }],
    } as Partial<Pod["spec"]>);
    await manager.setupPod(debugged);
    expect(existsSync(volDir("kubernetes.io~empty-dir", "scratch"))).toBe(true);
  });

  test("an unsupported volume type fails with its name", async () => {
    const { manager } = setup();
    const p = pod([{ name: "nfs", nfs: { server: "x", path: "/" } } as never]);
    expect(await failures(() => manager.setupPod(p))).toEqual([{ volume: "nfs", message: 'volume type "nfs" is not supported by this node', mounted: false }]);
  });

  test("mounts: a missing volume and Bidirectional without privilege are config errors; HostToContainer maps to the CRI", async () => {
    const { manager } = setup();
    const p = pod([{ name: "e", emptyDir: {} }]);
    await manager.setupPod(p);
    const c = (mounts: NonNullable<Pod["spec"]["containers"][number]["volumeMounts"]>, securityContext = {}) => ({ name: "c", image: "i", volumeMounts: mounts, securityContext });
    let error: unknown;
    await manager.mountsFor(p, c([{ name: "nope", mountPath: "/x" }])).catch((e) => (error = e));
    expect(error).toEqual(new VolumeMountError('cannot find volume "nope" to mount into container "c"'));
    error = undefined;
    await manager.mountsFor(p, c([{ name: "e", mountPath: "/x", mountPropagation: "Bidirectional" }])).catch((e) => (error = e));
    expect(String(error)).toContain("Bidirectional mount propagation is available only to privileged containers");
    expect((await manager.mountsFor(p, c([{ name: "e", mountPath: "/x", mountPropagation: "Bidirectional" }], { privileged: true })))[0]?.propagation).toBe(
      MountPropagation.PROPAGATION_BIDIRECTIONAL,
    );
    expect((await manager.mountsFor(p, c([{ name: "e", mountPath: "/x", mountPropagation: "HostToContainer" }])))[0]?.propagation).toBe(
      MountPropagation.PROPAGATION_HOST_TO_CONTAINER,
    );
  });

  test("subPath and subPathExpr bind below volume-subpaths/<volume>/<container>/<index>; an escaping subPath is a config error without detail", async () => {
    const { manager, mounter } = setup();
    const p = pod([{ name: "e", emptyDir: {} }]);
    await manager.setupPod(p);
    const container = {
      name: "c",
      image: "i",
      env: [{ name: "POD", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }],
      volumeMounts: [
        { name: "e", mountPath: "/all" },
        { name: "e", mountPath: "/one", subPath: "one" },
        { name: "e", mountPath: "/mine", subPathExpr: "logs/$(POD)" },
      ],
    };
    const mounts = await manager.mountsFor(p, container);
    expect(mounts.map((m) => m.hostPath)).toEqual([
      volDir("kubernetes.io~empty-dir", "e"),
      join(root, "pods/uid-1/volume-subpaths/e/c/1"),
      join(root, "pods/uid-1/volume-subpaths/e/c/2"),
    ]);
    expect(statSync(join(volDir("kubernetes.io~empty-dir", "e"), "logs/p")).isDirectory()).toBe(true);
    expect(mounter.mounts.size).toBe(2);
    rmSync(join(volDir("kubernetes.io~empty-dir", "e"), "one"), { recursive: true });
    symlinkSync("/", join(volDir("kubernetes.io~empty-dir", "e"), "one"));
    let error: unknown;
    await manager.mountsFor(p, container).catch((e) => (error = e));
    expect(error).toEqual(new VolumeMountError('failed to prepare subPath for volumeMount "e" of container "c"'));
  });

  test("fsGroup: emptyDir and projected files get the group and group permissions", async () => {
    const { manager, objects } = setup();
    objects.configMaps.set("ns/app", { data: { a: "1" }, binaryData: {} });
    const p = pod(
      [
        { name: "e", emptyDir: {} },
        { name: "cfg", configMap: { name: "app", defaultMode: 0o600 } },
      ],
      undefined,
      { securityContext: { fsGroup: 1234 } },
    );
    await manager.setupPod(p);
    const e = statSync(volDir("kubernetes.io~empty-dir", "e"));
    expect([e.gid, e.mode & 0o7777]).toEqual([1234, 0o2777]);
    const f = statSync(join(volDir("kubernetes.io~configmap", "cfg"), "a"));
    expect([f.gid, f.mode & 0o777]).toEqual([1234, 0o640]);
    // The group bits the ownership added are no change: a resync does not rewrite the volume.
    const dataOf = () => readlinkSync(join(volDir("kubernetes.io~configmap", "cfg"), "..data"));
    const written = dataOf();
    await manager.setupPod(p);
    expect(dataOf()).toBe(written);
  });

  test("a projected token is 0600 and owned by the pod's one runAsUser, 0640 with fsGroup, defaultMode otherwise (upstream collectData)", async () => {
    const { manager } = setup();
    const token = (name: string) => ({ name, projected: { sources: [{ serviceAccountToken: { path: "token", expirationSeconds: 3607 } }] } });
    const statOf = (name: string) => {
      const st = statSync(join(volDir("kubernetes.io~projected", name), "token"));
      return [st.uid, st.gid, st.mode & 0o777];
    };
    await manager.setupPod(pod([token("plain")]));
    expect(statOf("plain")).toEqual([0, 0, 0o644]);
    await manager.setupPod(pod([token("owned")], undefined, { securityContext: { runAsUser: 1000 } }));
    expect(statOf("owned")).toEqual([1000, 0, 0o600]);
    await manager.setupPod(pod([token("grouped")], undefined, { securityContext: { fsGroup: 2000 } }));
    expect(statOf("grouped")).toEqual([0, 2000, 0o640]);
    // Containers that run as different users: no owner, the volume's defaultMode.
    const mixed = { securityContext: { runAsUser: 1000 }, initContainers: [{ name: "i", image: "busybox", securityContext: { runAsUser: 0 } }] };
    await manager.setupPod(pod([token("mixed")], undefined, mixed));
    expect(statOf("mixed")).toEqual([0, 0, 0o644]);
  });

  test("teardown unmounts first, removes the pod directory without following symlinks, forgets tokens; orphans likewise", async () => {
    const { manager, mounter, forgotten } = setup();
    const outside = join(root, "precious");
    writeFileSync(outside, "keep");
    const p = pod([{ name: "m", emptyDir: { medium: "Memory" } }]);
    await manager.setupPod(p);
    symlinkSync(outside, join(volDir("kubernetes.io~empty-dir", "m"), "link"));
    await manager.setupPod({ ...p, metadata: { ...p.metadata, uid: "orphan" } });
    await manager.teardownPod("uid-1");
    expect(existsSync(join(root, "pods/uid-1"))).toBe(false);
    expect(readFileSync(outside, "utf8")).toBe("keep");
    expect(forgotten).toEqual(["uid-1"]);
    await manager.cleanupOrphans((uid) => uid !== "orphan");
    expect(existsSync(join(root, "pods/orphan"))).toBe(false);
    expect(mounter.mounts.size).toBe(0);
  });

  test("teardown refuses to delete while something stays mounted", async () => {
    const { manager, mounter } = setup();
    await manager.setupPod(pod([{ name: "m", emptyDir: { medium: "Memory" } }]));
    mounter.failNext = new Error("device busy");
    let error: unknown;
    await manager.teardownPod("uid-1").catch((e) => (error = e));
    expect(String(error)).toContain("device busy");
    expect(lstatSync(volDir("kubernetes.io~empty-dir", "m")).isDirectory()).toBe(true);
  });
});
