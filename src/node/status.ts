/**
 * The Node object and its status, computed as pure functions of machine
 * facts, runtime health and config (upstream nodestatus setters), so the
 * controller only decides when to send them.
 */
import type { KubeletConfiguration } from "../config/index.ts";
import { parseQuantity, parseThreshold } from "../config/index.ts";
import type { ApiObject } from "../api/index.ts";
import type { NodeFacts } from "./admission.ts";
import type { MachineInfo } from "./machine.ts";
import { parseCpuSet } from "../util/cpuset.ts";
import { binaryQuantity, hugePageResourceName } from "../cgroups/hugepages.ts";

export interface NodeCondition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  lastHeartbeatTime: string;
  lastTransitionTime: string;
}

export interface NodeIdentity {
  nodeName: string;
  nodeIPs: string[];
  nodeLabels: Record<string, string>;
  kubeletVersion: string;
}

export function defaultLabels(id: NodeIdentity, machine: MachineInfo): Record<string, string> {
  return {
    "kubernetes.io/hostname": id.nodeName,
    "kubernetes.io/os": "linux",
    "kubernetes.io/arch": machine.architecture,
    "beta.kubernetes.io/os": "linux",
    "beta.kubernetes.io/arch": machine.architecture,
  };
}

/** The Node to create at registration (upstream initialNode). */
export function initialNode(id: NodeIdentity, machine: MachineInfo, k: KubeletConfiguration): ApiObject {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: id.nodeName,
      labels: { ...id.nodeLabels, ...defaultLabels(id, machine) },
      annotations: { "volumes.kubernetes.io/controller-managed-attach-detach": "true" },
    },
    spec: {
      ...(k.providerID ? { providerID: k.providerID } : {}),
      ...(k.registerWithTaints.length ? { taints: k.registerWithTaints } : {}),
    },
  };
}

const kib = (bytes: number) => `${Math.floor(bytes / 1024)}Ki`;

function thresholdBytes(value: string | undefined, capacity: number): number {
  if (!value) return 0;
  const t = parseThreshold(value);
  return t.kind === "quantity" ? t.value : Math.floor(t.fraction * capacity);
}

/** The node's pod capacity: maxPods, or with podsPerCore set, at most that many per core (upstream's cadvisor capacity). */
export function podCapacity(machine: MachineInfo, k: KubeletConfiguration): number {
  return k.podsPerCore > 0 ? Math.min(k.maxPods, machine.cpuCores * k.podsPerCore) : k.maxPods;
}

const reservedAmount = (k: KubeletConfiguration, name: string) =>
  (k.kubeReserved[name] ? parseQuantity(k.kubeReserved[name]!) : 0) + (k.systemReserved[name] ? parseQuantity(k.systemReserved[name]!) : 0);

/**
 * upstream GetNodeAllocatableReservation for memory and huge pages: per
 * resource, systemReserved + kubeReserved (+ the hard eviction threshold
 * memory.available for memory), in bytes; `binary` when the first amount was
 * written with a binary suffix (resource.Quantity prints the sum that way).
 * What the memory manager's reservedMemory must add up to.
 */
export function memoryReservation(machine: MachineInfo, k: KubeletConfiguration): Record<string, { bytes: number; binary: boolean }> {
  const out: Record<string, { bytes: number; binary: boolean }> = {};
  const add = (name: string, bytes: number, binary: boolean) => {
    if (bytes === 0) return;
    const have = out[name];
    out[name] = have ? { bytes: have.bytes + bytes, binary: have.binary } : { bytes, binary };
  };
  const amount = (text: string | undefined) => (text ? parseQuantity(text) : 0);
  const names = new Set([...Object.keys(k.systemReserved), ...Object.keys(k.kubeReserved)].filter((n) => n === "memory" || n.startsWith("hugepages-")));
  names.add("memory");
  for (const name of names) {
    add(name, amount(k.systemReserved[name]), /i$/.test(k.systemReserved[name] ?? ""));
    add(name, amount(k.kubeReserved[name]), /i$/.test(k.kubeReserved[name] ?? ""));
  }
  // A percentage becomes a binary quantity of the capacity (upstream GetThresholdQuantity).
  const hard = k.evictionHard["memory.available"];
  add("memory", thresholdBytes(hard, machine.memoryBytes), /(i|%)$/.test(hard ?? ""));
  return out;
}

/**
 * Reserved CPU in millicores: kube-reserved + system-reserved, or, when
 * reservedSystemCPUs lists CPUs, that many whole CPUs (upstream: the list
 * overwrites the cpu of both reservations).
 */
export function reservedMilliCpu(k: KubeletConfiguration): number {
  const listed = parseCpuSet(k.reservedSystemCPUs).length;
  return listed > 0 ? listed * 1000 : Math.round(reservedAmount(k, "cpu") * 1000);
}

/** The huge page pools as resources: hugepages-<size> → nr_hugepages × page size in bytes (upstream CapacityFromMachineInfo). */
export function hugePageCapacity(machine: MachineInfo): Record<string, number> {
  const out: Record<string, number> = {};
  for (const p of machine.hugePages) out[hugePageResourceName(p.pageSizeKiB)] = p.pageSizeKiB * 1024 * p.numPages;
  return out;
}

/**
 * Allocatable = capacity − kube-reserved − system-reserved − hard eviction
 * thresholds (cpu in millicores, bytes); each huge page size = its pool −
 * reserved of that name; memory also loses every pre-allocated huge page, as
 * upstream's MachineInfo setter (the pools' pages are not the pods' memory).
 */
export function allocatableAmounts(machine: MachineInfo, k: KubeletConfiguration) {
  const reserved = (name: string) => reservedAmount(k, name);
  const pools = hugePageCapacity(machine);
  const hugePages = Object.fromEntries(Object.entries(pools).map(([name, bytes]) => [name, Math.max(0, bytes - reserved(name))]));
  const poolBytes = Object.values(pools).reduce((a, b) => a + b, 0);
  return {
    cpu: Math.max(0, machine.cpuCores * 1000 - reservedMilliCpu(k)),
    memory: Math.max(0, Math.max(0, machine.memoryBytes - reserved("memory") - thresholdBytes(k.evictionHard["memory.available"], machine.memoryBytes)) - poolBytes),
    "ephemeral-storage": Math.max(
      0,
      machine.ephemeralStorageBytes - reserved("ephemeral-storage") - thresholdBytes(k.evictionHard["nodefs.available"], machine.ephemeralStorageBytes),
    ),
    pods: podCapacity(machine, k),
    hugePages,
  };
}

/**
 * What enforceNodeAllocatable "pods" writes on the kubepods cgroup (upstream's
 * getNodeAllocatableAbsolute): capacity − kube-reserved − system-reserved. The
 * hard eviction thresholds are not taken off, unlike the Node's allocatable:
 * the pods may use that memory until eviction acts (allocatableMemory.available
 * is measured against this limit, so taking the threshold off twice would evict
 * pods holding far less than their allocatable share).
 */
export function enforcedAllocatable(machine: MachineInfo, k: KubeletConfiguration): { cpu: number; memory: number } {
  return { cpu: allocatableAmounts(machine, k).cpu, memory: Math.max(0, machine.memoryBytes - reservedAmount(k, "memory")) };
}

/** What admission checks pods against. */
export function nodeFacts(id: NodeIdentity, machine: MachineInfo, k: KubeletConfiguration): NodeFacts {
  return {
    name: id.nodeName,
    labels: { ...id.nodeLabels, ...defaultLabels(id, machine) },
    taints: k.registerWithTaints.map((t) => ({ key: t.key, effect: t.effect, ...(t.value ? { value: t.value } : {}) })),
    allocatable: allocatableAmounts(machine, k),
  };
}

/** Capacity and allocatable as the Node reports them. */
export function resources(machine: MachineInfo, k: KubeletConfiguration): { capacity: Record<string, string>; allocatable: Record<string, string> } {
  const a = allocatableAmounts(machine, k);
  const quantities = (amounts: Record<string, number>) => Object.fromEntries(Object.entries(amounts).map(([name, bytes]) => [name, binaryQuantity(bytes)]));
  return {
    capacity: {
      cpu: String(machine.cpuCores),
      memory: kib(machine.memoryBytes),
      "ephemeral-storage": kib(machine.ephemeralStorageBytes),
      pods: String(podCapacity(machine, k)),
      ...quantities(hugePageCapacity(machine)),
    },
    allocatable: {
      cpu: a.cpu % 1000 === 0 ? String(a.cpu / 1000) : `${a.cpu}m`,
      memory: kib(a.memory),
      "ephemeral-storage": String(a["ephemeral-storage"]),
      pods: String(a.pods),
      ...quantities(a.hugePages),
    },
  };
}

export interface RuntimeHealth {
  /** Problems that make the node not ready; empty when ready. */
  errors: string[];
  runtimeVersion: string;
}

export interface Pressure {
  memoryPressure: boolean;
  diskPressure: boolean;
  pidPressure: boolean;
}

export const noPressure: Pressure = { memoryPressure: false, diskPressure: false, pidPressure: false };

/** [condition, flag, reason and message when False, reason and message when True], as upstream. */
const pressureConditions = [
  [
    "MemoryPressure",
    "memoryPressure",
    ["KubeletHasSufficientMemory", "kubelet has sufficient memory available"],
    ["KubeletHasInsufficientMemory", "kubelet has insufficient memory available"],
  ],
  ["DiskPressure", "diskPressure", ["KubeletHasNoDiskPressure", "kubelet has no disk pressure"], ["KubeletHasDiskPressure", "kubelet has disk pressure"]],
  ["PIDPressure", "pidPressure", ["KubeletHasSufficientPID", "kubelet has sufficient PID available"], ["KubeletHasInsufficientPID", "kubelet has insufficient PID available"]],
] as const;

/**
 * Conditions with upstream reasons; lastTransitionTime moves only when the
 * status flips, lastHeartbeatTime is `now`.
 */
export function nodeConditions(health: RuntimeHealth, previous: readonly NodeCondition[], now: string, pressure: Pressure = noPressure): NodeCondition[] {
  const make = (type: string, status: "True" | "False", reason: string, message: string): NodeCondition => {
    const before = previous.find((c) => c.type === type);
    return { type, status, reason, message, lastHeartbeatTime: now, lastTransitionTime: before && before.status === status ? before.lastTransitionTime : now };
  };
  const ready = health.errors.length === 0;
  return [
    ...pressureConditions.map(([type, flag, ok, bad]) => (pressure[flag] ? make(type, "True", bad[0], bad[1]) : make(type, "False", ok[0], ok[1]))),
    make("Ready", ready ? "True" : "False", ready ? "KubeletReady" : "KubeletNotReady", ready ? "kubelet is posting ready status" : health.errors.join(", ")),
  ];
}

export interface NodeStatusInput {
  id: NodeIdentity;
  machine: MachineInfo;
  config: KubeletConfiguration;
  health: RuntimeHealth;
  images: { names: string[]; sizeBytes: number }[];
  internalIP: string | undefined;
  previousConditions: readonly NodeCondition[];
  now: string;
  pressure?: Pressure;
  /** Extended resources from device plugins: capacity (every device) and allocatable (healthy ones). */
  extended?: { capacity: Record<string, string>; allocatable: Record<string, string> };
  /**
   * The Node as this agent found it at registration: a hugepages-<size> it
   * lists that this machine has no pool of any more is removed (null in the
   * patch), as upstream's reconcileHugePageResource.
   */
  registered?: ApiObject;
}

/** hugepages-<size> names the registered Node has and this machine has no pool of: null, which the patch deletes. */
function removedHugePages(registered: ApiObject | undefined, capacity: Record<string, string>): Record<string, null> {
  const before = ((registered?.status ?? {}) as { capacity?: Record<string, unknown> }).capacity ?? {};
  return Object.fromEntries(
    Object.keys(before)
      .filter((name) => name.startsWith("hugepages-") && !(name in capacity))
      .map((name) => [name, null]),
  );
}

export function nodeStatus(input: NodeStatusInput): ApiObject {
  const { id, machine, config } = input;
  const base = resources(machine, config);
  const addresses = [
    ...(id.nodeIPs.length ? id.nodeIPs : input.internalIP ? [input.internalIP] : []).map((address) => ({ type: "InternalIP", address })),
    { type: "Hostname", address: id.nodeName },
  ];
  const removed = removedHugePages(input.registered, base.capacity);
  return {
    capacity: { ...removed, ...base.capacity, ...input.extended?.capacity },
    allocatable: { ...removed, ...base.allocatable, ...input.extended?.allocatable },
    conditions: nodeConditions(input.health, input.previousConditions, input.now, input.pressure),
    addresses,
    daemonEndpoints: { kubeletEndpoint: { Port: config.port } },
    nodeInfo: {
      machineID: machine.machineID,
      systemUUID: machine.systemUUID,
      bootID: machine.bootID,
      kernelVersion: machine.kernelVersion,
      osImage: machine.osImage,
      containerRuntimeVersion: input.health.runtimeVersion,
      kubeletVersion: id.kubeletVersion,
      kubeProxyVersion: "",
      operatingSystem: "linux",
      architecture: machine.architecture,
    },
    images: [...input.images].sort((a, b) => b.sizeBytes - a.sizeBytes).slice(0, config.nodeStatusMaxImages < 0 ? undefined : config.nodeStatusMaxImages),
  };
}

/** Status without heartbeat times, to tell a real change from a heartbeat. */
export function withoutHeartbeats(status: ApiObject): string {
  const conditions = (status.conditions as NodeCondition[] | undefined)?.map(({ lastHeartbeatTime: _, ...rest }) => rest);
  return JSON.stringify({ ...status, conditions });
}
