// The API server's protobuf encoding for the objects the upstream kubelet
// sends as protobuf (the node Lease every 10 s, Events), against a real
// control plane: the agent talks to the API server through a recording
// proxy (test/harness/api-proxy.ts), which sees each request's content
// type; and the codecs are held to the API server's own bytes for the same
// objects. BUNLET_PROTO_FIXTURES=DIR writes those bytes and their JSON to
// DIR (src/api/testdata holds the ones the unit tests read).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createRestClient, loadCredentials, type RestClient } from "../../src/api/rest.ts";
import { eventCodec, leaseCodec } from "../../src/api/proto-objects.ts";
import { PROTOBUF } from "../../src/api/protobuf.ts";
import { realClock } from "../../src/util/clock.ts";
import { type AgentHandle, eventually, startAgent } from "../harness/agent.ts";
import { type ApiProxy, startApiProxy } from "../harness/api-proxy.ts";
import { type ContainerdHandle, requireRoot, startContainerd } from "../harness/containerd.ts";
import { type ControlPlaneHandle, startControlPlane } from "../harness/controlplane.ts";
import { startTogether } from "../harness/together.ts";
import { createLogger } from "../../src/util/log.ts";

const NODE = "proto-node";
const LEASE = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${NODE}`;
let ctd: ContainerdHandle;
let cp: ControlPlaneHandle;
let proxy: ApiProxy;
let agent: AgentHandle;
let admin: RestClient;

beforeAll(async () => {
  requireRoot();
  [ctd, cp] = await startTogether([startContainerd({ name: "api-protobuf" }), startControlPlane({ name: "api-protobuf" })]);
  const kubeconfig = await cp.nodeKubeconfig(NODE);
  admin = createRestClient({
    credentials: await loadCredentials(cp.adminKubeconfig),
    qps: 0,
    burst: 0,
    clock: realClock,
    logger: createLogger({ verbosity: 0 }),
    userAgent: "api-protobuf-test",
  });
  proxy = await startApiProxy(kubeconfig);
  // contentType is left at its default, application/vnd.kubernetes.protobuf, as upstream's.
  agent = await startAgent(ctd, { nodeName: NODE, extraArgs: [`--kubeconfig=${proxy.kubeconfig(join(cp.dir, "proxied.kubeconfig"))}`, "--node-ip=127.0.0.1"] });
}, 180_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  proxy?.stop();
  await Promise.all([ctd?.stop(), cp?.stop()]);
}, 60_000);

/** The object at `path` as protobuf bytes and as JSON, read until both show the same resourceVersion (the lease moves every 10 s). */
async function bothEncodings(path: string): Promise<{ bytes: Uint8Array; json: any }> {
  return await eventually(`${path} read twice at one resourceVersion`, async () => {
    const pb = await admin.requestBytes("GET", path, { contentType: PROTOBUF, accept: PROTOBUF });
    const json = await admin.request<any>("GET", path);
    expect(pb.contentType).toBe(PROTOBUF);
    return holdsVersion(pb.bytes, json.metadata.resourceVersion) ? { bytes: pb.bytes, json } : undefined;
  });
}
/** Whether ObjectMeta's field 6 (resourceVersion: tag 0x32, then its length) in `bytes` is `rv`. */
const holdsVersion = (bytes: Uint8Array, rv: string) => new TextDecoder().decode(bytes).includes(`\x32${String.fromCharCode(rv.length)}${rv}`);

function saveFixture(name: string, bytes: Uint8Array, json: unknown): void {
  const dir = process.env.BUNLET_PROTO_FIXTURES;
  if (!dir) return;
  writeFileSync(join(dir, `${name}.pb`), bytes);
  writeFileSync(join(dir, `${name}.json`), `${JSON.stringify(json, null, 2)}\n`);
}

describe("protobuf to the API server, as upstream's kubelet", () => {
  test("the node renews its Lease and posts its events as protobuf; patches stay JSON", async () => {
    const puts = await eventually(
      "two lease renewals through the proxy",
      async () => {
        const p = proxy.requests.filter((r) => r.method === "PUT" && r.path === LEASE);
        return p.length >= 2 ? p : undefined;
      },
      60_000,
      1000,
    );
    for (const put of puts) {
      expect(put).toMatchObject({ contentType: PROTOBUF, status: 200, answerType: PROTOBUF });
      expect(put.accept).toStartWith(PROTOBUF);
      // The JSON PUT of this lease was about 820 bytes; upstream's protobuf about 520.
      expect(put.requestBytes).toBeLessThan(600);
    }
    const created = proxy.requests.find((r) => r.method === "POST" && r.path === "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases");
    expect(created).toMatchObject({ contentType: PROTOBUF, status: 201, answerType: PROTOBUF });
    const lease = await admin.request<any>("GET", LEASE);
    expect(lease.spec).toMatchObject({ holderIdentity: NODE, leaseDurationSeconds: 40 });
    expect(Date.now() - Date.parse(lease.spec.renewTime)).toBeLessThan(15_000);

    const nodeReady = await eventually("the NodeReady event", async () => {
      const list = await admin.request<any>("GET", "/api/v1/namespaces/default/events");
      return list.items.find((e: any) => e.reason === "NodeReady" && e.involvedObject.name === NODE);
    });
    expect(nodeReady).toMatchObject({ type: "Normal", count: 1, source: { component: "kubelet", host: NODE }, reportingComponent: "kubelet", reportingInstance: NODE });
    expect(nodeReady.involvedObject).toMatchObject({ kind: "Node", apiVersion: "v1" });
    expect(Date.parse(nodeReady.firstTimestamp)).toBeGreaterThan(Date.now() - 120_000);
    const eventPosts = proxy.requests.filter((r) => r.method === "POST" && r.path === "/api/v1/namespaces/default/events");
    expect(eventPosts.length).toBeGreaterThan(0);
    for (const post of eventPosts) expect(post).toMatchObject({ contentType: PROTOBUF, status: 201 });
    const patches = proxy.requests.filter((r) => r.method === "PATCH");
    expect(patches.length).toBeGreaterThan(0);
    for (const patch of patches) expect(patch.contentType).toBe("application/strategic-merge-patch+json");
  }, 90_000);

  test("a pod's status patches and its final DELETE carry JSON and are answered in protobuf (the whole Pod, not read), as upstream's client accepts", async () => {
    const name = "proto-pod";
    const path = `/api/v1/namespaces/default/pods/${name}`;
    await admin.request("POST", "/api/v1/namespaces/default/pods", {
      body: {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name },
        spec: {
          nodeName: NODE,
          automountServiceAccountToken: false,
          terminationGracePeriodSeconds: 1,
          containers: [{ name: "app", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"] }],
        },
      },
    });
    await eventually("the pod Running in the API server", async () => (await admin.request<any>("GET", path)).status?.phase === "Running");
    const patches = proxy.requests.filter((r) => r.method === "PATCH" && r.path === `${path}/status`);
    expect(patches.length).toBeGreaterThan(0);
    for (const patch of patches) {
      expect(patch).toMatchObject({ contentType: "application/strategic-merge-patch+json", status: 200, answerType: PROTOBUF });
      expect(patch.accept).toStartWith(PROTOBUF);
    }
    await admin.request("DELETE", path, { body: { kind: "DeleteOptions", apiVersion: "v1", gracePeriodSeconds: 1 } });
    const deleted = await eventually("the agent's DELETE of the pod", () => proxy.requests.find((r) => r.method === "DELETE" && r.path === path), 60_000, 500);
    expect(deleted).toMatchObject({ contentType: "application/json", status: 200, answerType: PROTOBUF });
    await eventually("the pod gone from the API server", async () => (await admin.request<any>("GET", path).catch((err: { reason?: string }) => err)).reason === "NotFound");
  }, 120_000);

  test("the Lease codec reads and writes the API server's own bytes", async () => {
    const { bytes, json } = await bothEncodings(LEASE);
    saveFixture("lease", bytes, json);
    expect(leaseCodec.decode!(bytes)).toEqual(json);
    expect(leaseCodec.encode(json)).toEqual(bytes);
  }, 60_000);

  test("the Event codec writes the API server's own bytes", async () => {
    const list = await admin.request<any>("GET", "/api/v1/namespaces/default/events");
    const event = list.items.find((e: any) => e.reason === "NodeReady" && e.involvedObject.name === NODE);
    const { bytes, json } = await bothEncodings(`/api/v1/namespaces/default/events/${event.metadata.name}`);
    saveFixture("event", bytes, json);
    expect(eventCodec.encode(json)).toEqual(bytes);
  }, 60_000);
});
