/**
 * Which cgroup driver the agent uses (upstream's getCgroupDriverFromCRI,
 * KubeletCgroupDriverFromCRI): the runtime's, reported by the CRI
 * RuntimeConfig call, when it answers; the configuration's when the runtime
 * answers Unimplemented (containerd before 1.7.12/2.0, CRI-O before 1.28).
 * Unlike upstream, which silently takes the runtime's, a cgroupDriver that
 * the config file or --cgroup-driver sets explicitly to something else is a
 * startup error naming both: the two disagreeing is a node misconfigured,
 * and the pods' cgroups would land where the runtime does not look.
 */
import { StartupConfigError } from "../util/errors.ts";

export type CgroupDriverName = "cgroupfs" | "systemd";

export type RuntimeDriverAnswer = { kind: "driver"; driver: CgroupDriverName } | { kind: "unimplemented" };

/** The configured driver and the runtime's disagree; the agent exits 2 with this message. */
export class CgroupDriverMismatchError extends StartupConfigError {
  override readonly name = "CgroupDriverMismatchError";
  constructor(
    readonly configured: CgroupDriverName,
    readonly runtime: CgroupDriverName,
  ) {
    super(
      `cgroupDriver is "${configured}" in the kubelet configuration but the container runtime reports cgroup driver "${runtime}" (CRI RuntimeConfig): ` +
        `set cgroupDriver: ${runtime} (or --cgroup-driver=${runtime}), or configure the runtime for ${configured} (containerd: SystemdCgroup = ${configured === "systemd"} in the runc options), so both agree`,
    );
  }
}

export function chooseCgroupDriver(opts: { configured: CgroupDriverName; explicit: boolean; runtime: RuntimeDriverAnswer }): {
  driver: CgroupDriverName;
  source: "runtime" | "config";
} {
  const { configured, explicit, runtime } = opts;
  if (runtime.kind === "unimplemented") return { driver: configured, source: "config" };
  if (explicit && runtime.driver !== configured) throw new CgroupDriverMismatchError(configured, runtime.driver);
  return { driver: runtime.driver, source: "runtime" };
}
