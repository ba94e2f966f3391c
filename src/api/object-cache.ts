/**
 * The watched cache behind PodObjects in cluster mode (upstream's
 * watch-based configMap and secret managers,
 * pkg/kubelet/util/manager/watch_based_manager.go): each configMap or
 * secret that a pod on this node references gets one list+watch narrowed
 * to `metadata.name=<name>` (what the Node authorizer lets a node read), so
 * lookups on every sync cost nothing and updates arrive as the API server
 * sends them. An object's watch stops when the last pod referencing it is
 * unregistered. A lookup of an object no pod registered is one GET.
 */
import type { Pod } from "../pods/schema.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { ApiObject, KubeApi, ObjectResource } from "./index.ts";
import { reflect } from "./reflector.ts";
import { PodObjectError, type ConfigMapData, type PodObjects, type SecretData } from "./objects.ts";
import { podUid } from "../pods/identity.ts";

export interface WatchedPodObjects extends PodObjects, AsyncDisposable {
  /** The objects `pod` references are watched from now on; a changed spec drops what it no longer names. Idempotent. */
  registerPod(pod: Pod): void;
  /** The pod is gone: objects only it referenced stop being watched. */
  unregisterPod(uid: string): void;
}

interface Entry {
  resource: ObjectResource;
  namespace: string;
  name: string;
  pods: Set<string>;
  object: ApiObject | undefined;
  synced: boolean;
  lastError: unknown;
  onSynced: Set<() => void>;
  abort: AbortController;
}

type Ref = { resource: ObjectResource; name: string };

/** Upstream podutil.VisitPodSecretNames / VisitPodConfigmapNames: volumes, projected sources, env, envFrom, imagePullSecrets. */
export function referencedObjects(pod: Pod): Ref[] {
  const refs: Ref[] = [];
  const add = (resource: ObjectResource, name: unknown) => {
    if (typeof name === "string" && name) refs.push({ resource, name });
  };
  for (const vol of pod.spec.volumes ?? []) {
    add("configmaps", vol.configMap?.name);
    add("secrets", vol.secret?.secretName);
    for (const p of vol.projected?.sources ?? []) {
      add("configmaps", p.configMap?.name);
      add("secrets", p.secret?.name);
    }
  }
  for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
    for (const e of c.env ?? []) {
      const from = (e.valueFrom ?? {}) as { configMapKeyRef?: { name?: unknown }; secretKeyRef?: { name?: unknown } };
      add("configmaps", from.configMapKeyRef?.name);
      add("secrets", from.secretKeyRef?.name);
    }
    for (const e of c.envFrom ?? []) {
      const from = e as { configMapRef?: { name?: unknown }; secretRef?: { name?: unknown } };
      add("configmaps", from.configMapRef?.name);
      add("secrets", from.secretRef?.name);
    }
  }
  for (const s of (pod.spec as { imagePullSecrets?: { name?: unknown }[] }).imagePullSecrets ?? []) add("secrets", s.name);
  return refs;
}

const toConfigMap = (o: ApiObject): ConfigMapData => ({
  data: { ...((o["data"] as Record<string, string> | undefined) ?? {}) },
  binaryData: { ...((o["binaryData"] as Record<string, string> | undefined) ?? {}) },
});
const toSecret = (o: ApiObject): SecretData => ({
  data: { ...((o["data"] as Record<string, string> | undefined) ?? {}) },
  ...(typeof o["type"] === "string" ? { type: o["type"] as string } : {}),
});

export interface ObjectCacheOptions {
  api: KubeApi;
  clock: Clock;
  logger: Logger;
  /** How long a lookup waits for a new watch's first list (upstream waits a second; the API may be slower). */
  syncTimeoutMs?: number;
  /** Pause before listing again after a failed list or watch. */
  retryMs?: number;
}

export class ObjectCache implements WatchedPodObjects {
  private readonly entries = new Map<string, Entry>();
  private readonly podRefs = new Map<string, Set<string>>();
  private stopped = false;

  constructor(private readonly opts: ObjectCacheOptions) {}

  registerPod(pod: Pod): void {
    const uid = podUid(pod);
    const ns = pod.metadata.namespace ?? "default";
    const keys = new Set(referencedObjects(pod).map((r) => this.ensure(r.resource, ns, r.name, uid)));
    for (const old of this.podRefs.get(uid) ?? []) if (!keys.has(old)) this.release(old, uid);
    this.podRefs.set(uid, keys);
  }

  unregisterPod(uid: string): void {
    for (const key of this.podRefs.get(uid) ?? []) this.release(key, uid);
    this.podRefs.delete(uid);
  }

  /** Objects watched now, as `resource/namespace/name`; for tests and debugging. */
  watched(): string[] {
    return [...this.entries.keys()].sort();
  }

  async configMap(namespace: string, name: string): Promise<ConfigMapData | undefined> {
    const o = await this.lookup("configmaps", namespace, name);
    return o ? toConfigMap(o) : undefined;
  }

  async secret(namespace: string, name: string): Promise<SecretData | undefined> {
    const o = await this.lookup("secrets", namespace, name);
    return o ? toSecret(o) : undefined;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stopped = true;
    for (const e of this.entries.values()) e.abort.abort();
    this.entries.clear();
  }

  private async lookup(resource: ObjectResource, namespace: string, name: string): Promise<ApiObject | undefined> {
    const kind = resource === "configmaps" ? "ConfigMap" : "Secret";
    const entry = this.entries.get(`${resource}/${namespace}/${name}`);
    if (!entry) {
      try {
        return (await this.opts.api.listObjects(resource, namespace, `metadata.name=${name}`)).items[0];
      } catch (err) {
        throw new PodObjectError(kind, namespace, name, err);
      }
    }
    // Wait for the first list of a new watch, not for an API that already failed to answer it.
    if (!entry.synced && entry.lastError === undefined) {
      await new Promise<void>((resolve) => {
        const cancel = this.opts.clock.setTimer(this.opts.syncTimeoutMs ?? 10_000, () => (entry.onSynced.delete(done), resolve()));
        const done = () => (cancel(), resolve());
        entry.onSynced.add(done);
      });
    }
    if (!entry.synced) throw new PodObjectError(kind, namespace, name, entry.lastError ?? new Error("the watch has not synced yet"));
    return entry.object ? structuredClone(entry.object) : undefined;
  }

  private ensure(resource: ObjectResource, namespace: string, name: string, uid: string): string {
    const key = `${resource}/${namespace}/${name}`;
    let entry = this.entries.get(key);
    if (!entry) {
      entry = { resource, namespace, name, pods: new Set(), object: undefined, synced: false, lastError: undefined, onSynced: new Set(), abort: new AbortController() };
      this.entries.set(key, entry);
      if (!this.stopped) void this.run(entry);
    }
    entry.pods.add(uid);
    return key;
  }

  private release(key: string, uid: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    entry.pods.delete(uid);
    if (entry.pods.size) return;
    entry.abort.abort();
    this.entries.delete(key);
    this.opts.logger.v(4).info("stopped watching an object no pod references", { object: key });
  }

  /** One reflector per object, narrowed to its name. */
  private run(entry: Entry): Promise<void> {
    const { api, clock, logger } = this.opts;
    const selector = `metadata.name=${entry.name}`;
    return reflect({
      list: () => api.listObjects(entry.resource, entry.namespace, selector),
      watch: (rv, onEvent, signal) => api.watchObjects(entry.resource, entry.namespace, selector, rv, onEvent, signal),
      onList: (items) => {
        entry.object = items[0];
        this.markSynced(entry);
      },
      onEvent: (e) => {
        if (e.type === "ADDED" || e.type === "MODIFIED") entry.object = e.object;
        else if (e.type === "DELETED") entry.object = undefined;
      },
      onFailure: (err, failures) => {
        entry.lastError = err;
        this.settle(entry); // lookups waiting for the first list fail now instead of at their timeout
        // Offline for long: back off (doubling to 30 s) and say it once per outage, not every second.
        const retryMs = Math.min(30_000, (this.opts.retryMs ?? 1000) * 2 ** Math.min(failures, 5));
        const fields = { object: `${entry.resource}/${entry.namespace}/${entry.name}`, err: errorMessage(err), retryInMs: retryMs };
        if (failures === 0) logger.warn("watching a referenced object failed; retrying", fields);
        else logger.v(4).info("watching a referenced object failed again; retrying", fields);
        return retryMs;
      },
      clock,
      signal: entry.abort.signal,
    });
  }

  private markSynced(entry: Entry): void {
    entry.synced = true;
    entry.lastError = undefined;
    this.settle(entry);
  }

  private settle(entry: Entry): void {
    for (const done of entry.onSynced) done();
    entry.onSynced.clear();
  }
}
