// Graceful node shutdown through logind, as upstream's systemd path, on a
// private D-Bus: a dbus-daemon with the system bus's type and a stand-in
// logind (test/fixtures/fake-logind.py) that hands out the delay lock as a
// pipe and reports when it is released. The agent is a real process with
// DBUS_SYSTEM_BUS_ADDRESS pointing there, on a real containerd.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { createCriClient } from "../../src/cri/client.ts";
import { ContainerFilter, type CriService } from "../../src/cri/index.ts";
import { createLogger } from "../../src/util/log.ts";
import { eventually, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

const fixtures = resolve(import.meta.dir, "../fixtures");
let ctd: ContainerdHandle;
let cri: CriService;
let bus: Subprocess | undefined;
let logind: Subprocess<"ignore", "pipe", "pipe"> | undefined;
let agent: AgentHandle | undefined;
let address: string;
const logindEvents: { event: string; at: number; [k: string]: unknown }[] = [];

beforeAll(async () => {
  requireRoot();
  ctd = await startContainerd({ name: "logind" });
  cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
  const dir = join(ctd.dir, "dbus");
  mkdirSync(dir, { recursive: true });
  address = `unix:path=${join(dir, "system_bus_socket")}`;
  bus = Bun.spawn(["dbus-daemon", `--config-file=${join(fixtures, "dbus-system.conf")}`, `--address=${address}`, "--nofork"], { stdout: "ignore", stderr: "ignore" });
  await eventually("bus socket", () => existsSync(join(dir, "system_bus_socket")), 10_000, 50);
  // InhibitDelayMaxUSec 30 s, logind's default.
  logind = Bun.spawn(["/usr/bin/python3", join(fixtures, "fake-logind.py"), address, "30000000"], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of logind!.stdout) {
      buffer += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        logindEvents.push(JSON.parse(buffer.slice(0, nl)));
        buffer = buffer.slice(nl + 1);
      }
    }
  })();
  await eventually("fake logind ready", () => logindEvents.some((e) => e.event === "ready"), 10_000, 50);
}, 120_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  logind?.kill();
  bus?.kill();
  cri?.close();
  await ctd?.stop();
}, 60_000);

const manifest = (name: string, priority: number) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "kube-system" },
  // sleep as PID 1 ignores SIGTERM: each pod runs until its grace period is over.
  spec: { priority, terminationGracePeriodSeconds: 30, containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command: ["sleep", "3600"] }] },
});

describe("graceful node shutdown through logind (private D-Bus)", () => {
  test("the delay lock is held while running; PrepareForShutdown stops regular pods within 4 s, then critical ones within 2 s, then releases the lock", async () => {
    const manifests = join(ctd.dir, "agent-logind", "manifests");
    mkdirSync(manifests, { recursive: true });
    writeFileSync(join(manifests, "regular.json"), JSON.stringify(manifest("regular", 0)));
    writeFileSync(join(manifests, "critical.json"), JSON.stringify(manifest("critical", 2_000_001_000)));
    agent = await startAgent(ctd, {
      name: "logind",
      env: { DBUS_SYSTEM_BUS_ADDRESS: address },
      extraConfig: { shutdownGracePeriod: "6s", shutdownGracePeriodCriticalPods: "2s" },
    });
    const inhibit = await eventually("inhibitor lock taken", () => logindEvents.find((e) => e.event === "inhibit"), 30_000);
    expect(inhibit).toMatchObject({ what: "shutdown", who: "kubelet", why: "Kubelet needs time to handle node shutdown", mode: "delay" });
    await eventually(
      "both pods running",
      async () => {
        const pods = (await agent!.pods()).items;
        return pods.length === 2 && pods.every((p) => p.status.phase === "Running");
      },
      60_000,
    );

    const call = Bun.spawnSync(["busctl", "--system", "call", "org.freedesktop.login1", "/org/freedesktop/login1", "org.bunlet.Test", "EmitPrepareForShutdown", "b", "true"], {
      env: { ...process.env, DBUS_SYSTEM_BUS_ADDRESS: address },
      stderr: "pipe",
    });
    expect(call.exitCode).toBe(0);
    const signalled = await eventually("signal sent", () => logindEvents.find((e) => e.event === "signal"), 5_000, 20);
    const released = await eventually("lock released", () => logindEvents.find((e) => e.event === "released"), 20_000, 50);
    expect(released.at - signalled.at).toBeGreaterThan(5_500); // 4 s + 2 s: nobody left earlier
    expect(released.at - signalled.at).toBeLessThan(9_000);

    // The lock goes when the last group's budget is over, as upstream; the runtime's SIGKILL lands just after it.
    const finished = await eventually(
      "both containers exited",
      async () => {
        const ends = new Map<string, number>();
        for (const c of await cri.listContainers(ContainerFilter.create({}))) {
          const status = (await cri.containerStatus(c.id)).status!;
          if (status.finishedAt > 0n) ends.set(c.labels["io.kubernetes.pod.name"]!, Number(status.finishedAt / 1_000_000n));
        }
        return ends.size === 2 ? ends : undefined;
      },
      10_000,
      100,
    );
    const regular = finished.get("regular-test-node")! - signalled.at;
    const critical = finished.get("critical-test-node")! - signalled.at;
    expect(regular).toBeGreaterThan(3_500);
    expect(regular).toBeLessThan(5_500);
    expect(critical - regular).toBeGreaterThan(1_500);
    expect(critical - regular).toBeLessThan(3_500);

    // The agent keeps running (systemd stops it later); the pods' statuses say why they ended (written as each kill returns,
    // which can be just after its group's budget ran out, as upstream).
    type Status = { phase: string; reason?: string; message?: string };
    const statuses = await eventually(
      "both pods Failed",
      async () => {
        const pods = (await agent!.pods()).items as unknown as { status: Status }[];
        return pods.every((p) => p.status.phase === "Failed") ? pods.map((p) => p.status) : undefined;
      },
      10_000,
    );
    for (const status of statuses) expect(status).toMatchObject({ phase: "Failed", reason: "Terminated", message: "Pod was terminated in response to imminent node shutdown." });
    expect(agent.pid()).toBeDefined();

    // A clean stop leaves no helper behind (the lock holder and the signal monitor are child processes).
    const helpers = Bun.spawnSync(["pgrep", "-P", String(agent.pid()), "busctl|systemd-inhibit"])
      .stdout.toString()
      .trim()
      .split("\n")
      .filter(Boolean);
    expect(helpers.length).toBeGreaterThan(0); // the monitor still runs
    expect(await agent.kill("SIGINT")).toBe(0);
    agent = undefined;
    const alive = (pid: string) => {
      try {
        return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8")); // an unreaped zombie is gone too
      } catch {
        return false;
      }
    };
    expect(helpers.filter(alive)).toEqual([]);
  }, 120_000);
});
