/**
 * Device plugins (the v1beta1 API) and the pod resources API: see manager.ts
 * for the flow. The agent wires DeviceManager into node status (capacity and
 * allocatable), admission, and container creation (`runOptions` → `withDevices`).
 */
export { DeviceManager, DeviceError, isExtendedResourceName, KUBELET_SOCKET, type DeviceManagerOptions, type DeviceRunOptions } from "./manager.ts";
export { withDevices } from "./cri.ts";
export { servePodResources, type ExclusiveCpus, type PinnedMemory, type PodResourcesServerOptions } from "./podresources.ts";
