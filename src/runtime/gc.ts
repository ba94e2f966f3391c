/** Removing what the runtime holds: one container or sandbox (`removeEntity`), and container GC (`collectGarbage`). */
import { ContainerState as CriContainerState, PodSandboxState, isNotFound, type CriService } from "../cri/index.ts";
import { errorMessage } from "../util/errors.ts";
import * as L from "./labels.ts";
import type { SyncResult } from "./types.ts";

/** One removal through the CRI as a SyncResult; what is already gone counts as removed. */
export async function removeEntity(action: SyncResult["action"], id: string, fn: () => Promise<void>): Promise<SyncResult> {
  try {
    await fn();
    return { action, target: id };
  } catch (err) {
    return isNotFound(err) ? { action, target: id } : { action, target: id, error: { reason: `${action}Error`, message: errorMessage(err) } };
  }
}
/**
 * Upstream's defaults (MinAge 0, MaxPerPodContainer 1): keep the newest
 * dead container per pod and name, for `logs --previous` and restart
 * counts; remove older ones, and dead sandboxes other than the newest
 * once no container uses them.
 */
export async function collectGarbage(cri: Pick<CriService, "listPodSandbox" | "listContainers" | "removeContainer" | "removePodSandbox">): Promise<void> {
  const [sandboxes, containers] = await Promise.all([cri.listPodSandbox(), cri.listContainers()]);
  const byKey = new Map<string, typeof containers>();
  for (const c of containers) {
    if (c.state !== CriContainerState.CONTAINER_EXITED) continue;
    const uid = c.labels[L.PodUidLabel];
    if (!uid) continue;
    const key = `${uid}/${c.metadata?.name}`;
    byKey.set(key, [...(byKey.get(key) ?? []), c]);
  }
  const removed = new Set<string>();
  for (const dead of byKey.values()) {
    dead.sort((a, b) => Number(b.createdAt - a.createdAt));
    for (const c of dead.slice(1)) {
      const r = await removeEntity("RemoveContainer", c.id, () => cri.removeContainer(c.id));
      if (!r.error) removed.add(c.id);
    }
  }
  const used = new Set(containers.filter((c) => !removed.has(c.id)).map((c) => c.podSandboxId));
  const newestByPod = new Map<string, string>();
  for (const s of [...sandboxes].sort((a, b) => Number(b.createdAt - a.createdAt))) {
    const uid = s.labels[L.PodUidLabel];
    if (uid && !newestByPod.has(uid)) newestByPod.set(uid, s.id);
  }
  for (const s of sandboxes) {
    const uid = s.labels[L.PodUidLabel];
    if (!uid || s.state === PodSandboxState.SANDBOX_READY || used.has(s.id) || newestByPod.get(uid) === s.id) continue;
    await removeEntity("RemovePodSandbox", s.id, () => cri.removePodSandbox(s.id));
  }
}
