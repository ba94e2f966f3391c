import { expect, test } from "bun:test";
import { StartupConfigError } from "../util/errors.ts";
import { memoryLogger } from "../util/log.ts";
import { FakePodCgroups } from "./fake.ts";
import { enforceReservedCgroups } from "./reserved.ts";
import { limitedSwapWarning } from "./swap.ts";

const settings = {
  enforceNodeAllocatable: ["pods", "system-reserved"],
  systemReserved: { cpu: "500m", memory: "256Mi" },
  kubeReserved: {},
  systemReservedCgroup: "/system.slice",
  kubeReservedCgroup: "",
};

test("system-reserved in enforceNodeAllocatable: the reserved amounts are written on the existing cgroup, memory.min only with MemoryQoS on cgroup v2", async () => {
  for (const [version, memoryQoS, memoryMin] of [
    ["v2", true, 256 * 2 ** 20],
    ["v1", true, undefined],
    ["v2", false, undefined],
  ] as const) {
    const cgroups = new FakePodCgroups({ version });
    cgroups.existing.set("/system.slice", undefined);
    await enforceReservedCgroups(cgroups, settings, memoryQoS, memoryLogger().logger);
    expect(cgroups.existing.get("/system.slice")).toEqual({ cpuShares: 512, memoryLimit: 256 * 2 ** 20, hugePageLimits: new Map(), ...(memoryMin ? { memoryMin } : {}) });
  }
});

test("a level without its cgroup, or a cgroup that cannot be written, stops the start naming the field", async () => {
  const cgroups = new FakePodCgroups();
  const noCgroup = enforceReservedCgroups(cgroups, { ...settings, systemReservedCgroup: "" }, false, memoryLogger().logger);
  await expect(noCgroup).rejects.toBeInstanceOf(StartupConfigError);
  await expect(noCgroup).rejects.toThrow('enforceNodeAllocatable: systemReservedCgroup must be specified when "system-reserved" is in enforceNodeAllocatable');
  await expect(enforceReservedCgroups(cgroups, settings, false, memoryLogger().logger)).rejects.toThrow(
    'systemReservedCgroup "/system.slice": failed to enforce the "system-reserved" limits of enforceNodeAllocatable',
  );
});

test("LimitedSwap is said to have no effect on cgroup v1 and without a swap controller; nothing is said otherwise", () => {
  expect(limitedSwapWarning("LimitedSwap", { cgroupVersion: "v1", swapController: true })).toContain("needs cgroup v2");
  expect(limitedSwapWarning("LimitedSwap", { cgroupVersion: "v2", swapController: false })).toContain("no swap controller");
  expect(limitedSwapWarning("LimitedSwap", { cgroupVersion: "v2", swapController: true })).toBeUndefined();
  expect(limitedSwapWarning("NoSwap", { cgroupVersion: "v1", swapController: false })).toBeUndefined();
});
