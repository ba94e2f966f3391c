/**
 * Reading pods from the CRI: one pod as the planner sees it (`observePod`)
 * and every pod the runtime holds (`relistPods`, for the PLEG).
 */
import {
  ContainerState as CriContainerState,
  ContainerFilter,
  PodSandboxFilter,
  PodSandboxState,
  isNotFound,
  type ContainerStatus as CriContainerStatus,
  type CriService,
} from "../cri/index.ts";
import type { PodRef } from "../pods/identity.ts";
import { containerStateOf } from "./container-state.ts";
import * as L from "./labels.ts";
import { restoreOrphanSpec } from "./orphan-spec.ts";
import { terminationMessage } from "./termination.ts";
import type { ContainerState, ObservedContainer, ObservedPod, ObservedSandbox, RuntimePodRecord } from "./types.ts";

type ObserveCri = Pick<CriService, "listPodSandbox" | "listContainers" | "podSandboxStatus" | "containerStatus">;

const nsToMs = (ns: bigint): number | undefined => (ns > 0n ? Number(ns / 1_000_000n) : undefined);
const optionalGrace = (seconds: number | undefined) => (seconds === undefined ? {} : { podGracePeriodSeconds: seconds });

/** The runtime's message, and for an exited container its termination message (file or log tail) after it. */
function messageOf(s: CriContainerStatus): { message?: string } {
  if (s.state !== CriContainerState.CONTAINER_EXITED) return s.message ? { message: s.message } : {};
  const message = terminationMessage({
    exitCode: s.exitCode,
    runtimeMessage: s.message,
    mounts: s.mounts,
    terminationMessagePath: s.annotations[L.TerminationMessagePathAnnotation] ?? "",
    terminationMessagePolicy: s.annotations[L.TerminationMessagePolicyAnnotation] ?? "File",
    logPath: s.logPath,
  });
  return message ? { message } : {};
}

/** One pod as the planner sees it: its sandboxes (newest first, the ready one with its IPs) and containers (newest first, exited ones with their termination message). */
export async function observePod(cri: ObserveCri, ref: PodRef): Promise<ObservedPod> {
  const labelSelector = { [L.PodUidLabel]: ref.uid };
  const [sandboxes, containers] = await Promise.all([
    cri.listPodSandbox(PodSandboxFilter.create({ labelSelector })),
    cri.listContainers(ContainerFilter.create({ labelSelector })),
  ]);
  const observedSandboxes: ObservedSandbox[] = sandboxes
    .map((s) => ({
      id: s.id,
      ready: s.state === PodSandboxState.SANDBOX_READY,
      attempt: s.metadata?.attempt ?? 0,
      createdAt: nsToMs(s.createdAt) ?? 0,
      additionalIps: [] as string[],
    }))
    .sort((a, b) => b.createdAt - a.createdAt || b.attempt - a.attempt);
  const newest = observedSandboxes[0];
  if (newest?.ready) {
    const status = await cri.podSandboxStatus(newest.id).catch((err) => (isNotFound(err) ? undefined : Promise.reject(err)));
    const network = status?.status?.network;
    if (network?.ip) newest.ip = network.ip;
    newest.additionalIps = network?.additionalIps.map((a) => a.ip) ?? [];
  }
  const observedContainers = (
    await Promise.all(
      containers.map(async (c): Promise<ObservedContainer | undefined> => {
        const response = await cri.containerStatus(c.id).catch((err) => (isNotFound(err) ? undefined : Promise.reject(err)));
        const s = response?.status;
        if (!s) return undefined; // removed between list and status
        return {
          id: s.id,
          name: s.metadata?.name ?? c.labels[L.ContainerNameLabel] ?? "",
          sandboxId: c.podSandboxId,
          state: containerStateOf(s.state),
          hash: s.annotations[L.ContainerHashAnnotation] ?? c.annotations[L.ContainerHashAnnotation] ?? "",
          restartCount: Number(s.annotations[L.ContainerRestartCountAnnotation] ?? s.metadata?.attempt ?? 0),
          ...optionalGrace(L.podGracePeriodFrom(s.annotations)),
          restoredSpec: restoreOrphanSpec(s.metadata?.name ?? c.labels[L.ContainerNameLabel] ?? "", s.annotations),
          image: s.image?.image ?? "",
          imageRef: s.imageRef,
          createdAt: nsToMs(s.createdAt) ?? 0,
          startedAt: nsToMs(s.startedAt),
          finishedAt: nsToMs(s.finishedAt),
          ...(s.state === CriContainerState.CONTAINER_EXITED ? { exitCode: s.exitCode } : {}),
          ...(s.reason ? { reason: s.reason } : {}),
          ...messageOf(s),
        };
      }),
    )
  )
    .filter((c): c is ObservedContainer => c !== undefined)
    .sort((a, b) => b.createdAt - a.createdAt || b.restartCount - a.restartCount);
  return { uid: ref.uid, name: ref.name, namespace: ref.namespace, sandboxes: observedSandboxes, containers: observedContainers };
}
/** The states of a pod's sandboxes and containers as a relist lists them (RuntimePodRecord.entities), from a read of the pod. */
export function entitiesOf(observed: ObservedPod): Map<string, ContainerState> {
  const entities = new Map<string, ContainerState>();
  for (const s of observed.sandboxes) entities.set(s.id, s.ready ? "running" : "exited");
  for (const c of observed.containers) entities.set(c.id, c.state);
  return entities;
}

/** Every pod the runtime holds that a kubelet created, with the state of each sandbox and container (the PLEG's relist). */
export async function relistPods(cri: Pick<CriService, "listPodSandbox" | "listContainers">): Promise<RuntimePodRecord[]> {
  const [sandboxes, containers] = await Promise.all([cri.listPodSandbox(), cri.listContainers()]);
  const pods = new Map<string, RuntimePodRecord>();
  const record = (labels: Record<string, string>) => {
    const id = L.identityFromLabels(labels);
    if (!id) return undefined; // not created by a kubelet
    let r = pods.get(id.uid);
    if (!r) pods.set(id.uid, (r = { ...id, entities: new Map() }));
    return r;
  };
  for (const s of sandboxes) {
    const r = record(s.labels);
    if (!r) continue;
    r.entities.set(s.id, s.state === PodSandboxState.SANDBOX_READY ? "running" : "exited");
    (r.sandboxIds ??= new Set()).add(s.id);
  }
  for (const c of containers) record(c.labels)?.entities.set(c.id, containerStateOf(c.state));
  return [...pods.values()];
}
