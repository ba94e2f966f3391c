// Device plugins with the real sample device plugin of k8s.io/kubernetes
// (test/images/sample-device-plugin, built from Go modules by
// scripts/controlplane/build.sh --with-sample-device-plugin, on first use), a
// real control plane and containerd. The plugin registers two devices of
// example.com/resource; its Allocate answers a mount of /tmp/<device> per
// device. It dials the hard-coded /var/lib/kubelet/device-plugins/kubelet.sock,
// so it runs in a mount namespace of its own where that directory is the
// agent's <rootDir>/device-plugins.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { FakeDevicePlugin } from "../../src/devices/fake-plugin.ts";
import { PodResourcesListerClient } from "../../src/devices/gen/podresources/api.client.ts";
import { dialUnix } from "../../src/util/grpc.ts";
import { eventually, freePort, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";
import { adminKubectl, startControlPlane, type ControlPlaneHandle } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";

const NODE = "dp-node";
const RESOURCE = "example.com/resource";
const PREFERRED = "example.com/preferred";
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let agent: AgentHandle;
let plugin: Subprocess | undefined;
let pluginLog: string;
let out: string;

const { kubectl, getJson, tryJson, apply } = adminKubectl(() => cp);

/** The sample plugin's binary: built once into the control plane's cache, then reused. */
function samplePluginBinary(): string {
  const script = resolve(import.meta.dir, "../../scripts/controlplane/build.sh");
  const r = Bun.spawnSync(["bash", script, "--with-sample-device-plugin"], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`build.sh --with-sample-device-plugin failed:\n${r.stderr.toString()}`);
  return join(r.stdout.toString().trim().split("\n").pop()!, "sample-device-plugin");
}

function startPlugin(binary: string): Subprocess {
  const dir = join(agent.dir, "root", "device-plugins");
  const fd = openSync(pluginLog, "a");
  const p = Bun.spawn(
    [
      "unshare",
      "--mount",
      "--propagation",
      "private",
      "sh",
      "-c",
      'mkdir -p /var/lib/kubelet/device-plugins && mount --bind "$1" /var/lib/kubelet/device-plugins && exec "$2" --v=2',
      "sh",
      dir,
      binary,
    ],
    { stdout: fd, stderr: fd, env: { ...process.env, PLUGIN_SOCK_DIR: "/var/lib/kubelet/device-plugins/" } },
  );
  process.once("exit", () => p.kill("SIGKILL"));
  return p;
}

const capacity = async () => {
  const n = await tryJson("node", NODE);
  return { capacity: n?.status?.capacity?.[RESOURCE], allocatable: n?.status?.allocatable?.[RESOURCE] };
};

/** A pod asking `n` devices that writes the device files it sees into `out/<name>`. */
const devicePod = (name: string, n: number, extra: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: {
    terminationGracePeriodSeconds: 1,
    containers: [
      {
        name: "main",
        image: ctd.busyboxImage,
        imagePullPolicy: "IfNotPresent",
        command: ["sh", "-c", `ls -d /tmp/Dev-* > /out/${name} 2>&1; sleep 3600`],
        resources: { limits: { [RESOURCE]: String(n) } },
        volumeMounts: [{ name: "out", mountPath: "/out" }],
      },
    ],
    volumes: [{ name: "out", hostPath: { path: out, type: "Directory" } }],
    ...extra,
  },
});

const checkpoint = () =>
  JSON.parse(readFileSync(join(agent.dir, "root", "device-plugins", "kubelet_internal_checkpoint"), "utf8")).Data.PodDeviceEntries as {
    PodUID: string;
    DeviceIDs: Record<string, string[]>;
  }[];
const seen = (name: string) => (existsSync(join(out, name)) ? readFileSync(join(out, name), "utf8").trim() : undefined);
let binary: string;
let kubeletPort: number;

beforeAll(async () => {
  requireRoot();
  binary = samplePluginBinary();
  [ctd, cp] = await startTogether([startContainerd({ name: "devices" }), startControlPlane({ name: "devices" })]);
  kubeletPort = await freePort();
  agent = await startAgent(ctd, {
    nodeName: NODE,
    extraArgs: [`--kubeconfig=${await cp.nodeKubeconfig(NODE)}`, "--node-ip=127.0.0.1"],
    // /metrics on 10250 for the cluster admin's client certificate.
    extraConfig: {
      port: kubeletPort,
      authentication: { x509: { clientCAFile: cp.caFile }, webhook: { enabled: true }, anonymous: { enabled: false } },
      authorization: { mode: "Webhook" },
    },
  });
  out = join(agent.dir, "out");
  mkdirSync(out, { recursive: true });
  pluginLog = join(agent.dir, "sample-device-plugin.log");
  await eventually("device plugin socket", () => existsSync(join(agent.dir, "root", "device-plugins", "kubelet.sock")), 60_000);
  plugin = startPlugin(binary);
}, 1_800_000);

afterAll(async () => {
  plugin?.kill("SIGTERM");
  await plugin?.exited;
  await agent?.kill("SIGKILL");
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

const pluginTail = () => (existsSync(pluginLog) ? readFileSync(pluginLog, "utf8").split("\n").slice(-15).join("\n") : "");

describe("device plugins with the sample device plugin", () => {
  test("its two devices appear in the node's capacity and allocatable", async () => {
    await eventually(
      "example.com/resource: 2",
      async () => {
        const c = await capacity();
        return c.capacity === "2" && c.allocatable === "2";
      },
      60_000,
    ).catch((e) => {
      throw new Error(`${(e as Error).message}\nplugin log:\n${pluginTail()}\n${agent.describe()}`);
    });
  }, 90_000);

  test("the registration is counted in upstream's kubelet_device_plugin_registration_total", async () => {
    const pki = join(cp.dir, "pki");
    const metrics = async () => {
      const res = await fetch(`https://127.0.0.1:${kubeletPort}/metrics`, {
        tls: { cert: readFileSync(join(pki, "admin.crt"), "utf8"), key: readFileSync(join(pki, "admin.key"), "utf8"), rejectUnauthorized: false },
      } as RequestInit);
      return res.status === 200 ? await res.text() : undefined;
    };
    const text = await eventually("/metrics", metrics);
    expect(text).toMatch(/^kubelet_device_plugin_registration_total\{resource_name="example\.com\/resource"\} [1-9]/m);
  }, 60_000);

  test("a scheduled pod asking one device gets its mount", async () => {
    await apply(devicePod("one", 1));
    const pod = await eventually(
      "pod one Running",
      async () => {
        const p = await tryJson("pod", "one");
        return p?.status?.phase === "Running" ? p : undefined;
      },
      90_000,
    );
    expect(pod.spec.nodeName).toBe(NODE);
    const files = await eventually("pod one wrote what it sees", () => seen("one"));
    expect(files).toMatch(/^\/tmp\/Dev-[12]$/);
    const entries = checkpoint().filter((e) => e.PodUID === pod.metadata.uid);
    expect(entries.map((e) => Object.values(e.DeviceIDs).flat())).toEqual([[files.slice("/tmp/".length)]]);

    // The pod resources API reports it, and what the node can give.
    const client = new PodResourcesListerClient(dialUnix(join(agent.dir, "root", "pod-resources", "kubelet.sock")));
    const listed = (await client.list({}).response).podResources.find((p) => p.name === "one");
    expect(listed?.containers[0]?.devices).toEqual([{ resourceName: RESOURCE, deviceIds: [files.slice("/tmp/".length)] }]);
    expect((await client.getAllocatableResources({}).response).devices).toEqual([
      { resourceName: RESOURCE, deviceIds: ["Dev-1"] },
      { resourceName: RESOURCE, deviceIds: ["Dev-2"] },
    ]);
  }, 120_000);

  test("a pod bound to the node asking more devices than exist is rejected with upstream's reason and never runs", async () => {
    await apply(devicePod("three", 3, { nodeName: NODE }));
    const pod = await eventually(
      "pod three Failed",
      async () => {
        const p = await tryJson("pod", "three");
        return p?.status?.phase === "Failed" ? p : undefined;
      },
      60_000,
    );
    expect(pod.status.reason).toBe("UnexpectedAdmissionError");
    expect(pod.status.message).toBe("Allocate failed due to requested number of devices unavailable for example.com/resource. Requested: 3, Available: 1, which is unexpected");
    expect(seen("three")).toBeUndefined();
    // Gone, so the scheduler does not count its request against the node.
    await kubectl("delete", "pod", "three", "--wait=false");
  }, 90_000);

  test("a static pod asking more devices than exist is rejected the same way", async () => {
    const manifest = devicePod("static-three", 3);
    writeFileSync(
      join(agent.manifests, "static-three.json"),
      JSON.stringify({ ...manifest, spec: { ...manifest.spec, volumes: [], containers: [{ ...manifest.spec.containers[0], volumeMounts: [] }] } }),
    );
    const pod = await eventually(
      "static pod rejected",
      async () => {
        const p = (await agent.pods()).items.find((i) => i.metadata.name === `static-three-${NODE}`) as any;
        return p?.status?.phase === "Failed" ? p : undefined;
      },
      60_000,
    );
    expect(pod.status.reason).toBe("UnexpectedAdmissionError");
    expect(pod.status.message).toContain("requested number of devices unavailable for example.com/resource. Requested: 3");
    rmSync(join(agent.manifests, "static-three.json"));
  }, 90_000);

  test("after an agent restart the allocation is the same, and the plugin registers again", async () => {
    const before = checkpoint();
    const one = await getJson("pod", "one");
    const held = seen("one")!.slice("/tmp/".length);
    const registrations = () => (agent.log().match(/device plugin registered\b/g) ?? []).length;
    const registeredBefore = registrations();
    await agent.kill("SIGTERM");
    agent.start();
    // The sample plugin sees kubelet.sock created again and registers anew (it retries every 10 s). Until then the
    // restarted agent has no healthy device (a pod arriving meanwhile is refused, as upstream), and the Node may still
    // show the count from before the restart: wait for the new registration itself.
    await eventually(
      "example.com/resource registered again and allocatable",
      async () => registrations() > registeredBefore && (await capacity()).allocatable === "2",
      90_000,
    ).catch((e) => {
      throw new Error(`${(e as Error).message}\nplugin log:\n${pluginTail()}\n${agent.describe()}`);
    });
    expect(checkpoint().filter((e) => e.PodUID === one.metadata.uid)).toEqual(before.filter((e) => e.PodUID === one.metadata.uid));
    // The running pod kept its container; a new pod gets the other device, not the held one.
    expect((await getJson("pod", "one")).status.containerStatuses[0].restartCount).toBe(0);
    await apply(devicePod("two", 1));
    await eventually("pod two Running", async () => (await tryJson("pod", "two"))?.status?.phase === "Running", 90_000).catch(async (e) => {
      const events = await kubectl("get", "events", "--field-selector", "involvedObject.name=two", "-o", "custom-columns=REASON:.reason,MESSAGE:.message");
      throw new Error(`${(e as Error).message}\npod two: ${JSON.stringify((await tryJson("pod", "two"))?.status)}\n${events}\n${agent.describe()}`);
    });
    const other = await eventually("pod two wrote what it sees", () => seen("two"));
    expect(other).toBe(held === "Dev-1" ? "/tmp/Dev-2" : "/tmp/Dev-1");
  }, 180_000);

  test("a plugin offering GetPreferredAllocation chooses the container's device; it is checkpointed and reported with its NUMA node", async () => {
    // A plugin in this process: three devices on NUMA node 0 whose GetPreferredAllocation answers the highest IDs,
    // where the agent's own choice is the lowest.
    const dir = join(agent.dir, "root", "device-plugins");
    const hostDir = join(agent.dir, "pref-mounts");
    mkdirSync(hostDir, { recursive: true });
    for (const id of ["p1", "p2", "p3"]) writeFileSync(join(hostDir, id), id);
    const asked: { available: string[]; mustInclude: string[]; size: number }[] = [];
    const pref = new FakeDevicePlugin({
      dir,
      resource: PREFERRED,
      endpoint: "preferred.sock",
      hostDir,
      devices: ["p1", "p2", "p3"].map((id) => ({ id, numa: [0] })),
      preferredAllocation: (available, mustInclude, size) => {
        asked.push({ available, mustInclude, size });
        return [...available].sort().reverse().slice(0, size);
      },
    });
    await pref.serve();
    try {
      await pref.register();
      await eventually("example.com/preferred allocatable", async () => (await tryJson("node", NODE))?.status?.allocatable?.[PREFERRED] === "3", 60_000);
      const manifest = devicePod("pref", 1);
      const container = { ...manifest.spec.containers[0]!, command: ["sh", "-c", 'echo "$FAKE_DEVICES" > /out/pref; sleep 3600'], resources: { limits: { [PREFERRED]: "1" } } };
      await apply({ ...manifest, spec: { ...manifest.spec, containers: [container] } });
      const seenBy = await eventually("pod pref wrote its devices", () => seen("pref"), 90_000).catch(async (e) => {
        throw new Error(`${(e as Error).message}\npod pref: ${JSON.stringify((await tryJson("pod", "pref"))?.status)}\n${agent.describe()}`);
      });
      expect(seenBy).toBe("p3");
      expect(asked).toEqual([{ available: ["p1", "p2", "p3"], mustInclude: [], size: 1 }]);
      expect(pref.calls.filter((c) => c.method === "Allocate")).toEqual([{ method: "Allocate", ids: ["p3"] }]);
      const uid = (await getJson("pod", "pref")).metadata.uid;
      expect(checkpoint().filter((e) => e.PodUID === uid)).toMatchObject([{ DeviceIDs: { "0": ["p3"] } }]);
      // The pod resources API reports the device with its NUMA node (ContainerDevices.topology).
      const client = new PodResourcesListerClient(dialUnix(join(agent.dir, "root", "pod-resources", "kubelet.sock")));
      const listed = (await client.list({}).response).podResources.find((p) => p.name === "pref");
      expect(listed?.containers[0]?.devices).toEqual([{ resourceName: PREFERRED, deviceIds: ["p3"], topology: { nodes: [{ iD: 0n }] } }]);
      const allocatable = (await client.getAllocatableResources({}).response).devices.filter((d) => d.resourceName === PREFERRED);
      expect(allocatable).toEqual(["p1", "p2", "p3"].map((id) => ({ resourceName: PREFERRED, deviceIds: [id], topology: { nodes: [{ iD: 0n }] } })));
      await kubectl("delete", "pod", "pref", "--wait=false");
    } finally {
      pref.kill();
    }
  }, 180_000);

  test("the plugin dying takes the node's allocatable to 0 and leaves a log line", async () => {
    plugin?.kill("SIGKILL");
    await plugin?.exited;
    plugin = undefined;
    await eventually("allocatable 0", async () => (await capacity()).allocatable === "0", 60_000);
    expect(agent.log()).toContain("device plugin disconnected; its devices are unhealthy");
  }, 90_000);
});
