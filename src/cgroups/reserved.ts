/**
 * enforceNodeAllocatable system-reserved / kube-reserved (and their
 * -compressible forms): the reserved amounts become limits on those existing
 * cgroups at start (upstream's enforceExistingCgroup). A level that names no
 * cgroup or no amounts, or a cgroup that cannot be written, stops the start
 * (exit 2) naming the field.
 */
import { errorMessage, StartupConfigError } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { PodCgroups } from "./pod-cgroups.ts";
import { reservedEnforcements, type ReservedEnforcement, type ReservedSettings } from "./resources.ts";

/** `memoryQoS`: the MemoryQoS gate; memory.min is written on cgroup v2 only. */
export async function enforceReservedCgroups(cgroups: Pick<PodCgroups, "enforceExisting" | "version">, k: ReservedSettings, memoryQoS: boolean, logger: Logger): Promise<void> {
  let enforcements: ReservedEnforcement[];
  try {
    enforcements = reservedEnforcements(k, memoryQoS && cgroups.version === "v2");
  } catch (err) {
    throw new StartupConfigError(`enforceNodeAllocatable: ${errorMessage(err)}`);
  }
  for (const e of enforcements) {
    try {
      const path = await cgroups.enforceExisting(e.cgroup, e.config);
      logger.info("enforced reserved limits on cgroup", { level: e.level, [e.field]: e.cgroup, path, ...e.config });
    } catch (err) {
      throw new StartupConfigError(
        `${e.field} ${JSON.stringify(e.cgroup)}: failed to enforce the ${JSON.stringify(e.level)} limits of enforceNodeAllocatable: ${errorMessage(err)}`,
      );
    }
  }
}
