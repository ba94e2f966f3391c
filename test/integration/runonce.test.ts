// --runonce as a real process on a real containerd: the static pods start
// once, the agent waits for them, prints one line per pod and exits with a
// status that says whether all came up; pods keep running after it exits.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCriClient } from "../../src/cri/client.ts";
import { ContainerFilter, ContainerState, type CriService } from "../../src/cri/index.ts";
import { createLogger } from "../../src/util/log.ts";
import { startAgent } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

let ctd: ContainerdHandle;
let cri: CriService;

beforeAll(async () => {
  requireRoot();
  ctd = await startContainerd({ name: "runonce" });
  cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
}, 120_000);

afterAll(async () => {
  cri?.close();
  await ctd?.stop();
}, 60_000);

const manifest = (name: string, command: string[], restartPolicy: "Always" | "Never") => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "default" },
  spec: { restartPolicy, terminationGracePeriodSeconds: 1, containers: [{ name: "main", image: ctd.busyboxImage, imagePullPolicy: "IfNotPresent", command }] },
});

describe("--runonce", () => {
  test("one good and one failing static pod: exit 1 naming the failing one; the good one keeps running", async () => {
    // The manifests are in place before the agent starts: run-once takes the first snapshot only.
    const manifests = join(ctd.dir, "agent-once", "manifests");
    mkdirSync(manifests, { recursive: true });
    writeFileSync(join(manifests, "good.json"), JSON.stringify(manifest("good", ["sleep", "3600"], "Always")));
    writeFileSync(join(manifests, "bad.json"), JSON.stringify(manifest("bad", ["sh", "-c", "exit 3"], "Never")));
    const started = Date.now();
    const agent = await startAgent(ctd, { name: "once", extraArgs: ["--runonce"] });
    const code = await agent.exited();
    expect(code).toBe(1);
    expect(Date.now() - started).toBeLessThan(60_000);
    await Bun.sleep(100); // the log pump drains the last lines
    const log = agent.log();
    expect(log).toMatch(/started pod good-test-node_default\([0-9a-f]+\): Running/);
    expect(log).toMatch(/failed pod bad-test-node_default\([0-9a-f]+\): container "main" failed: Error \(exit code 3\)/);
    expect(log).toMatch(/kubelet: runonce failed: error running pods: \[bad-test-node_default\([0-9a-f]+\)\]/);
    // No servers in run-once mode.
    expect(log).not.toContain("serving the kubelet API");
    expect(log).not.toContain("serving healthz");
    const running = (await cri.listContainers(ContainerFilter.create({}))).filter((c) => c.state === ContainerState.CONTAINER_RUNNING);
    expect(running.map((c) => c.labels["io.kubernetes.pod.name"])).toEqual(["good-test-node"]);
  }, 90_000);

  test("only good pods: exit 0, leaving pods it was not given (the previous run's) alone", async () => {
    const manifests = join(ctd.dir, "agent-once-ok", "manifests");
    mkdirSync(manifests, { recursive: true });
    writeFileSync(join(manifests, "fine.json"), JSON.stringify(manifest("fine", ["sleep", "3600"], "Always")));
    const agent = await startAgent(ctd, { name: "once-ok", extraArgs: ["--runonce"] });
    expect(await agent.exited()).toBe(0);
    await Bun.sleep(100);
    expect(agent.log()).toMatch(/started pod fine-test-node_default\([0-9a-f]+\): Running/);
    expect(agent.log()).not.toContain("removing pod no source wants");
    const running = (await cri.listContainers(ContainerFilter.create({}))).filter((c) => c.state === ContainerState.CONTAINER_RUNNING);
    expect(running.map((c) => c.labels["io.kubernetes.pod.name"]).sort()).toEqual(["fine-test-node", "good-test-node"]);
  }, 90_000);
});
