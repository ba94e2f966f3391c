/**
 * An in-memory PodCgroups for tests of the agent's callers: it keeps the
 * state a real writer would leave (node settings, QoS values, one entry per
 * pod with its computed ResourceConfig), records calls, and fails on demand.
 */
import { join } from "node:path";
import type { Pod } from "../pods/schema.ts";
import type { PodCgroups } from "./pod-cgroups.ts";
import { podQosClass } from "./qos.ts";
import { podResourceConfig, qosResourceConfigs, type NodeAllocatable, type QosResourceConfigs, type ResourceConfig } from "./resources.ts";
import { CgroupError } from "./errors.ts";
import { podUid } from "../pods/identity.ts";

type Method = "setupNode" | "ensurePod" | "removePod" | "updateQos" | "listPodUids" | "enforceExisting";

export class FakePodCgroups implements PodCgroups {
  readonly version: "v1" | "v2";
  readonly calls: { method: Method; arg?: string }[] = [];
  readonly pods = new Map<string, { path: string; config: ResourceConfig }>();
  /** Existing cgroups outside the pod tree (enforceExisting fails NotFound for others) and what was written to them. */
  readonly existing = new Map<string, ResourceConfig | undefined>();
  node?: { allocatable: NodeAllocatable; enforce: boolean };
  qos?: QosResourceConfigs;
  /** UIDs whose removePod fails Busy (processes still in the cgroup). */
  readonly busy = new Set<string>();
  private readonly failures = new Map<Method, Error>();
  readonly kubepods: string;
  private readonly options: { podPidsLimit: number; cpuCFSQuota: boolean; cpuCFSQuotaPeriodUs: number };

  constructor(opts: { cgroupRoot?: string; version?: "v1" | "v2"; podPidsLimit?: number; cpuCFSQuota?: boolean; cpuCFSQuotaPeriodUs?: number } = {}) {
    this.version = opts.version ?? "v2";
    this.kubepods = join("/", opts.cgroupRoot || "/", "kubepods");
    this.options = { podPidsLimit: opts.podPidsLimit ?? -1, cpuCFSQuota: opts.cpuCFSQuota ?? true, cpuCFSQuotaPeriodUs: opts.cpuCFSQuotaPeriodUs ?? 100_000 };
  }

  /** The next call of `method` throws `error`. */
  failNext(method: Method, error: Error): void {
    this.failures.set(method, error);
  }

  private record(method: Method, arg?: string): void {
    this.calls.push(arg === undefined ? { method } : { method, arg });
    const e = this.failures.get(method);
    if (e) {
      this.failures.delete(method);
      throw e;
    }
  }

  podCgroupPath(pod: Pod): string {
    const qos = podQosClass(pod);
    const parent = qos === "Guaranteed" ? this.kubepods : join(this.kubepods, qos.toLowerCase());
    return join(parent, `pod${podUid(pod)}`);
  }

  async setupNode(opts: { allocatable: NodeAllocatable; enforce: boolean }): Promise<void> {
    this.record("setupNode");
    this.node = opts;
  }

  async ensurePod(pod: Pod): Promise<string> {
    this.record("ensurePod", pod.metadata.uid);
    const path = this.podCgroupPath(pod);
    this.pods.set(podUid(pod), { path, config: podResourceConfig(pod, this.options) });
    return path;
  }

  async removePod(uid: string): Promise<void> {
    this.record("removePod", uid);
    if (this.busy.has(uid)) throw new CgroupError("Busy", "remove", `pod${uid}`, "cgroup still has processes");
    this.pods.delete(uid);
  }

  async updateQos(activePods: Pod[]): Promise<void> {
    this.record("updateQos");
    this.qos = qosResourceConfigs(activePods);
  }

  async enforceExisting(name: string, config: ResourceConfig): Promise<string> {
    this.record("enforceExisting", name);
    const path = join("/", name);
    if (!this.existing.has(path)) throw new CgroupError("NotFound", "enforce", path, "the cgroup does not exist");
    this.existing.set(path, config);
    return path;
  }

  async listPodUids(): Promise<string[]> {
    this.record("listPodUids");
    return [...this.pods.keys()].sort();
  }
}
