import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Pod } from "../pods/schema.ts";
import { containerSwapBehavior, containerSwapResources, readSwapHost, swapForBurstableContainer, type SwapHost } from "./swap.ts";

const GI = 2 ** 30;
const v2: SwapHost = { cgroupVersion: "v2", swapController: true, memoryCapacityBytes: 8 * GI, swapCapacityBytes: 2 * GI };
const v1: SwapHost = { ...v2, cgroupVersion: "v1" };
const pod = (resources?: { requests?: Record<string, string>; limits?: Record<string, string> }, extra: Record<string, unknown> = {}): Pod =>
  ({
    metadata: { name: "p", namespace: "default", uid: "u", ...extra },
    spec: { containers: [{ name: "c", image: "busybox", ...(resources ? { resources } : {}) }] },
  }) as unknown as Pod;
const c = (p: Pod) => p.spec.containers[0]!;
const burstable = pod({ requests: { memory: "1Gi" }, limits: { memory: "2Gi" } });

describe("swap behaviour per container (upstream GetContainerSwapBehavior)", () => {
  test("LimitedSwap only for Burstable containers requesting memory below their limit, on cgroup v2", () => {
    expect(containerSwapBehavior("LimitedSwap", burstable, c(burstable), v2)).toBe("LimitedSwap");
    const requestOnly = pod({ requests: { memory: "1Gi" } });
    expect(containerSwapBehavior("LimitedSwap", requestOnly, c(requestOnly), v2)).toBe("LimitedSwap");
    const guaranteed = pod({ requests: { memory: "1Gi", cpu: "1" }, limits: { memory: "1Gi", cpu: "1" } });
    expect(containerSwapBehavior("LimitedSwap", guaranteed, c(guaranteed), v2)).toBe("NoSwap");
    const limitOnly = pod({ requests: { cpu: "100m" }, limits: { memory: "1Gi" } }); // request defaults to the limit
    expect(containerSwapBehavior("LimitedSwap", limitOnly, c(limitOnly), v2)).toBe("NoSwap");
    const cpuOnly = pod({ requests: { cpu: "100m" } });
    expect(containerSwapBehavior("LimitedSwap", cpuOnly, c(cpuOnly), v2)).toBe("NoSwap");
    expect(containerSwapBehavior("LimitedSwap", pod(), c(pod()), v2)).toBe("NoSwap"); // BestEffort
    expect(containerSwapBehavior("LimitedSwap", burstable, c(burstable), v1)).toBe("NoSwap");
    expect(containerSwapBehavior("LimitedSwap", burstable, c(burstable), { ...v2, swapController: false })).toBe("NoSwap");
    expect(containerSwapBehavior("NoSwap", burstable, c(burstable), v2)).toBe("NoSwap");
    expect(containerSwapBehavior("", burstable, c(burstable), v2)).toBe("NoSwap");
  });
});

describe("the limit (upstream calcSwapForBurstablePods)", () => {
  test("the container's share of node memory times node swap, truncated", () => {
    expect(swapForBurstableContainer(GI, 8 * GI, 2 * GI)).toBe(GI / 4);
    expect(swapForBurstableContainer(1000, 3000, 1000)).toBe(333);
    expect(() => swapForBurstableContainer(9 * GI, 8 * GI, GI)).toThrow("is larger than total node memory");
    expect(() => swapForBurstableContainer(1, 0, GI)).toThrow("total node memory is 0");
  });
  test("CRI fields: memory.swap.max on v2 (0 for NoSwap); memory+swap = memory limit on v1; nothing without a swap controller", () => {
    expect(containerSwapResources("LimitedSwap", burstable, c(burstable), 2 * GI, v2)).toEqual({ unified: { "memory.swap.max": String(GI / 4) } });
    expect(containerSwapResources("NoSwap", burstable, c(burstable), 2 * GI, v2)).toEqual({ unified: { "memory.swap.max": "0" } });
    expect(containerSwapResources("LimitedSwap", burstable, c(burstable), 2 * GI, v1)).toEqual({ memorySwapLimitInBytes: 2 * GI });
    expect(containerSwapResources("", pod(), c(pod()), 0, v1)).toEqual({});
    expect(containerSwapResources("NoSwap", burstable, c(burstable), 2 * GI, { ...v1, swapController: false })).toEqual({});
    const huge = pod({ requests: { memory: "16Gi" }, limits: { memory: "32Gi" } }); // request above node memory: no swap, as upstream
    expect(containerSwapResources("LimitedSwap", huge, c(huge), 32 * GI, v2)).toEqual({ unified: { "memory.swap.max": "0" } });
  });
});

describe("the host", () => {
  test("v1: memsw file; v2: memory.swap.max beside the agent's own cgroup; SwapTotal from meminfo", () => {
    const root = mkdtempSync(join(tmpdir(), "swaphost-"));
    mkdirSync(join(root, "proc/self"), { recursive: true });
    writeFileSync(join(root, "proc/meminfo"), "MemTotal:       8000 kB\nSwapTotal:       2048 kB\nSwapFree: 2048 kB\n");
    writeFileSync(join(root, "proc/self/cgroup"), "0::/agent.slice\n");
    expect(readSwapHost("v2", 100, root)).toEqual({ cgroupVersion: "v2", swapController: false, memoryCapacityBytes: 100, swapCapacityBytes: 2048 * 1024 });
    mkdirSync(join(root, "sys/fs/cgroup/agent.slice"), { recursive: true });
    writeFileSync(join(root, "sys/fs/cgroup/agent.slice/memory.swap.max"), "max\n");
    expect(readSwapHost("v2", 100, root).swapController).toBe(true);
    expect(readSwapHost("v1", 100, root).swapController).toBe(false);
    mkdirSync(join(root, "sys/fs/cgroup/memory"), { recursive: true });
    writeFileSync(join(root, "sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"), "9223372036854771712\n");
    expect(readSwapHost("v1", 100, root).swapController).toBe(true);
  });
});
