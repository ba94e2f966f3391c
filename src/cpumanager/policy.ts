/**
 * The CPU manager's policies (upstream cpumanager policy_none.go and
 * policy_static.go) over one state that is written to the state file after
 * every change.
 *
 * static: the shared pool (`defaultCpuSet`) starts as every CPU; a container
 * of a Guaranteed pod whose CPU request is a whole number gets that many CPUs
 * to itself, taken from the pool minus the reserved CPUs (reservedSystemCPUs,
 * or kube + system reserved CPU rounded up, taken by topology from CPU 0 up).
 * Every other container runs on the shared pool, reserved CPUs included.
 * Non-restartable init containers hand their CPUs on to the pod's next
 * containers (upstream's cpusToReuse). A container keeps its CPUs until its
 * pod is no longer active.
 *
 * As a hint provider of the topology manager (upstream GetTopologyHints,
 * GetPodTopologyHints, generateCPUTopologyHints) it says on which NUMA nodes
 * a container's (or a pod's) exclusive CPUs fit, from the free CPUs or from
 * the ones it already holds, and takes them on the merged hint's nodes first
 * (upstream allocateCPUs).
 */
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { podUid } from "../pods/identity.ts";
import { staleContainerEntries } from "../pods/active.ts";
import { podQosClass } from "../cgroups/qos.ts";
import { containerRequests } from "../cgroups/resources.ts";
import { podLevelResourcesSet } from "../cgroups/pod-resources.ts";
import { type CpuManagerState, CheckpointError, decodeCheckpoint, encodeCheckpoint, type StateStore } from "./checkpoint.ts";
import { type CpuSet, difference, formatCpuSet, intersection, sameSet, union } from "../util/cpuset.ts";
import { type Take, takeByTopology, takeByTopologyDistributed } from "./assignment.ts";
import { allCpus, type CpuTopology, cpusPerCore } from "./topology.ts";
import { type AllocateFailure, generateHints, type NumaMask, type ProviderHints, type TopologyHint } from "../topologymanager/index.ts";

export type CpuAdmitResult = { admit: true } | { admit: false; reason: string; message: string };

/** The CPU manager cannot start with this configuration or state: the agent does not start (upstream: NewContainerManager fails). */
export class CpuManagerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CpuManagerError";
  }
}

export type PolicyName = "none" | "static";
export const CPU_MANAGER_POLICIES: readonly PolicyName[] = ["none", "static"];

export interface PolicyConfig {
  policy: PolicyName;
  /** full-pcpus-only: exclusive CPUs come in whole physical cores (SMTAlignmentError otherwise). */
  fullPcpusOnly: boolean;
  /**
   * distribute-cpus-across-numa: a request that needs several NUMA nodes is
   * spread evenly over them (in whole cores with full-pcpus-only), for the
   * reserved CPUs too, as upstream's staticPolicy.takeByTopology.
   */
  distributeCpusAcrossNuma: boolean;
  /**
   * align-by-socket: hints whose NUMA nodes span no more sockets than the
   * narrowest fit needs are preferred too, and the CPUs of the affinity's
   * sockets (not only its NUMA nodes) are taken first.
   */
  alignBySocket?: boolean;
  topology: CpuTopology;
  /** reservedSystemCPUs; empty: reserve kube + system reserved CPU, rounded up. */
  reservedSystemCpus: CpuSet;
  reservedMilliCpu: number;
  store: StateStore;
  /** The state file's path, for messages. */
  statePath: string;
}

const isRestartableInit = (pod: Pod, c: ContainerSpec) => c.restartPolicy === "Always" && (pod.spec.initContainers ?? []).includes(c);

/**
 * upstream guaranteedCPUs: a Guaranteed pod's container with a whole CPU
 * request; 0 otherwise. 0 too for a pod with pod-level resources: upstream's
 * static policy skips such pods in Allocate and in its topology hints
 * ("pod-level resources ... are not supported by the static CPU manager
 * policy"), so they run in the shared pool.
 */
export function guaranteedCpus(pod: Pod, container: ContainerSpec): number {
  if (podQosClass(pod) !== "Guaranteed" || podLevelResourcesSet(pod)) return 0;
  const milli = containerRequests(container).cpu ?? 0;
  return milli % 1000 === 0 ? milli / 1000 : 0;
}

/** upstream podGuaranteedCPUs: the long-running containers together, or the largest init container with the sidecars before it. */
export function podGuaranteedCpus(pod: Pod): number {
  let byInit = 0;
  let byRestartableInit = 0;
  for (const c of pod.spec.initContainers ?? []) {
    const n = guaranteedCpus(pod, c);
    if (isRestartableInit(pod, c)) byRestartableInit += n;
    else if (byRestartableInit + n > byInit) byInit = byRestartableInit + n;
  }
  let byApps = 0;
  for (const c of pod.spec.containers) byApps += guaranteedCpus(pod, c);
  return Math.max(byInit, byApps + byRestartableInit);
}

export class CpuPolicy {
  readonly reserved: CpuSet;
  private state: CpuManagerState;
  /** Pod UID → CPUs its finished init containers hand on (upstream cpusToReuse; one pod at a time). */
  private reuse = new Map<string, CpuSet>();
  /** The pod being admitted, the containers this admission gave CPUs and its reusable CPUs before (rollback). */
  private fresh: { uid: string; added: string[]; reuse: CpuSet } | undefined;

  constructor(private readonly cfg: PolicyConfig) {
    // upstream ValidateStaticPolicyOptions, its hardware part (the topology manager part: src/config/cpu-policy-options.ts).
    if (cfg.policy === "static" && cfg.alignBySocket && distinct(cfg.topology, "socket") > distinct(cfg.topology, "numa"))
      throw new CpuManagerError("Align by socket is not compatible with hardware where number of sockets are more than number of NUMA");
    this.reserved = cfg.policy === "static" ? reservedCpus(cfg) : [];
    this.state = this.restore();
    this.save();
  }

  get name(): PolicyName {
    return this.cfg.policy;
  }

  snapshot(): CpuManagerState {
    return structuredClone(this.state);
  }

  private restore(): CpuManagerState {
    const fresh: CpuManagerState = { policyName: this.cfg.policy, defaultCpuSet: [], entries: {} };
    const fail = (why: string) =>
      new CpuManagerError(
        `could not restore state from checkpoint: ${why}, please drain this node and delete the CPU manager checkpoint file "${this.cfg.statePath}" before restarting Kubelet`,
      );
    const text = this.cfg.store.read();
    let s = fresh;
    if (text !== undefined) {
      try {
        s = decodeCheckpoint(text);
      } catch (err) {
        if (err instanceof CheckpointError) throw fail(err.message);
        throw err;
      }
      if (s.policyName !== this.cfg.policy) throw fail(`configured policy "${this.cfg.policy}" differs from state checkpoint policy "${s.policyName}"`);
    }
    if (this.cfg.policy === "static") {
      const why = this.validateStatic(s);
      if (why) throw new CpuManagerError(`static policy invalid state, please drain node and remove policy state file "${this.cfg.statePath}": ${why}`);
    }
    return s;
  }

  /** upstream staticPolicy.validateState; an empty state starts with every CPU shared. */
  private validateStatic(s: CpuManagerState): string | undefined {
    const all = allCpus(this.cfg.topology);
    const assigned = Object.entries(s.entries).flatMap(([uid, cs]) => Object.entries(cs).map(([name, set]) => ({ uid, name, set })));
    if (s.defaultCpuSet.length === 0) {
      if (assigned.length) return "default cpuset cannot be empty";
      s.defaultCpuSet = all;
      return undefined;
    }
    if (!sameSet(intersection(this.reserved, s.defaultCpuSet), this.reserved))
      return `not all reserved cpus: "${formatCpuSet(this.reserved)}" are present in defaultCpuSet: "${formatCpuSet(s.defaultCpuSet)}"`;
    for (const a of assigned)
      if (intersection(s.defaultCpuSet, a.set).length)
        return `pod: ${a.uid}, container: ${a.name} cpuset: "${formatCpuSet(a.set)}" overlaps with default cpuset "${formatCpuSet(s.defaultCpuSet)}"`;
    const known = union(s.defaultCpuSet, ...assigned.map((a) => a.set));
    if (!sameSet(known, all)) return `current set of available CPUs "${formatCpuSet(all)}" doesn't match with CPUs in state "${formatCpuSet(known)}"`;
    return undefined;
  }

  private save(): void {
    this.cfg.store.write(encodeCheckpoint(this.state));
  }

  /** The CPUs a container runs on: its own, or the shared pool; undefined with the none policy (no cpuset is written). */
  cpusOf(podUid: string, container: string): CpuSet | undefined {
    if (this.cfg.policy !== "static") return undefined;
    return this.state.entries[podUid]?.[container] ?? this.state.defaultCpuSet;
  }

  /** upstream GetExclusiveCPUs: the container's own CPUs; empty on the shared pool. */
  exclusiveCpus(podUid: string, container: string): CpuSet {
    return this.state.entries[podUid]?.[container] ?? [];
  }

  /** upstream GetAllocatableCPUs: every CPU but the reserved ones with static; none with the none policy. */
  allocatableCpus(): CpuSet {
    return this.cfg.policy === "static" ? difference(allCpus(this.cfg.topology), this.reserved) : [];
  }

  /** Every container of the pod, init containers first, with no NUMA affinity (topology manager policy "none"); nothing is kept when one fails. */
  allocatePod(pod: Pod): CpuAdmitResult {
    this.beginAdmission(pod);
    for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
      const err = this.allocate(pod, c, undefined);
      if (err !== undefined) {
        this.rollback(pod);
        return typeof err === "string"
          ? { admit: false, reason: "UnexpectedAdmissionError", message: `Allocate failed due to ${err}, which is unexpected` }
          : { admit: false, ...err };
      }
    }
    return { admit: true };
  }

  /** The NUMA nodes of the CPUs. */
  private numaNodes(): number[] {
    return [...new Set(this.cfg.topology.cpus.map((c) => c.numa))].sort((a, b) => a - b);
  }

  private cpusIn(mask: NumaMask, among: CpuSet): CpuSet {
    const numa = new Map(this.cfg.topology.cpus.map((c) => [c.cpu, c.numa]));
    return among.filter((cpu) => (mask >> BigInt(numa.get(cpu) ?? 0)) & 1n);
  }

  /** upstream generateCPUTopologyHints. */
  private hints(available: CpuSet, reusable: CpuSet, request: number): TopologyHint[] {
    const all = allCpus(this.cfg.topology);
    return generateHints({
      nodes: this.numaNodes(),
      request,
      totalIn: (mask) => this.cpusIn(mask, all).length,
      availableIn: (mask) => this.cpusIn(mask, available).length,
      reusableIn: (mask) => (this.cpusIn(mask, reusable).length === reusable.length ? reusable.length : undefined),
      ...(this.cfg.alignBySocket ? { alsoPreferred: (mask: NumaMask, min: number) => this.socketAligned(mask, min) } : {}),
    });
  }

  /** upstream isHintSocketAligned: the mask's NUMA nodes lie on as few sockets as the narrowest fit needs. */
  private socketAligned(mask: NumaMask, minAffinitySize: number): boolean {
    const perSocket = Math.floor(distinct(this.cfg.topology, "numa") / distinct(this.cfg.topology, "socket"));
    if (perSocket === 0) return false;
    const minSockets = Math.floor((minAffinitySize + perSocket - 1) / perSocket);
    const sockets = new Set(this.cfg.topology.cpus.filter((c) => (mask >> BigInt(c.numa)) & 1n).map((c) => c.socket));
    return sockets.size === minSockets;
  }

  /** upstream getAlignedCPUs: of `among`, the CPUs on the affinity's NUMA nodes, or with align-by-socket on their sockets. */
  private alignedCpus(mask: NumaMask, among: CpuSet): CpuSet {
    if (!this.cfg.alignBySocket) return this.cpusIn(mask, among);
    const sockets = new Set(this.cfg.topology.cpus.filter((c) => (mask >> BigInt(c.numa)) & 1n).map((c) => c.socket));
    const inSockets = new Set(this.cfg.topology.cpus.filter((c) => sockets.has(c.socket)).map((c) => c.cpu));
    return among.filter((cpu) => inSockets.has(cpu));
  }

  /** upstream GetAvailableCPUs: the shared pool without the reserved CPUs. */
  private available(): CpuSet {
    return difference(this.state.defaultCpuSet, this.reserved);
  }

  /** upstream staticPolicy.GetTopologyHints: none for a container on the shared pool; from its CPUs when it has them already (an agent restart). */
  containerHints(pod: Pod, c: ContainerSpec): ProviderHints {
    if (this.cfg.policy !== "static") return undefined;
    const requested = guaranteedCpus(pod, c);
    if (requested === 0) return undefined;
    const allocated = this.state.entries[podUid(pod)]?.[c.name];
    if (allocated) return { cpu: allocated.length === requested ? this.hints(allocated, [], requested) : [] };
    return { cpu: this.hints(this.available(), this.reuse.get(podUid(pod)) ?? [], requested) };
  }

  /** upstream staticPolicy.GetPodTopologyHints. */
  podHints(pod: Pod): ProviderHints {
    if (this.cfg.policy !== "static") return undefined;
    const requested = podGuaranteedCpus(pod);
    if (requested === 0) return undefined;
    let assigned: CpuSet = [];
    for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
      const allocated = this.state.entries[podUid(pod)]?.[c.name];
      if (!allocated) continue;
      if (allocated.length !== guaranteedCpus(pod, c)) return { cpu: [] };
      assigned = union(assigned, allocated);
    }
    if (assigned.length === requested) return { cpu: this.hints(assigned, [], requested) };
    return { cpu: this.hints(this.available(), union(this.reuse.get(podUid(pod)) ?? [], assigned), requested) };
  }

  /**
   * upstream staticPolicy.Allocate for one container: its CPUs are taken from
   * the NUMA nodes of `affinity` first, the rest (if they do not hold enough)
   * from the others. Written to the state file at once.
   */
  allocate(pod: Pod, c: ContainerSpec, affinity: NumaMask | undefined): AllocateFailure | undefined {
    if (this.cfg.policy !== "static") return undefined;
    const uid = podUid(pod);
    if (this.fresh?.uid !== uid) this.beginAdmission(pod);
    const had = this.state.entries[uid]?.[c.name] !== undefined;
    const err = this.allocateContainer(pod, c, affinity);
    if (err !== undefined) return err;
    if (!had && this.state.entries[uid]?.[c.name]) this.fresh!.added.push(c.name);
    this.save();
    return undefined;
  }

  /** What allocate() gives the pod from now on is what rollback() gives back. */
  beginAdmission(pod: Pod): void {
    const uid = podUid(pod);
    this.fresh = { uid, added: [], reuse: [...(this.reuse.get(uid) ?? [])] };
  }

  /** The pod was not admitted: the CPUs this admission gave it go back to the pool. */
  rollback(pod: Pod): void {
    if (this.fresh?.uid !== podUid(pod)) return;
    for (const name of this.fresh.added) this.release(this.fresh.uid, name);
    this.reuse.set(this.fresh.uid, this.fresh.reuse);
    this.fresh = undefined;
    this.save();
  }

  private allocateContainer(pod: Pod, c: ContainerSpec, affinity: NumaMask | undefined): AllocateFailure | undefined {
    const n = guaranteedCpus(pod, c);
    if (n === 0) return undefined;
    const uid = podUid(pod);
    const perCore = cpusPerCore(this.cfg.topology);
    if (this.cfg.fullPcpusOnly) {
      const smt = (message: string): AllocateFailure => ({ reason: "SMTAlignmentError", message });
      if (n % perCore !== 0) return smt(`SMT Alignment Error: requested ${n} cpus not multiple cpus per core = ${perCore}`);
      const reservedCores = new Set(this.cfg.topology.cpus.filter((x) => this.reserved.includes(x.cpu)).map((x) => x.core));
      const physical = difference(
        this.state.defaultCpuSet,
        this.cfg.topology.cpus.filter((x) => reservedCores.has(x.core)).map((x) => x.cpu),
      );
      if (n > physical.length)
        return smt(`SMT Alignment Error: not enough free physical CPUs: available physical CPUs = ${physical.length}, requested CPUs = ${n}, CPUs per core = ${perCore}`);
    }
    const existing = this.state.entries[uid]?.[c.name];
    if (existing) {
      this.updateReuse(pod, c, existing);
      return undefined;
    }
    const reusable = this.reuse.get(uid) ?? [];
    const available = union(this.available(), reusable);
    // upstream allocateCPUs: the CPUs on the affinity's NUMA nodes first, by topology, then the rest.
    const aligned = affinity === undefined ? [] : this.alignedCpus(affinity, available);
    const first = takeCpus(this.cfg, aligned, Math.min(n, aligned.length));
    if (!first.ok) return first.error;
    const rest = takeCpus(this.cfg, difference(available, first.cpus), n - first.cpus.length);
    // A message, not an admission error of its own: upstream's UnexpectedAdmissionError.
    if (!rest.ok) return rest.error;
    const took = { cpus: union(first.cpus, rest.cpus) };
    this.state.defaultCpuSet = difference(this.state.defaultCpuSet, took.cpus);
    this.state.entries[uid] = { ...this.state.entries[uid], [c.name]: took.cpus };
    this.updateReuse(pod, c, took.cpus);
    return undefined;
  }

  private updateReuse(pod: Pod, c: ContainerSpec, set: CpuSet): void {
    const uid = podUid(pod);
    for (const other of this.reuse.keys()) if (other !== uid) this.reuse.delete(other);
    const current = this.reuse.get(uid) ?? [];
    const plainInit = (pod.spec.initContainers ?? []).includes(c) && !isRestartableInit(pod, c);
    this.reuse.set(uid, plainInit ? union(current, set) : difference(current, set));
  }

  /** upstream RemoveContainer: CPUs no sibling shares go back to the pool. */
  private release(podUid: string, container: string): void {
    const set = this.state.entries[podUid]?.[container];
    if (!set) return;
    const { [container]: _gone, ...rest } = this.state.entries[podUid]!;
    const siblings = union(...Object.values(rest));
    if (Object.keys(rest).length) this.state.entries[podUid] = rest;
    else delete this.state.entries[podUid];
    this.state.defaultCpuSet = union(this.state.defaultCpuSet, difference(set, siblings));
  }

  /** upstream removeStaleState: assignments of containers no active pod has are released. Returns whether anything was. */
  removeStale(active: readonly Pod[]): boolean {
    const stale = staleContainerEntries(this.state.entries, active);
    for (const { uid, container } of stale) this.release(uid, container);
    if (stale.length) this.save();
    return stale.length > 0;
  }
}

const distinct = (t: CpuTopology, key: "socket" | "numa") => new Set(t.cpus.map((c) => c[key])).size;

/** upstream staticPolicy.takeByTopology: distributed over NUMA nodes with distribute-cpus-across-numa (in groups of a core's CPUs with full-pcpus-only), packed otherwise. */
function takeCpus(cfg: PolicyConfig, available: CpuSet, n: number): Take {
  if (!cfg.distributeCpusAcrossNuma) return takeByTopology(cfg.topology, available, n);
  return takeByTopologyDistributed(cfg.topology, available, n, cfg.fullPcpusOnly ? cpusPerCore(cfg.topology) : 1);
}

function reservedCpus(cfg: PolicyConfig): CpuSet {
  const all = allCpus(cfg.topology);
  if (cfg.reservedSystemCpus.length) {
    const offline = difference(cfg.reservedSystemCpus, all);
    if (offline.length) throw new CpuManagerError(`[cpumanager] reservedSystemCPUs "${formatCpuSet(offline)}" are not online CPUs of this host ("${formatCpuSet(all)}")`);
    return cfg.reservedSystemCpus;
  }
  if (cfg.reservedMilliCpu <= 0) throw new CpuManagerError("[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero");
  const n = Math.ceil(cfg.reservedMilliCpu / 1000);
  const took = takeCpus(cfg, all, n);
  if (!took.ok || took.cpus.length !== n)
    throw new CpuManagerError(`[cpumanager] unable to reserve the required amount of CPUs (size of ${took.ok ? formatCpuSet(took.cpus) : "none"} did not equal ${n})`);
  return took.cpus;
}
