import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { ActivePodCgroups } from "./active.ts";
import { FakePodCgroups } from "./fake.ts";

const pod = (uid: string, cpu?: string): Pod =>
  ({
    metadata: { name: `p-${uid}`, namespace: "default", uid },
    spec: { containers: [{ name: "c", image: "busybox", ...(cpu ? { resources: { requests: { cpu } } } : {}) }] },
  }) as Pod;

function setup(active: Pod[]) {
  const cgroups = new FakePodCgroups();
  const qosSeen: string[][] = [];
  const updateQos = cgroups.updateQos.bind(cgroups);
  cgroups.updateQos = (pods: Pod[]) => (qosSeen.push(pods.map((p) => `${p.metadata.uid}:${p.spec.containers[0]?.resources?.requests?.["cpu"] ?? ""}`)), updateQos(pods));
  const pods = { activePods: () => active, activePod: (uid: string) => active.find((p) => p.metadata.uid === uid) };
  return { cgroups, qosSeen, host: new ActivePodCgroups(cgroups, pods) };
}

describe("ActivePodCgroups", () => {
  test("a new pod is counted in the QoS totals before its cgroup is made", async () => {
    const { cgroups, qosSeen, host } = setup([pod("a", "100m")]);
    const parent = await host.ensurePod(pod("b", "200m"));
    expect(qosSeen).toEqual([["a:100m", "b:200m"]]);
    expect(cgroups.calls.map((c) => c.method)).toEqual(["updateQos", "ensurePod"]);
    expect(parent).toBe(cgroups.podCgroupPath(pod("b", "200m")));
  });

  test("a pod already active counts once, with the spec of this sync", async () => {
    const { qosSeen, host } = setup([pod("a", "100m"), pod("b", "100m")]);
    await host.ensurePod(pod("b", "300m"));
    expect(qosSeen).toEqual([["a:100m", "b:300m"]]);
  });

  test("the cgroup path is an active pod's only; removal goes to the pod cgroups", async () => {
    const { cgroups, host } = setup([pod("a")]);
    expect(host.podCgroupPath({ uid: "a" })).toBe(cgroups.podCgroupPath(pod("a")));
    expect(host.podCgroupPath({ uid: "gone" })).toBeUndefined();
    await host.removePod("a");
    expect(cgroups.calls.at(-1)).toEqual({ method: "removePod", arg: "a" });
  });
});
