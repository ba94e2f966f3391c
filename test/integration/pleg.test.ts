// The PLEG against the runtime under test (BUNLET_RUNTIME): on containerd
// 2.x a container's exit reaches the agent through the CRI event stream,
// with no relist in between (the relist waits 300 s there); on containerd
// 1.6, which has no event stream, the agent relists every second.
// Relists are counted from the agent's log ("GenericPLEG: Relisting" at -v=5,
// as upstream's).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCriClient } from "../../src/cri/client.ts";
import { ContainerFilter, type CriService } from "../../src/cri/index.ts";
import { createLogger } from "../../src/util/log.ts";
import { eventually, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, runtimeUnderTest, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

let ctd: ContainerdHandle;
let agent: AgentHandle;
let cri: CriService;
const evented = runtimeUnderTest() === "containerd2";

const relists = () =>
  agent
    .log()
    .split("\n")
    .filter((l) => l.includes("GenericPLEG: Relisting")).length;

beforeAll(async () => {
  requireRoot();
  ctd = await startContainerd({ name: "pleg" });
  cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
  agent = await startAgent(ctd, { extraArgs: ["--v=5"] });
}, 60_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  cri?.close();
  await ctd?.stop();
});

describe(`PLEG on ${runtimeUnderTest()}`, () => {
  test(evented ? "a container's exit is noticed through the event stream within a second, with no relist" : "no event stream: the agent relists every second", async () => {
    // The container waits for a file, so the test decides when it exits.
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "exiter" },
      spec: {
        restartPolicy: "Never",
        terminationGracePeriodSeconds: 1,
        containers: [{ name: "c", image: ctd.busyboxImage, command: ["sh", "-c", "until [ -e /tmp/go ]; do sleep 0.05; done; exit 7"] }],
      },
    };
    writeFileSync(join(agent.manifests, "exiter.json"), JSON.stringify(pod));
    const running = await eventually("exiter Running", async () => {
      const p = (await agent.pods()).items.find((x) => x.metadata.name === "exiter-test-node");
      return p?.status.phase === "Running" ? p : undefined;
    });
    const [container] = await cri.listContainers(ContainerFilter.create({ labelSelector: { "io.kubernetes.pod.uid": running.metadata.uid } }));
    expect(container).toBeDefined();
    // Past the startup relists.
    await Bun.sleep(1500);
    const before = relists();
    expect(before).toBeGreaterThan(0); // the startup relist is logged: the count below means something
    const t0 = Date.now();
    await cri.execSync(container!.id, ["touch", "/tmp/go"], 5);
    const failed = await eventually(
      "exiter Failed",
      async () => {
        const p = (await agent.pods()).items.find((x) => x.metadata.name === "exiter-test-node");
        return p?.status.phase === "Failed" ? p : undefined;
      },
      10_000,
      50,
    );
    const noticedMs = Date.now() - t0;
    expect((failed.status.containerStatuses[0]?.state["terminated"] as { exitCode?: number } | undefined)?.exitCode).toBe(7);
    if (evented) {
      expect(noticedMs).toBeLessThan(1000);
      // Ten more seconds of quiet: still no relist (the safety net runs every 300 s).
      await Bun.sleep(10_000);
      expect(relists()).toBe(before);
      expect(agent.log()).not.toContain("container event stream lost");
    } else {
      await Bun.sleep(3000);
      expect(relists() - before).toBeGreaterThanOrEqual(3);
      expect(agent.log()).toContain("the runtime does not stream container events; relisting every second");
    }
    console.log(`pleg: exit noticed after ${noticedMs} ms; ${relists() - before} relists since (${runtimeUnderTest()})`);
  }, 60_000);
});
