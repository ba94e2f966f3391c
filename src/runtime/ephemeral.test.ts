import { describe, expect, test } from "bun:test";
import { NamespaceMode } from "../cri/index.ts";
import type { Pod } from "../pods/schema.ts";
import { containerConfig } from "./cri-config.ts";
import { containerHash } from "./hash.ts";
import { joinPidNamespace, pidTargetOf, TargetContainerError } from "./ephemeral.ts";
import { planPod, type BackoffView } from "./plan.ts";
import type { ObservedContainer, ObservedPod } from "./types.ts";

const noBackoff: BackoffView = { remainingSince: () => 0 };
const debugPod = (extra: Partial<Pod["spec"]> = {}): Pod => ({
  metadata: { name: "web", namespace: "default", uid: "u1" },
  spec: {
    containers: [{ name: "app", image: "busybox", command: ["sleep", "3600"] }],
    ephemeralContainers: [{ name: "debugger", image: "busybox", stdin: true, tty: true, targetContainerName: "app" }],
    ...extra,
  },
});
const running = (name: string, over: Partial<ObservedContainer> = {}): ObservedContainer => ({
  id: `id-${name}`,
  name,
  sandboxId: "s1",
  state: "running",
  hash: containerHash({ name, image: "busybox", ...(name === "app" ? { command: ["sleep", "3600"] } : { stdin: true, tty: true }) }),
  restartCount: 0,
  image: "busybox",
  imageRef: "sha256:1",
  createdAt: 1,
  ...over,
});
const observed = (...containers: ObservedContainer[]): ObservedPod => ({
  uid: "u1",
  name: "web",
  namespace: "default",
  sandboxes: [{ id: "s1", ready: true, attempt: 0, createdAt: 1, ip: "10.0.0.2", additionalIps: [] }],
  containers,
});

describe("ephemeral containers in planPod", () => {
  test("an added ephemeral container is started in the running sandbox; the app container is left alone", () => {
    const a = planPod(debugPod(), observed(running("app")), noBackoff);
    expect(a).toMatchObject({ killPod: false, createSandbox: false, sandboxId: "s1", containersToKill: [] });
    expect(a.containersToStart).toEqual([{ name: "debugger", restartCount: 0, reason: "ephemeral container is not created" }]);
  });

  test("a running ephemeral container is not killed as 'not in the pod spec'", () => {
    const a = planPod(debugPod(), observed(running("debugger"), running("app")), noBackoff);
    expect(a.containersToKill).toEqual([]);
    expect(a.containersToStart).toEqual([]);
  });

  test("an exited ephemeral container is never restarted, whatever the restart policy", () => {
    const exited = running("debugger", { state: "exited", exitCode: 1, finishedAt: 5 });
    const a = planPod(debugPod({ restartPolicy: "Always" }), observed(exited, running("app")), noBackoff);
    expect(a.containersToStart).toEqual([]);
  });

  test("ephemeral containers start even while init containers are still running", () => {
    const p = debugPod({ initContainers: [{ name: "init", image: "busybox", command: ["sleep", "60"] }] });
    const init = running("init", { hash: containerHash(p.spec.initContainers![0]!) });
    const a = planPod(p, observed(init), noBackoff);
    expect(a.containersToStart.map((s) => s.name)).toEqual(["debugger"]);
  });
});

describe("pidTargetOf / joinPidNamespace", () => {
  test("the target's ID in the current sandbox; the config joins its process namespace", () => {
    const p = debugPod();
    const id = pidTargetOf(p, "debugger", observed(running("app")));
    expect(id).toBe("id-app");
    const config = containerConfig(p, p.spec.ephemeralContainers![0]!, 0, "sha256:1", []);
    joinPidNamespace(config, id!);
    expect(config.linux?.securityContext?.namespaceOptions).toMatchObject({ pid: NamespaceMode.TARGET, targetId: "id-app" });
    expect(config.stdin && config.tty).toBe(true);
  });

  test("no target: nothing to join; a target that is not running: a typed error", () => {
    const p = debugPod({
      ephemeralContainers: [
        { name: "plain", image: "busybox" },
        { name: "debugger", image: "busybox", targetContainerName: "app" },
      ],
    });
    expect(pidTargetOf(p, "plain", observed(running("app")))).toBeUndefined();
    expect(pidTargetOf(p, "app", observed(running("app")))).toBeUndefined();
    expect(() => pidTargetOf(p, "debugger", observed(running("app", { state: "exited", exitCode: 0 })))).toThrow(TargetContainerError);
  });
});
