/**
 * The runtime's cgroup driver as the CRI RuntimeConfig call reports it
 * (containerd 1.7.12+ and 2.x, CRI-O 1.28+); older runtimes answer
 * Unimplemented, and the configuration decides (cgroups/driver.ts).
 */
import type { RuntimeDriverAnswer } from "../cgroups/index.ts";
import { CgroupDriver, isCriError, type CriService } from "../cri/index.ts";

export async function runtimeCgroupDriver(cri: Pick<CriService, "runtimeConfig">): Promise<RuntimeDriverAnswer> {
  try {
    const rc = await cri.runtimeConfig();
    if (!rc.linux) throw new Error("the container runtime answered RuntimeConfig without a Linux configuration");
    return { kind: "driver", driver: rc.linux.cgroupDriver === CgroupDriver.SYSTEMD ? "systemd" : "cgroupfs" };
  } catch (e) {
    if (isCriError(e, "Unimplemented")) return { kind: "unimplemented" };
    throw e;
  }
}
