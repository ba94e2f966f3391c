// Volumes end to end: one agent in cluster mode (a real control plane and a
// real containerd) runs static pods for emptyDir, hostPath and subPath, and
// API pods for configMap, secret and projected volumes. Everything is
// checked from inside the containers (exec) or through the API server.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCriClient } from "../../src/cri/client.ts";
import { ContainerFilter, ContainerState, type CriService } from "../../src/cri/index.ts";
import { createLogger } from "../../src/util/log.ts";
import { eventually, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { adminKubectl, startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "vol-node";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
let cri: CriService;
let hostDir: string;

const { kubectl } = adminKubectl(() => cp);
const apply = async (obj: unknown) => kubectl("apply", "-f", writeJson(obj));
let files = 0;
const writeJson = (obj: unknown) => {
  const file = join(cp.dir, `obj-${++files}.json`);
  writeFileSync(file, JSON.stringify(obj));
  return file;
};
const apiPod = (name: string, command: string, spec: Record<string, unknown> = {}, mounts: unknown[] = []) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default", labels: { app: name } },
  spec: {
    terminationGracePeriodSeconds: 1,
    containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sh", "-c", command], volumeMounts: mounts }],
    ...spec,
  },
});
const staticPod = (name: string, command: string, volumes: unknown[], mounts: unknown[], extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default" },
    spec: {
      terminationGracePeriodSeconds: 1,
      volumes,
      containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sh", "-c", command], volumeMounts: mounts, ...extra }],
    },
  });

/** The running container of a pod (by pod name as the runtime labels it). */
async function runningContainer(podName: string): Promise<string> {
  return eventually(
    `${podName} running`,
    async () => {
      const list = await cri.listContainers(ContainerFilter.create({ labelSelector: { "io.kubernetes.pod.name": podName } }));
      return list.find((c) => c.state === ContainerState.CONTAINER_RUNNING)?.id;
    },
    60_000,
  );
}
async function sh(containerId: string, script: string): Promise<string> {
  const r = await cri.execSync(containerId, ["sh", "-c", script], 20);
  const out = new TextDecoder().decode(r.stdout);
  if (r.exitCode !== 0) throw new Error(`${script}: exit ${r.exitCode}: ${new TextDecoder().decode(r.stderr)}${out}`);
  return out;
}
const eventMessages = async (pod: string, reason: string): Promise<string[]> => {
  const list = JSON.parse(await kubectl("get", "events", "--field-selector", `involvedObject.name=${pod},reason=${reason}`, "-o", "json")) as { items: { message: string }[] };
  return list.items.map((e) => e.message);
};

beforeAll(async () => {
  requireRoot();
  [ctd, cp] = await startTogether([startContainerd({ name: "volumes" }), startControlPlane({ name: "volumes" })]);
  cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
  hostDir = join(ctd.dir, "host");
  mkdirSync(join(hostDir, "a-dir"), { recursive: true });
  writeFileSync(join(hostDir, "a-file"), "host file\n");
  const kubeconfig = await cp.nodeKubeconfig(NODE);
  // syncFrequency 3s: configMap and secret changes reach running pods within it.
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${kubeconfig}`, "--node-ip=127.0.0.1"],
    extraConfig: { syncFrequency: "3s", volumeStatsAggPeriod: "2s" },
  });
  await eventually("node registered", async () => (await cp.kubectl(["get", "node", NODE])).code === 0, 60_000);
}, 180_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  cri?.close();
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

describe("volumes on a real containerd and control plane", () => {
  test("emptyDir on disk is shared by the pod's containers and lives under <rootDir>/pods/<uid>/volumes/kubernetes.io~empty-dir", async () => {
    writeFileSync(
      join(agent.manifests, "shared.json"),
      JSON.stringify({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "shared", namespace: "default" },
        spec: {
          terminationGracePeriodSeconds: 1,
          volumes: [{ name: "scratch", emptyDir: {} }],
          containers: [
            {
              name: "writer",
              image: ctd.busyboxImage,
              imagePullPolicy: "IfNotPresent",
              command: ["sh", "-c", "echo from-writer > /data/msg; sleep 3600"],
              volumeMounts: [{ name: "scratch", mountPath: "/data" }],
            },
            {
              name: "reader",
              image: ctd.busyboxImage,
              imagePullPolicy: "IfNotPresent",
              command: ["sleep", "3600"],
              volumeMounts: [{ name: "scratch", mountPath: "/in", readOnly: true }],
            },
          ],
        },
      }),
    );
    const reader = await eventually(
      "reader running",
      async () => {
        const list = await cri.listContainers(ContainerFilter.create({ labelSelector: { "io.kubernetes.pod.name": `shared-${NODE}`, "io.kubernetes.container.name": "reader" } }));
        return list.find((c) => c.state === ContainerState.CONTAINER_RUNNING)?.id;
      },
      60_000,
    );
    expect(await eventually("message", async () => (await sh(reader, "cat /in/msg 2>/dev/null || true")).trim())).toBe("from-writer");
    // The reader's mount is read-only.
    expect((await cri.execSync(reader, ["sh", "-c", "touch /in/x"], 10)).exitCode).not.toBe(0);
    const uid = (await agent.pods()).items.find((p) => p.metadata.name === `shared-${NODE}`)!.metadata.uid;
    expect(existsSync(join(agent.dir, "root", "pods", uid, "volumes", "kubernetes.io~empty-dir", "scratch", "msg"))).toBe(true);
  });

  test("emptyDir medium Memory is a tmpfs of its sizeLimit inside the container", async () => {
    writeFileSync(
      join(agent.manifests, "mem.json"),
      staticPod("mem", "sleep 3600", [{ name: "m", emptyDir: { medium: "Memory", sizeLimit: "16Mi" } }], [{ name: "m", mountPath: "/mem" }]),
    );
    const id = await runningContainer(`mem-${NODE}`);
    const line = (await sh(id, "grep ' /mem ' /proc/mounts")).trim();
    expect(line).toMatch(/^tmpfs \/mem tmpfs /);
    expect(line).toContain("size=16384k");
  });

  test("fsGroup owns emptyDir and downwardAPI volumes; downwardAPI files hold the pod's metadata", async () => {
    writeFileSync(
      join(agent.manifests, "fsg.json"),
      JSON.stringify({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "fsg", namespace: "default", labels: { tier: "db", app: "fsg" } },
        spec: {
          terminationGracePeriodSeconds: 1,
          securityContext: { fsGroup: 2000, fsGroupChangePolicy: "OnRootMismatch" },
          volumes: [
            { name: "data", emptyDir: {} },
            {
              name: "info",
              downwardAPI: {
                items: [
                  { path: "labels", fieldRef: { fieldPath: "metadata.labels" } },
                  { path: "mem", resourceFieldRef: { containerName: "main", resource: "limits.memory", divisor: "1Mi" } },
                ],
              },
            },
          ],
          containers: [
            {
              name: "main",
              image: ctd.busyboxImage,
              imagePullPolicy: "IfNotPresent",
              command: ["sleep", "3600"],
              resources: { limits: { memory: "64Mi" } },
              volumeMounts: [
                { name: "data", mountPath: "/data" },
                { name: "info", mountPath: "/info" },
              ],
            },
          ],
        },
      }),
    );
    const id = await runningContainer(`fsg-${NODE}`);
    expect((await sh(id, "stat -c '%g %a' /data")).trim()).toBe("2000 2777");
    expect((await sh(id, "stat -L -c '%g %a' /info/labels")).trim()).toBe("2000 644");
    expect(await sh(id, "cat /info/labels")).toBe('app="fsg"\ntier="db"');
    expect(await sh(id, "cat /info/mem")).toBe("64");
  });

  test("hostPath types are checked as upstream: mismatches fail with its message, *OrCreate create", async () => {
    const missing = join(hostDir, "missing-dir");
    writeFileSync(
      join(agent.manifests, "hp-bad.json"),
      staticPod(
        "hp-bad",
        "sleep 3600",
        [
          { name: "d", hostPath: { path: missing, type: "Directory" } },
          { name: "f", hostPath: { path: join(hostDir, "a-dir"), type: "File" } },
        ],
        // Both mounted: a volume no container uses is not set up (nor checked), as upstream.
        [
          { name: "d", mountPath: "/d" },
          { name: "f", mountPath: "/f" },
        ],
      ),
    );
    writeFileSync(
      join(agent.manifests, "hp-good.json"),
      staticPod(
        "hp-good",
        "sleep 3600",
        [
          { name: "made", hostPath: { path: join(hostDir, "made/deep"), type: "DirectoryOrCreate" } },
          { name: "touched", hostPath: { path: join(hostDir, "touched"), type: "FileOrCreate" } },
          { name: "file", hostPath: { path: join(hostDir, "a-file"), type: "File" } },
          { name: "chr", hostPath: { path: "/dev/null", type: "CharDevice" } },
        ],
        [
          { name: "made", mountPath: "/made" },
          { name: "touched", mountPath: "/touched" },
          { name: "file", mountPath: "/etc/from-host" },
          { name: "chr", mountPath: "/host-null" },
        ],
      ),
    );
    const id = await runningContainer(`hp-good-${NODE}`);
    expect((await sh(id, "cat /etc/from-host")).trim()).toBe("host file");
    expect(existsSync(join(hostDir, "made/deep")) && existsSync(join(hostDir, "touched"))).toBe(true);
    const bad = (await agent.pods()).items.find((p) => p.metadata.name === `hp-bad-${NODE}`);
    expect(bad?.status.phase).toBe("Pending");
    const events = await eventually("FailedMount event on the mirror pod", async () => {
      const m = await eventMessages(`hp-bad-${NODE}`, "FailedMount");
      return m.length ? m : undefined;
    });
    expect(events).toContain(`MountVolume.SetUp failed for volume "d" : hostPath type check failed: ${missing} is not a directory`);
    expect(events).toContain(`MountVolume.SetUp failed for volume "f" : hostPath type check failed: ${join(hostDir, "a-dir")} is not a file`);
  });

  test("mountPropagation: a host mount below a HostToContainer volume appears in the container; a privileged container's mount in a Bidirectional one reaches the host", async () => {
    writeFileSync(
      join(agent.manifests, "prop.json"),
      staticPod(
        "prop",
        "mkdir -p /bi/inside && mount -t tmpfs tmpfs /bi/inside && echo from-container > /bi/inside/f; sleep 3600",
        [
          { name: "h2c", emptyDir: {} },
          { name: "bi", emptyDir: {} },
        ],
        [
          { name: "h2c", mountPath: "/h2c", mountPropagation: "HostToContainer" },
          { name: "bi", mountPath: "/bi", mountPropagation: "Bidirectional" },
        ],
        { securityContext: { privileged: true } },
      ),
    );
    const id = await runningContainer(`prop-${NODE}`);
    const uid = (await agent.pods()).items.find((p) => p.metadata.name === `prop-${NODE}`)!.metadata.uid;
    const volumes = join(agent.dir, "root", "pods", uid, "volumes", "kubernetes.io~empty-dir");
    const hostSide = join(volumes, "h2c", "late");
    mkdirSync(hostSide);
    const mount = Bun.spawnSync(["mount", "-t", "tmpfs", "tmpfs", hostSide]);
    expect(mount.exitCode).toBe(0);
    writeFileSync(join(hostSide, "f"), "from-host\n");
    expect((await sh(id, "cat /h2c/late/f")).trim()).toBe("from-host");
    expect(await eventually("the container's mount on the host", () => existsSync(join(volumes, "bi", "inside", "f")))).toBe(true);
  });

  test("a subPath that the container turns into a symlink to / is refused on restart", async () => {
    // First run: replace the subPath directory by a symlink to the host's root, then crash.
    writeFileSync(
      join(agent.manifests, "escape.json"),
      staticPod(
        "escape",
        "if [ -e /vol/started ]; then ls /sub; sleep 3600; fi; touch /vol/started; rmdir /vol/sub && ln -s / /vol/sub; exit 1",
        [{ name: "vol", emptyDir: {} }],
        [
          { name: "vol", mountPath: "/vol" },
          { name: "vol", mountPath: "/sub", subPath: "sub" },
        ],
      ),
    );
    const status = await eventually(
      "escape refused with CreateContainerConfigError",
      async () => {
        const p = (await agent.pods()).items.find((p) => p.metadata.name === `escape-${NODE}`);
        const waiting = p?.status.containerStatuses?.[0]?.state["waiting"] as { reason?: string; message?: string } | undefined;
        return waiting?.reason === "CreateContainerConfigError" ? waiting : undefined;
      },
      45_000,
    );
    expect(status.message).toBe(`failed to prepare subPath for volumeMount "vol" of container "main"`);
    const all = await cri.listContainers(ContainerFilter.create({ labelSelector: { "io.kubernetes.pod.name": `escape-${NODE}` } }));
    expect(all.length).toBe(1); // the second start never happened
  }, 60_000);

  test("a configMap update reaches the running container; a reader loop never sees a mix of old and new files", async () => {
    const cm = (v: number) => ({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "app-config", namespace: "default" }, data: { a: `v${v}`, b: `v${v}`, c: `v${v}` } });
    await apply(cm(1));
    // Each pass reads the three files through one resolution of ..data (what a consistent reader does) and records a mix.
    // The count is renamed into place: a plain `>` truncates first, and a read in that instant sees an empty file (the likely cause of one CI failure whose message was not kept).
    const loop =
      'n=0; while true; do if cd /cfg/..data 2>/dev/null; then a=$(cat a 2>/dev/null); b=$(cat b 2>/dev/null); c=$(cat c 2>/dev/null); cd /; if [ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ]; then n=$((n+1)); echo $n > /tmp/reads.new; mv /tmp/reads.new /tmp/reads; if [ "$a" != "$b" ] || [ "$b" != "$c" ]; then echo "$a $b $c" >> /tmp/mix; fi; fi; fi; done';
    await apply(apiPod("cm-reader", loop, { volumes: [{ name: "cfg", configMap: { name: "app-config" } }], nodeName: NODE }, [{ name: "cfg", mountPath: "/cfg" }]));
    const id = await runningContainer("cm-reader");
    expect((await sh(id, "cat /cfg/a")).trim()).toBe("v1");
    for (let v = 2; v <= 5; v++) {
      await apply(cm(v));
      await eventually(`v${v} inside the container`, async () => (await sh(id, "cat /cfg/a")).trim() === `v${v}`, 20_000, 200);
    }
    expect(Number((await sh(id, "cat /tmp/reads")).trim())).toBeGreaterThan(10);
    expect((await sh(id, "cat /tmp/mix 2>/dev/null || true")).trim()).toBe("");
    // The mount is read-only and the files are symlinks through ..data.
    expect((await sh(id, "readlink /cfg/a")).trim()).toBe("..data/a");
    expect((await cri.execSync(id, ["sh", "-c", "echo x > /cfg/new"], 10)).exitCode).not.toBe(0);
  }, 120_000);

  test("an emptyDir past its sizeLimit gets the pod evicted with upstream's message", async () => {
    await apply(
      apiPod("hog", "dd if=/dev/zero of=/data/fill bs=1M count=4 && sleep 3600", { volumes: [{ name: "data", emptyDir: { sizeLimit: "1Mi" } }], nodeName: NODE }, [
        { name: "data", mountPath: "/data" },
      ]),
    );
    const status = await eventually(
      "hog evicted",
      async () => {
        const p = JSON.parse(await kubectl("get", "pod", "hog", "-o", "json"));
        return p.status?.reason === "Evicted" ? p.status : undefined;
      },
      60_000,
      500,
    );
    expect(status.phase).toBe("Failed");
    expect(status.message).toContain('Usage of EmptyDir volume "data" exceeds the limit "1Mi".');
  }, 70_000);

  test("a secret volume is a tmpfs inside the container, with defaultMode applied", async () => {
    await apply({ apiVersion: "v1", kind: "Secret", metadata: { name: "creds", namespace: "default" }, stringData: { password: "s3cret" } });
    await apply(apiPod("sec", "sleep 3600", { volumes: [{ name: "s", secret: { secretName: "creds", defaultMode: 0o400 } }], nodeName: NODE }, [{ name: "s", mountPath: "/sec" }]));
    const id = await runningContainer("sec");
    expect((await sh(id, "grep ' /sec ' /proc/mounts")).trim()).toMatch(/^tmpfs \/sec tmpfs ro[, ]/);
    expect((await sh(id, "cat /sec/password")).trim()).toBe("s3cret");
    expect((await sh(id, "stat -L -c %a /sec/password")).trim()).toBe("400");
  });

  test("a missing configMap is a FailedMount event with upstream's message", async () => {
    await apply(apiPod("no-cm", "sleep 3600", { volumes: [{ name: "cfg", configMap: { name: "absent" } }], nodeName: NODE }, [{ name: "cfg", mountPath: "/cfg" }]));
    const messages = await eventually("FailedMount", async () => {
      const m = await eventMessages("no-cm", "FailedMount");
      return m.length ? m : undefined;
    });
    expect(messages).toContain(`MountVolume.SetUp failed for volume "cfg" : configmap "absent" not found`);
  });

  test("the projected service account volume (token, kube-root-ca.crt, namespace) works; the token passes TokenReview", async () => {
    // The ServiceAccount admission plugin adds kube-api-access-* to every API pod.
    await apply(apiPod("sa", "sleep 3600", { nodeName: NODE }));
    const id = await runningContainer("sa");
    const dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    expect((await sh(id, `cat ${dir}/namespace`)).trim()).toBe("default");
    expect(await sh(id, `cat ${dir}/ca.crt`)).toContain("BEGIN CERTIFICATE");
    const token = (await sh(id, `cat ${dir}/token`)).trim();
    const review = JSON.parse(await kubectl("create", "-o", "json", "-f", writeJson({ apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token } }))) as {
      status: { authenticated?: boolean; user?: { username: string; extra?: Record<string, string[]> } };
    };
    expect(review.status.authenticated).toBe(true);
    expect(review.status.user?.username).toBe("system:serviceaccount:default:default");
    expect(review.status.user?.extra?.["authentication.kubernetes.io/pod-name"]).toEqual(["sa"]);
    expect((await sh(id, `grep ' ${dir} ' /proc/mounts`)).trim()).toMatch(/^tmpfs /);
  });

  test("the token of a pod whose containers all run as one user is 0600 and theirs (upstream FsUser), and they can read it", async () => {
    await apply(apiPod("sa-user", "sleep 3600", { nodeName: NODE, securityContext: { runAsUser: 1000 } }));
    const id = await runningContainer("sa-user");
    const token = "/var/run/secrets/kubernetes.io/serviceaccount/token";
    expect((await sh(id, `stat -L -c '%u %a' ${token}`)).trim()).toBe("1000 600");
    expect((await sh(id, `cat ${token}`)).trim().split(".").length).toBe(3);
  });

  test("an agent restart (kill -9) reuses the volumes of the pods it adopts: same containers, no rewrite, no second tmpfs", async () => {
    const uidOf = async (name: string) => JSON.parse(await kubectl("get", "pod", name, "-o", "json")).metadata.uid as string;
    const cmDir = join(agent.dir, "root", "pods", await uidOf("cm-reader"), "volumes", "kubernetes.io~configmap", "cfg");
    const saRoot = join(agent.dir, "root", "pods", await uidOf("sa"), "volumes", "kubernetes.io~projected");
    const mountsUnder = async (dir: string) => (await Bun.file("/proc/self/mountinfo").text()).split("\n").filter((l) => l.split(" ")[4]?.startsWith(dir)).length;
    const before = { data: readlinkSync(join(cmDir, "..data")), reader: await runningContainer("cm-reader"), saMounts: await mountsUnder(saRoot) };
    expect(before.saMounts).toBe(1);
    await agent.kill("SIGKILL");
    agent.start();
    await eventually("agent serves /pods again", async () => (await agent.pods()).items.length > 0, 30_000);
    await Bun.sleep(5_000); // more than one syncFrequency: every adopted pod was synced again
    expect(readlinkSync(join(cmDir, "..data"))).toBe(before.data);
    expect(await mountsUnder(saRoot)).toBe(1);
    expect(await runningContainer("cm-reader")).toBe(before.reader);
    // The restarted agent watches the configMap again.
    await apply({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "app-config", namespace: "default" }, data: { a: "v6", b: "v6", c: "v6" } });
    await eventually("v6 after the restart", async () => (await sh(before.reader, "cat /cfg/a")).trim() === "v6", 20_000, 200);
  }, 60_000);

  test("a configMap deleted under a running pod: FailedMount events, the container keeps running with the last content", async () => {
    const reader = await runningContainer("cm-reader");
    await kubectl("delete", "configmap", "app-config");
    const messages = await eventually("FailedMount for cm-reader", async () => {
      const m = await eventMessages("cm-reader", "FailedMount");
      return m.length ? m : undefined;
    });
    expect(messages).toContain(`MountVolume.SetUp failed for volume "cfg" : configmap "app-config" not found`);
    expect(await runningContainer("cm-reader")).toBe(reader);
    expect((await sh(reader, "cat /cfg/a")).trim()).toBe("v6");
  });

  test("a deleted pod's volumes are unmounted and its directory removed", async () => {
    const uid = JSON.parse(await kubectl("get", "pod", "sec", "-o", "json")).metadata.uid as string;
    const podDir = join(agent.dir, "root", "pods", uid);
    expect(existsSync(podDir)).toBe(true);
    await kubectl("delete", "pod", "sec", "--wait=false");
    await eventually("pod dir removed", () => !existsSync(podDir), 30_000);
    const mounts = await Bun.file("/proc/self/mountinfo").text();
    expect(mounts).not.toContain(podDir);
  });
});
