/**
 * A container's devices in its CRI config, as upstream's
 * GenerateRunContainerOptions orders them: the plugins' env variables before
 * the container's own (so the container's win), their mounts before the
 * volumes, their annotations under the agent's, device nodes and CDI devices
 * as given.
 */
import type { ContainerConfig } from "../cri/gen/api.ts";
import type { DeviceRunOptions } from "./manager.ts";

export function withDevices(config: ContainerConfig, opts: DeviceRunOptions): ContainerConfig {
  if (!opts.envs.length && !opts.mounts.length && !opts.devices.length && !opts.cdiDevices.length && !Object.keys(opts.annotations).length) return config;
  return {
    ...config,
    envs: [...opts.envs, ...config.envs],
    mounts: [
      ...opts.mounts.map((m) => ({
        containerPath: m.containerPath,
        hostPath: m.hostPath,
        readonly: m.readonly,
        selinuxRelabel: false,
        propagation: 0,
        uidMappings: [],
        gidMappings: [],
        recursiveReadOnly: false,
        imageSubPath: "",
      })),
      ...config.mounts,
    ],
    devices: [...opts.devices, ...config.devices],
    annotations: { ...opts.annotations, ...config.annotations },
    cDIDevices: [...opts.cdiDevices, ...config.cDIDevices],
  };
}
