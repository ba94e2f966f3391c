import { describe, expect, test } from "bun:test";
import { memoryLogger } from "../util/log.ts";
import { nodePodCidrs, PodCidr, PodCidrUpdateError } from "./pod-cidr.ts";

function runtime(fail = false) {
  const calls: string[] = [];
  return {
    calls,
    cri: {
      updateRuntimeConfig: async (cidr: string) => {
        calls.push(cidr);
        if (fail) throw new Error("unavailable");
      },
    },
  };
}

describe("PodCidr (upstream updatePodCIDR)", () => {
  test("sent once per change; the same CIDR again is not sent", async () => {
    const r = runtime();
    const p = new PodCidr({ cri: r.cri, logger: memoryLogger().logger });
    expect(await p.update("10.244.1.0/24")).toBe(true);
    expect(await p.update("10.244.1.0/24")).toBe(false);
    expect(await p.update("10.244.2.0/24")).toBe(true);
    expect(r.calls).toEqual(["10.244.1.0/24", "10.244.2.0/24"]);
    expect(p.cidr()).toBe("10.244.2.0/24");
  });

  test("empty at start is nothing to send (standalone without podCIDR)", async () => {
    const r = runtime();
    expect(await new PodCidr({ cri: r.cri, logger: memoryLogger().logger }).update("")).toBe(false);
    expect(r.calls).toEqual([]);
  });

  test("a runtime that fails: a typed error naming the CIDR, and the next try sends it again", async () => {
    const r = runtime(true);
    const p = new PodCidr({ cri: r.cri, logger: memoryLogger().logger });
    const err = await p.update("10.244.1.0/24").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PodCidrUpdateError);
    expect(String(err)).toContain('failed to update pod CIDR to "10.244.1.0/24": unavailable');
    await p.update("10.244.1.0/24").catch(() => {});
    expect(r.calls).toEqual(["10.244.1.0/24", "10.244.1.0/24"]);
    expect(p.cidr()).toBe("");
  });

  test("from a Node: spec.podCIDRs joined with a comma; a Node without them changes nothing", async () => {
    const r = runtime();
    const { logger } = memoryLogger();
    const p = new PodCidr({ cri: r.cri, logger });
    await p.fromNode({ metadata: { name: "n" }, spec: {} });
    await p.fromNode({ metadata: { name: "n" }, spec: { podCIDR: "10.244.1.0/24", podCIDRs: ["10.244.1.0/24", "fd00:1::/64"] } });
    expect(r.calls).toEqual(["10.244.1.0/24,fd00:1::/64"]);
    expect(nodePodCidrs(undefined)).toBe("");
  });

  test("concurrent updates are sent one at a time, in order", async () => {
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const p = new PodCidr({
      cri: {
        updateRuntimeConfig: async (cidr: string) => {
          order.push(`start ${cidr}`);
          if (cidr === "a") await gate;
          order.push(`end ${cidr}`);
        },
      },
      logger: memoryLogger().logger,
    });
    const a = p.update("a");
    const b = p.update("b");
    for (let i = 0; i < 5; i++) await Promise.resolve(); // "a" is in the runtime, "b" queued behind it
    release();
    await Promise.all([a, b]);
    expect(order).toEqual(["start a", "end a", "start b", "end b"]);
  });
});
