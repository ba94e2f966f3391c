/**
 * Swap for containers (memorySwap.swapBehavior), as upstream's kuberuntime
 * configureContainerSwapResources does for every container it creates:
 * - NoSwap (and "", the default): on cgroup v2, memory.swap.max = 0 through
 *   the CRI's unified map; on cgroup v1, memory.memsw.limit_in_bytes equal to
 *   the memory limit (no swap above it; a container without a memory limit is
 *   left alone, as the kernel ignores memsw then).
 * - LimitedSwap, only on cgroup v2 and only for Burstable pods' containers
 *   that request memory below their limit (never critical pods):
 *   memory.swap.max = request / node memory × node swap. Everything else
 *   gets NoSwap; on a cgroup v1 host every container does (upstream's rule).
 * Nothing is written when the kernel has no swap controller
 * (memory.memsw.limit_in_bytes on v1, memory.swap.max beside the agent's own
 * cgroup on v2).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { isCriticalPod } from "../pods/source.ts";
import { podQosClass } from "./qos.ts";
import { intValue } from "./values.ts";

export type SwapBehavior = "NoSwap" | "LimitedSwap";

export interface SwapHost {
  cgroupVersion: "v1" | "v2";
  /** The kernel's swap accounting is there (upstream checkSwapControllerAvailability). */
  swapController: boolean;
  memoryCapacityBytes: number;
  /** SwapTotal of /proc/meminfo (cadvisor's SwapCapacity). */
  swapCapacityBytes: number;
}

/** The CRI fields swap sets: memory_swap_limit_in_bytes (v1) or unified["memory.swap.max"] (v2). */
export interface SwapResources {
  memorySwapLimitInBytes?: number;
  unified?: Record<string, string>;
}

/** The behaviour a container gets (upstream GetContainerSwapBehavior). */
export function containerSwapBehavior(configured: string, pod: Pod, container: ContainerSpec, host: SwapHost): SwapBehavior {
  if (configured !== "LimitedSwap" || !host.swapController || host.cgroupVersion !== "v2" || isCriticalPod(pod)) return "NoSwap";
  // A request defaults to the limit (API defaulting).
  const limit = intValue(container.resources?.limits?.memory);
  const request = container.resources?.requests?.memory === undefined ? limit : intValue(container.resources.requests.memory);
  if (podQosClass(pod) !== "Burstable" || (request === 0 && limit === 0) || request === limit) return "NoSwap";
  return "LimitedSwap";
}

/** upstream calcSwapForBurstablePods: the container's share of the node's swap, by its share of the node's memory. */
export function swapForBurstableContainer(memoryRequestBytes: number, nodeMemoryBytes: number, nodeSwapBytes: number): number {
  if (nodeMemoryBytes <= 0) throw new RangeError("total node memory is 0");
  if (memoryRequestBytes > nodeMemoryBytes) throw new RangeError(`container request ${memoryRequestBytes} is larger than total node memory ${nodeMemoryBytes}`);
  return Math.trunc((memoryRequestBytes / nodeMemoryBytes) * nodeSwapBytes);
}

export function containerSwapResources(configured: string, pod: Pod, container: ContainerSpec, memoryLimitBytes: number, host: SwapHost): SwapResources {
  if (!host.swapController) return {};
  const swapMax = (bytes: number): SwapResources => ({ unified: { "memory.swap.max": String(bytes) } });
  if (containerSwapBehavior(configured, pod, container, host) === "LimitedSwap") {
    try {
      return swapMax(swapForBurstableContainer(intValue(container.resources?.requests?.memory), host.memoryCapacityBytes, host.swapCapacityBytes));
    } catch {
      // upstream: "Cannot calculate swap allocation amount; disallowing swap".
    }
  }
  if (host.cgroupVersion === "v1") return memoryLimitBytes > 0 ? { memorySwapLimitInBytes: memoryLimitBytes } : {};
  return swapMax(0);
}

/** The host's side of swap: cgroup version, swap controller, swap size (`root` is "/" on a host). */
export function readSwapHost(cgroupVersion: "v1" | "v2", memoryCapacityBytes: number, root = "/"): SwapHost {
  let controller: string;
  if (cgroupVersion === "v1") controller = join(root, "sys/fs/cgroup/memory/memory.memsw.limit_in_bytes");
  else {
    const self = readFileSync(join(root, "proc/self/cgroup"), "utf8")
      .split("\n")
      .find((l) => l.startsWith("0::"));
    controller = join(root, "sys/fs/cgroup", self?.slice(3) ?? "/", "memory.swap.max");
  }
  const swapKb = /^SwapTotal:\s+(\d+) kB$/m.exec(readFileSync(join(root, "proc/meminfo"), "utf8"))?.[1];
  return { cgroupVersion, swapController: existsSync(controller), memoryCapacityBytes, swapCapacityBytes: Number(swapKb ?? 0) * 1024 };
}

/** What the log says when memorySwap.swapBehavior LimitedSwap cannot act on this host (every container gets NoSwap, as upstream); undefined when it can or is not asked. */
export function limitedSwapWarning(configured: string, host: Pick<SwapHost, "cgroupVersion" | "swapController">): string | undefined {
  if (configured !== "LimitedSwap") return undefined;
  if (host.cgroupVersion === "v1")
    return "memorySwap.swapBehavior LimitedSwap needs cgroup v2: on this cgroup v1 host every container gets NoSwap (memory+swap limit = memory limit), as upstream";
  if (!host.swapController) return "memorySwap.swapBehavior LimitedSwap: the kernel has no swap controller (memory.swap.max); no swap limit is written, as upstream";
  return undefined;
}
