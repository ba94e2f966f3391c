/** Test doubles: a state store in memory, a two-level topology builder, and a CPU manager that records what it was asked. */
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import type { StateStore } from "./checkpoint.ts";
import type { CpuManager } from "./manager.ts";
import type { CpuAdmitResult } from "./policy.ts";
import type { AllocateFailure, ProviderHints } from "../topologymanager/index.ts";
import type { CpuTopology } from "./topology.ts";

export function memoryStateStore(initial?: string): StateStore & { text: string | undefined; writes: number } {
  const s = {
    text: initial,
    writes: 0,
    read: () => s.text,
    write(t: string) {
      s.text = t;
      s.writes++;
    },
  };
  return s;
}

/** `sockets` × `coresPerSocket` × `threadsPerCore` CPUs numbered as Linux does (siblings N and N + cores), one NUMA node per socket. */
export function fakeTopology(sockets: number, coresPerSocket: number, threadsPerCore: number): CpuTopology {
  const cores = sockets * coresPerSocket;
  const cpus = [];
  for (let t = 0; t < threadsPerCore; t++)
    for (let core = 0; core < cores; core++) {
      const socket = Math.floor(core / coresPerSocket);
      cpus.push({ cpu: t * cores + core, core, socket, numa: socket });
    }
  return { cpus: cpus.sort((a, b) => a.cpu - b.cpu) };
}

export class FakeCpuManager implements CpuManager {
  readonly admitted: string[] = [];
  started = false;
  constructor(
    private readonly verdict: (pod: Pod) => CpuAdmitResult = () => ({ admit: true }),
    private readonly cpusets: Record<string, string> = {},
  ) {}
  containerHints(): ProviderHints {
    return undefined;
  }
  podHints(): ProviderHints {
    return undefined;
  }
  /** Records the pod once (its first container) and answers with the verdict. */
  allocate(pod: Pod, container: ContainerSpec): AllocateFailure | undefined {
    const first = [...(pod.spec.initContainers ?? []), ...pod.spec.containers][0];
    if (container === first) this.admitted.push(pod.metadata.name ?? "");
    const v = this.verdict(pod);
    return v.admit ? undefined : { reason: v.reason, message: v.message };
  }
  cpusetFor(pod: Pod, container: ContainerSpec): string | undefined {
    return this.cpusets[`${pod.metadata.uid}/${container.name}`];
  }
  exclusiveCpus(): readonly number[] {
    return [];
  }
  allocatableCpus(): readonly number[] {
    return [];
  }
  start(): void {
    this.started = true;
  }
  async [Symbol.asyncDispose](): Promise<void> {}
}
