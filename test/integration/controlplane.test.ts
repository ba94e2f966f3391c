// The control-plane harness itself: a real etcd + kube-apiserver +
// kube-controller-manager + kube-scheduler comes up on 127.0.0.1, reports the
// pinned release, lets a node identity create its own Node and no other
// (Node authorizer + NodeRestriction), runs controllers (Deployment ->
// ReplicaSet -> Pods, node lifecycle) and the scheduler, survives an API
// server restart, runs beside a second instance, and stops without leftovers.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { type ControlPlaneHandle, requireControlPlane, startControlPlane } from "../harness/controlplane.ts";

const COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"];

/** Live (non-zombie) processes whose command line names a path under `dir`. */
function processesUnder(dir: string): number[] {
  const pids: number[] = [];
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const cmd = readFileSync(`/proc/${e}/cmdline`, "utf8");
      const state = readFileSync(`/proc/${e}/stat`, "utf8").split(") ")[1]?.[0];
      if (cmd.includes(`${dir}/`) && state !== "Z") pids.push(Number(e));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

function pids(cp: ControlPlaneHandle): Record<string, number> {
  return Object.fromEntries(COMPONENTS.map((c) => [c, Number(readFileSync(`${cp.dir}/${c}.pid`, "utf8"))]));
}

/** Polls `fn` until it returns a value (not undefined) or `ms` pass. */
async function eventually<T>(what: string, fn: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${last}` : ""}`);
    await Bun.sleep(250);
  }
}

async function json<T = any>(cp: ControlPlaneHandle, args: string[]): Promise<T> {
  const r = await cp.kubectl([...args, "-o", "json"]);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

const node = (name: string) => JSON.stringify({ apiVersion: "v1", kind: "Node", metadata: { name } });

describe("control plane harness", () => {
  let cp: ControlPlaneHandle;

  beforeAll(async () => {
    requireControlPlane();
    cp = await startControlPlane({ name: "cp", nodeMonitorGracePeriod: "20s" });
  }, 120_000);
  afterAll(async () => {
    await cp?.stop();
  });

  test("is ready, reports the pinned release, listens on 127.0.0.1 only", async () => {
    const r = await cp.kubectl(["get", "--raw", "/readyz"]);
    expect(r).toMatchObject({ code: 0, stdout: "ok" });
    expect(cp.apiServerUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    expect(cp.kubernetesVersion).toMatch(/^v1\.34\.\d+$/);
    const v = await json(cp, ["version"]);
    expect(v.serverVersion.gitVersion).toBe(cp.kubernetesVersion);
    expect(v.clientVersion.gitVersion).toBe(cp.kubernetesVersion);
    expect(v.serverVersion.gitTreeState).toBe("clean");

    const ss = Bun.spawnSync(["ss", "-Htlnp"]).stdout.toString().split("\n");
    for (const [c, pid] of Object.entries(pids(cp))) {
      const mine = ss.filter((l) => l.includes(`pid=${pid},`));
      expect(mine.length, `${c} listens`).toBeGreaterThan(0);
      for (const l of mine) expect(l.split(/\s+/)[3], `${c}: ${l}`).toMatch(/^127\.0\.0\.1:\d+$/);
    }
  });

  test("a node identity may create its own Node and no other", async () => {
    const kubeconfig = await cp.nodeKubeconfig("n1");
    expect(readFileSync(kubeconfig, "utf8")).toContain(cp.apiServerUrl);
    const whoami = await cp.kubectl(["auth", "whoami", "-o", "json"], { kubeconfig });
    expect(whoami.code).toBe(0);
    expect(JSON.parse(whoami.stdout).status.userInfo).toMatchObject({ username: "system:node:n1" });
    expect(JSON.parse(whoami.stdout).status.userInfo.groups).toContain("system:nodes");

    const own = await cp.kubectl(["create", "-f", "-"], { kubeconfig, stdin: node("n1") });
    expect(own.stderr).toBe("");
    expect(own.code).toBe(0);
    const other = await cp.kubectl(["create", "-f", "-"], { kubeconfig, stdin: node("n2") });
    expect(other.code).not.toBe(0);
    expect(other.stderr).toMatch(/forbidden/i);
    // Making the kubeconfig again keeps the same identity.
    expect(await cp.nodeKubeconfig("n1")).toBe(kubeconfig);
    expect((await cp.kubectl(["get", "node", "n1", "-o", "name"], { kubeconfig })).stdout.trim()).toBe("node/n1");
    expect((await cp.kubectl(["get", "node", "n2"])).code).not.toBe(0);
  });

  test("controllers and scheduler work: Deployment -> ReplicaSet -> Pending, unschedulable Pods", async () => {
    const r = await cp.kubectl(["create", "deployment", "web", "--image=localhost/bunlet/busybox:1.0", "--replicas=2"]);
    expect(r.code).toBe(0);
    const rs = await eventually("the ReplicaSet", async () => {
      const l = await json(cp, ["get", "rs", "-l", "app=web"]);
      return l.items.length === 1 ? l.items[0] : undefined;
    });
    expect(rs.spec.replicas).toBe(2);
    // The scheduler has looked at them: no node may take them (n1 is tainted
    // not-ready and never reported), so they stay Pending, Unschedulable.
    const pods = await eventually("2 pods marked Unschedulable", async () => {
      const l = await json(cp, ["get", "pods", "-l", "app=web"]);
      const seen = l.items.filter((p: any) => p.status.conditions?.some((c: any) => c.type === "PodScheduled" && c.status === "False" && c.reason === "Unschedulable"));
      return seen.length === 2 ? l.items : undefined;
    });
    for (const p of pods) {
      expect(p.status.phase).toBe("Pending");
      expect(p.metadata.ownerReferences[0]).toMatchObject({ kind: "ReplicaSet", name: rs.metadata.name });
      expect(p.spec.serviceAccountName).toBe("default");
    }
  }, 90_000);

  test("node lifecycle: a node that stops reporting goes Unknown and unreachable after nodeMonitorGracePeriod (20s)", async () => {
    const kubeconfig = await cp.nodeKubeconfig("n1");
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    const status = {
      status: {
        conditions: [{ type: "Ready", status: "True", reason: "KubeletReady", message: "test", lastHeartbeatTime: now, lastTransitionTime: now }],
      },
    };
    // A node may write its own status, as the kubelet does: one PATCH (the
    // Node authorizer allows no GET of nodes/status, so not `kubectl patch`),
    // then silence.
    const pki = `${cp.dir}/pki`;
    expect(readFileSync(kubeconfig, "utf8")).toContain(`${pki}/nodes/n1.crt`);
    const res = await fetch(`${cp.apiServerUrl}/api/v1/nodes/n1/status`, {
      method: "PATCH",
      headers: { "content-type": "application/merge-patch+json" },
      body: JSON.stringify(status),
      tls: {
        ca: readFileSync(cp.caFile, "utf8"),
        cert: readFileSync(`${pki}/nodes/n1.crt`, "utf8"),
        key: readFileSync(`${pki}/nodes/n1.key`, "utf8"),
      },
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const t0 = Date.now();
    const n = await eventually(
      "n1 Ready=Unknown with the unreachable taint",
      async () => {
        const o = await json(cp, ["get", "node", "n1"]);
        const ready = o.status.conditions?.find((c: any) => c.type === "Ready");
        const tainted = o.spec.taints?.some((t: any) => t.key === "node.kubernetes.io/unreachable");
        return ready?.status === "Unknown" && tainted ? o : undefined;
      },
      60_000,
    );
    const took = Date.now() - t0;
    expect(n.status.conditions.find((c: any) => c.type === "Ready").reason).toBe("NodeStatusUnknown");
    // The shortened grace period, not upstream's 50 s default.
    expect(took).toBeGreaterThan(14_000);
    expect(took).toBeLessThan(45_000);
  }, 90_000);

  test("restarting kube-apiserver: same port, the rest keeps running and catches up", async () => {
    const before = pids(cp);
    const t0 = performance.now();
    await cp.restartApiServer();
    const took = performance.now() - t0;
    const after = pids(cp);
    expect(after["kube-apiserver"]).not.toBe(before["kube-apiserver"]);
    for (const c of ["etcd", "kube-controller-manager", "kube-scheduler"]) expect(after[c]).toBe(before[c]);
    expect(await cp.kubectl(["get", "--raw", "/readyz"])).toMatchObject({ code: 0, stdout: "ok" });
    expect(took).toBeLessThan(30_000);
    // The controller-manager re-established its watches after the restart.
    expect((await cp.kubectl(["scale", "deployment", "web", "--replicas=3"])).code).toBe(0);
    await eventually("a third pod", async () => {
      const l = await json(cp, ["get", "pods", "-l", "app=web"]);
      return l.items.length === 3 ? true : undefined;
    });
    // And a crash (SIGKILL) with the server down for a second.
    await cp.restartApiServer({ signal: "KILL", downSeconds: 1 });
    expect(await cp.kubectl(["get", "--raw", "/readyz"])).toMatchObject({ code: 0, stdout: "ok" });
  }, 90_000);

  test("a second instance runs beside it without sharing anything, and stops clean", async () => {
    const other = await startControlPlane({ name: "cp2" });
    try {
      expect(other.dir).not.toBe(cp.dir);
      expect(other.apiServerUrl).not.toBe(cp.apiServerUrl);
      const env = (h: ControlPlaneHandle) => readFileSync(`${h.dir}/controlplane.env`, "utf8").match(/_PORT=\d+/g)!;
      const ports = [...env(cp), ...env(other)].map((s) => s.split("=")[1]);
      expect(new Set(ports).size).toBe(ports.length);
      expect((await other.kubectl(["get", "--raw", "/readyz"])).stdout).toBe("ok");
      // Its own etcd: the first instance's objects are not there.
      expect((await other.kubectl(["get", "deployment", "web"])).code).not.toBe(0);
    } finally {
      await other.stop();
    }
    expect(existsSync(other.dir)).toBe(false);
    expect(processesUnder(other.dir)).toEqual([]);
    expect(processesUnder(cp.dir).length).toBe(4);
  }, 120_000);

  test("stop leaves no process and no directory, and is idempotent", async () => {
    expect(processesUnder(cp.dir).length).toBe(4);
    await cp.stop();
    expect(processesUnder(cp.dir)).toEqual([]);
    expect(existsSync(cp.dir)).toBe(false);
    await cp.stop();
  }, 60_000);
});
