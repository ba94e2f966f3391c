/**
 * An in-memory API server for unit tests: objects with resourceVersions,
 * a pod watch that replays from a resourceVersion (or answers Gone when it
 * is too old), injected errors, and a record of every call.
 */
import { ApiError } from "./errors.ts";
import type { ApiObject, KubeApi, ObjectResource, PodList, TokenRequestSpec } from "./index.ts";
import type { WatchEvent } from "./rest.ts";

type Listener = (e: WatchEvent<ApiObject>) => void;

export class FakeKubeApi implements KubeApi {
  readonly nodes = new Map<string, ApiObject>();
  readonly leases = new Map<string, ApiObject>();
  readonly pods = new Map<string, ApiObject>();
  readonly events: ApiObject[] = [];
  readonly calls: { method: string; args: unknown[] }[] = [];
  private rv = 1;
  private history: { rv: number; event: WatchEvent<ApiObject> }[] = [];
  private watchers = new Set<{ selector: (o: ApiObject) => boolean; listener: Listener; end: () => void }>();
  private failures = new Map<string, ApiError[]>();
  /** Watch history older than this resourceVersion answers 410 Gone. */
  compactedBefore = 0;

  private unreachable = false;

  /** Test control: while unreachable, every call fails as a refused connection would, and open watches end. */
  setReachable(reachable: boolean): void {
    this.unreachable = !reachable;
    if (!reachable) this.closeWatches();
  }

  failNext(method: keyof KubeApi, err: ApiError): void {
    this.failures.set(method, [...(this.failures.get(method) ?? []), err]);
  }

  private enter(method: string, args: unknown[]): void {
    this.calls.push({ method, args });
    if (this.unreachable) throw new ApiError("Unreachable", 0, method, "", "connect ECONNREFUSED");
    const err = this.failures.get(method)?.shift();
    if (err) throw err;
  }

  private stamp<T extends ApiObject>(o: T): T {
    const copy = structuredClone(o);
    copy.metadata = { ...copy.metadata, resourceVersion: String(++this.rv) };
    copy.metadata.uid ??= `uid-${this.rv}`;
    return copy;
  }

  /** Test control: writes a pod as the API server would, notifying watchers. */
  putPod(pod: ApiObject): ApiObject {
    const key = `${pod.metadata?.namespace}/${pod.metadata?.name}`;
    const type = this.pods.has(key) ? "MODIFIED" : "ADDED";
    const stored = this.stamp(pod);
    this.pods.set(key, stored);
    this.emit({ type, object: stored });
    return stored;
  }

  removePod(namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    const pod = this.pods.get(key);
    if (!pod) return;
    this.pods.delete(key);
    this.emit({ type: "DELETED", object: this.stamp(pod) });
  }

  bookmark(): void {
    this.emit({ type: "BOOKMARK", object: { metadata: { resourceVersion: String(++this.rv) } } });
  }

  private emit(event: WatchEvent<ApiObject>): void {
    this.history.push({ rv: Number(event.object.metadata?.resourceVersion), event });
    for (const w of this.watchers) if (event.type === "BOOKMARK" || w.selector(event.object)) w.listener(structuredClone(event));
  }

  async getNode(name: string) {
    this.enter("getNode", [name]);
    return structuredClone(this.nodes.get(name));
  }
  async createNode(node: ApiObject) {
    this.enter("createNode", [node]);
    const name = node.metadata!.name!;
    if (this.nodes.has(name)) throw new ApiError("AlreadyExists", 409, "POST", `/api/v1/nodes`, `nodes "${name}" already exists`);
    const stored = this.stamp(node);
    this.nodes.set(name, stored);
    return structuredClone(stored);
  }
  async patchNode(name: string, patch: unknown) {
    this.enter("patchNode", [name, patch]);
    const node = this.nodes.get(name);
    if (!node) throw new ApiError("NotFound", 404, "PATCH", `/api/v1/nodes/${name}`, "not found");
    const p = patch as { metadata?: { labels?: Record<string, string | null>; annotations?: Record<string, string | null> } };
    const meta = node.metadata as { labels?: Record<string, string>; annotations?: Record<string, string> };
    // Strategic merge of maps: null removes a key.
    const merge = (into: Record<string, string> | undefined, from: Record<string, string | null> | undefined) => {
      const out = { ...into };
      for (const [k, v] of Object.entries(from ?? {})) {
        if (v === null) delete out[k];
        else out[k] = v;
      }
      return out;
    };
    meta.labels = merge(meta.labels, p.metadata?.labels);
    if (p.metadata?.annotations) meta.annotations = merge(meta.annotations, p.metadata.annotations);
    return structuredClone(node);
  }
  async patchNodeStatus(name: string, patch: unknown) {
    this.enter("patchNodeStatus", [name, patch]);
    const node = this.nodes.get(name);
    if (!node) throw new ApiError("NotFound", 404, "PATCH", `/api/v1/nodes/${name}/status`, "not found");
    // A strategic merge keeps the status fields the patch leaves out (one level: enough for the node controller's patches).
    node.status = { ...(node.status as object | undefined), ...((patch as { status: object }).status ?? {}) };
    return structuredClone(node);
  }
  async getLease(namespace: string, name: string) {
    this.enter("getLease", [namespace, name]);
    return structuredClone(this.leases.get(`${namespace}/${name}`));
  }
  async createLease(namespace: string, lease: ApiObject) {
    this.enter("createLease", [namespace, lease]);
    const key = `${namespace}/${lease.metadata!.name}`;
    if (this.leases.has(key)) throw new ApiError("AlreadyExists", 409, "POST", "leases", "exists");
    const stored = this.stamp(lease);
    this.leases.set(key, stored);
    return structuredClone(stored);
  }
  async updateLease(namespace: string, lease: ApiObject) {
    this.enter("updateLease", [namespace, lease]);
    const key = `${namespace}/${lease.metadata!.name}`;
    const current = this.leases.get(key);
    if (!current) throw new ApiError("NotFound", 404, "PUT", "leases", "not found");
    if (current.metadata?.resourceVersion !== lease.metadata?.resourceVersion) throw new ApiError("Conflict", 409, "PUT", "leases", "the object has been modified");
    const stored = this.stamp(lease);
    this.leases.set(key, stored);
    return structuredClone(stored);
  }
  private selectorFor(fieldSelector: string): (o: ApiObject) => boolean {
    const m = /^spec\.nodeName=(.*)$/.exec(fieldSelector);
    return (o) => !m || (o.spec as { nodeName?: string } | undefined)?.nodeName === m[1];
  }
  async listPods(fieldSelector: string): Promise<PodList> {
    this.enter("listPods", [fieldSelector]);
    const select = this.selectorFor(fieldSelector);
    return { items: [...this.pods.values()].filter(select).map((p) => structuredClone(p)), resourceVersion: String(this.rv) };
  }
  async watchPods(fieldSelector: string, resourceVersion: string, onEvent: Listener, signal: AbortSignal): Promise<void> {
    this.enter("watchPods", [fieldSelector, resourceVersion]);
    const from = Number(resourceVersion);
    if (from < this.compactedBefore) throw new ApiError("Expired", 410, "WATCH", "/api/v1/pods", "too old resource version");
    const select = this.selectorFor(fieldSelector);
    for (const h of this.history) if (h.rv > from && (h.event.type === "BOOKMARK" || select(h.event.object))) onEvent(structuredClone(h.event));
    await new Promise<void>((resolve) => {
      const watcher = { selector: select, listener: onEvent, end: () => (this.watchers.delete(watcher), resolve()) };
      this.watchers.add(watcher);
      signal.addEventListener("abort", watcher.end, { once: true });
    });
  }
  /** Watches still open (a stopped client must have ended all of its own). */
  get openWatches(): number {
    return this.watchers.size;
  }
  /** Test control: ends every open watch as a server timeout would. */
  closeWatches(): void {
    for (const w of [...this.watchers]) w.end();
  }
  /** Test control: the watch cache dropped the watchers' version; they get a 410 ERROR event. */
  expireWatches(): void {
    for (const w of [...this.watchers]) w.listener({ type: "ERROR", object: { kind: "Status", code: 410, reason: "Expired", message: "too old resource version" } as ApiObject });
  }
  async getPod(namespace: string, name: string) {
    this.enter("getPod", [namespace, name]);
    return structuredClone(this.pods.get(`${namespace}/${name}`));
  }
  async createPod(namespace: string, pod: ApiObject) {
    this.enter("createPod", [namespace, pod]);
    if (this.pods.has(`${namespace}/${pod.metadata!.name}`)) throw new ApiError("AlreadyExists", 409, "POST", "pods", "exists");
    return this.putPod({ ...pod, metadata: { ...pod.metadata, namespace } });
  }
  async patchPodStatus(namespace: string, name: string, patch: unknown): Promise<void> {
    this.enter("patchPodStatus", [namespace, name, patch]);
    const pod = this.pods.get(`${namespace}/${name}`);
    if (!pod) throw new ApiError("NotFound", 404, "PATCH", `pods/${name}/status`, "not found");
    // A strategic merge patch, as the API server applies it: conditions merge by type, podIPs and hostIPs
    // by ip (PodStatus' patchMergeKeys; a `{$patch: "replace"}` element replaces the list, a `{<key>, $patch:
    // "delete"}` one removes that element), the rest replaces.
    const before = (pod.status ?? {}) as Record<string, unknown>;
    const change = (patch as { status: Record<string, unknown> }).status;
    const status = { ...before, ...change };
    for (const [field, key] of [
      ["conditions", "type"],
      ["podIPs", "ip"],
      ["hostIPs", "ip"],
    ] as const) {
      const items = change[field] as Record<string, unknown>[] | undefined;
      if (!items) continue;
      const replace = items.some((c) => c["$patch"] === "replace");
      let merged = replace ? [] : [...((before[field] as Record<string, unknown>[] | undefined) ?? [])];
      const deleted = new Set(items.filter((c) => c["$patch"] === "delete").map((c) => c[key]));
      merged = merged.filter((m) => !deleted.has(m[key]));
      for (const c of items.filter((c) => c["$patch"] === undefined)) {
        const i = merged.findIndex((m) => m[key] === c[key]);
        if (i >= 0) merged[i] = c;
        else merged.push(c);
      }
      status[field] = merged;
    }
    this.putPod({ ...pod, status });
  }
  async deletePod(namespace: string, name: string, opts: { uid: string; gracePeriodSeconds: number }) {
    this.enter("deletePod", [namespace, name, opts]);
    const pod = this.pods.get(`${namespace}/${name}`);
    if (!pod) return;
    if (pod.metadata?.uid !== opts.uid) throw new ApiError("Conflict", 409, "DELETE", `pods/${name}`, "precondition failed: UID");
    this.removePod(namespace, name);
  }
  async createEvent(namespace: string, event: ApiObject) {
    this.enter("createEvent", [namespace, event]);
    this.events.push(structuredClone(event));
  }
  /** Test control: tokens the fake TokenReview knows. */
  readonly tokens = new Map<string, { username: string; groups?: string[] }>();
  async reviewToken(token: string) {
    this.enter("reviewToken", [token]);
    const user = this.tokens.get(token);
    return user ? { authenticated: true, user } : { authenticated: false };
  }
  async reviewAccess(spec: ApiObject) {
    this.enter("reviewAccess", [spec]);
    return { allowed: true };
  }
  async patchEvent(namespace: string, name: string, patch: unknown) {
    this.enter("patchEvent", [namespace, name, patch]);
  }

  /** configMaps and secrets, keyed `resource/namespace/name`. */
  readonly objects = new Map<string, ApiObject>();
  private objectWatchers = new Set<{ key: (o: ApiObject) => boolean; listener: Listener; end: () => void }>();
  /** Test control: the issued tokens, and what their lifetime is (expirationSeconds by default). */
  readonly issuedTokens: { namespace: string; serviceAccount: string; spec: TokenRequestSpec; token: string }[] = [];

  private objectKey(resource: ObjectResource, namespace: string, name: string) {
    return `${resource}/${namespace}/${name}`;
  }
  private nameSelector(resource: ObjectResource, namespace: string, fieldSelector: string): (key: string) => boolean {
    const name = /^metadata\.name=(.*)$/.exec(fieldSelector)?.[1];
    return (key) => key.startsWith(`${resource}/${namespace}/`) && (name === undefined || key === this.objectKey(resource, namespace, name));
  }

  /** Test control: creates or replaces a configMap or secret, notifying watchers. */
  putObject(resource: ObjectResource, obj: ApiObject): ApiObject {
    const key = this.objectKey(resource, obj.metadata!.namespace!, obj.metadata!.name!);
    const type = this.objects.has(key) ? "MODIFIED" : "ADDED";
    const stored = this.stamp(obj);
    this.objects.set(key, stored);
    for (const w of this.objectWatchers) if (w.key({ metadata: { name: key } })) w.listener(structuredClone({ type, object: stored }));
    return stored;
  }
  deleteObject(resource: ObjectResource, namespace: string, name: string): void {
    const key = this.objectKey(resource, namespace, name);
    const obj = this.objects.get(key);
    if (!obj) return;
    this.objects.delete(key);
    const gone = this.stamp(obj);
    for (const w of this.objectWatchers) if (w.key({ metadata: { name: key } })) w.listener(structuredClone({ type: "DELETED", object: gone }));
  }
  /** Test control: open configMap/secret watches. */
  objectWatchCount(): number {
    return this.objectWatchers.size;
  }
  async listObjects(resource: ObjectResource, namespace: string, fieldSelector: string): Promise<PodList> {
    this.enter("listObjects", [resource, namespace, fieldSelector]);
    const select = this.nameSelector(resource, namespace, fieldSelector);
    return { items: [...this.objects.entries()].filter(([k]) => select(k)).map(([, o]) => structuredClone(o)), resourceVersion: String(this.rv) };
  }
  async watchObjects(resource: ObjectResource, namespace: string, fieldSelector: string, resourceVersion: string, onEvent: Listener, signal: AbortSignal): Promise<void> {
    this.enter("watchObjects", [resource, namespace, fieldSelector, resourceVersion]);
    const select = this.nameSelector(resource, namespace, fieldSelector);
    await new Promise<void>((resolve) => {
      const watcher = { key: (o: ApiObject) => select(o.metadata!.name!), listener: onEvent, end: () => (this.objectWatchers.delete(watcher), resolve()) };
      this.objectWatchers.add(watcher);
      if (signal.aborted) watcher.end();
      signal.addEventListener("abort", watcher.end, { once: true });
    });
  }
  /** Test control: ends every configMap/secret watch as a server timeout would. */
  closeObjectWatches(): void {
    for (const w of [...this.objectWatchers]) w.end();
  }
  /** Test control: the current time for token expiry (milliseconds). */
  tokenNow = () => Date.now();
  async createToken(namespace: string, serviceAccount: string, spec: TokenRequestSpec) {
    this.enter("createToken", [namespace, serviceAccount, spec]);
    const token = `token-${this.issuedTokens.length + 1}-${serviceAccount}-${spec.boundObjectRef.name}`;
    this.issuedTokens.push({ namespace, serviceAccount, spec: structuredClone(spec), token });
    return { token, expirationTimestamp: new Date(this.tokenNow() + spec.expirationSeconds * 1000).toISOString() };
  }

  /** Services, keyed `namespace/name`. */
  readonly services = new Map<string, ApiObject>();
  private serviceWatchers = new Set<{ listener: Listener; end: () => void }>();
  /** Test control: creates or replaces a service, notifying watchers. */
  putService(svc: ApiObject): ApiObject {
    const key = `${svc.metadata!.namespace}/${svc.metadata!.name}`;
    const type = this.services.has(key) ? "MODIFIED" : "ADDED";
    const stored = this.stamp(svc);
    this.services.set(key, stored);
    for (const w of this.serviceWatchers) w.listener(structuredClone({ type, object: stored }));
    return stored;
  }
  deleteService(namespace: string, name: string): void {
    const svc = this.services.get(`${namespace}/${name}`);
    if (!svc) return;
    this.services.delete(`${namespace}/${name}`);
    const gone = this.stamp(svc);
    for (const w of this.serviceWatchers) w.listener(structuredClone({ type: "DELETED", object: gone }));
  }
  /** Test control: ends every service watch as a server timeout would (the watcher relists). */
  closeServiceWatches(): void {
    for (const w of [...this.serviceWatchers]) w.end();
  }
  async listServices(): Promise<PodList> {
    this.enter("listServices", []);
    return { items: [...this.services.values()].map((s) => structuredClone(s)), resourceVersion: String(this.rv) };
  }
  async watchServices(resourceVersion: string, onEvent: Listener, signal: AbortSignal): Promise<void> {
    this.enter("watchServices", [resourceVersion]);
    await new Promise<void>((resolve) => {
      const watcher = { listener: onEvent, end: () => (this.serviceWatchers.delete(watcher), resolve()) };
      this.serviceWatchers.add(watcher);
      if (signal.aborted) watcher.end();
      signal.addEventListener("abort", watcher.end, { once: true });
    });
  }

  /** RuntimeClasses by name. */
  readonly runtimeClasses = new Map<string, ApiObject>();
  async getRuntimeClass(name: string) {
    this.enter("getRuntimeClass", [name]);
    return structuredClone(this.runtimeClasses.get(name));
  }

  /** PersistentVolumeClaims by `namespace/name`, PersistentVolumes by name. */
  readonly claims = new Map<string, ApiObject>();
  readonly persistentVolumes = new Map<string, ApiObject>();

  async getPersistentVolumeClaim(namespace: string, name: string) {
    this.enter("getPersistentVolumeClaim", [namespace, name]);
    return structuredClone(this.claims.get(`${namespace}/${name}`));
  }

  /** JSON merge patch (RFC 7386) of the claim; a stale metadata.resourceVersion is a Conflict. */
  async patchPersistentVolumeClaimStatus(namespace: string, name: string, patch: unknown) {
    this.enter("patchPersistentVolumeClaimStatus", [namespace, name, patch]);
    const key = `${namespace}/${name}`;
    const claim = this.claims.get(key);
    const path = `/api/v1/namespaces/${namespace}/persistentvolumeclaims/${name}/status`;
    if (!claim) throw new ApiError("NotFound", 404, "PATCH", path, "not found");
    const rv = (patch as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
    if (rv !== undefined && rv !== claim.metadata?.resourceVersion) throw new ApiError("Conflict", 409, "PATCH", path, "the object has been modified");
    const merge = (into: unknown, from: unknown): unknown => {
      if (from === null || typeof from !== "object" || Array.isArray(from)) return from;
      const out: Record<string, unknown> = into && typeof into === "object" && !Array.isArray(into) ? { ...(into as Record<string, unknown>) } : {};
      for (const [k, v] of Object.entries(from)) {
        if (v === null) delete out[k];
        else out[k] = merge(out[k], v);
      }
      return out;
    };
    const next = merge(claim, { status: (patch as { status?: unknown }).status ?? {} }) as ApiObject;
    next.metadata = { ...next.metadata, resourceVersion: String(Number(claim.metadata?.resourceVersion ?? 0) + 1) };
    this.claims.set(key, next);
    return structuredClone(next);
  }

  async getPersistentVolume(name: string) {
    this.enter("getPersistentVolume", [name]);
    return structuredClone(this.persistentVolumes.get(name));
  }

  /** storage.k8s.io/v1 objects by name. */
  readonly csiNodes = new Map<string, ApiObject>();
  readonly csiDrivers = new Map<string, ApiObject>();
  readonly volumeAttachments = new Map<string, ApiObject>();

  async getCSINode(name: string) {
    this.enter("getCSINode", [name]);
    return structuredClone(this.csiNodes.get(name));
  }

  async createCSINode(csiNode: ApiObject) {
    this.enter("createCSINode", [csiNode]);
    const name = String(csiNode.metadata?.name);
    if (this.csiNodes.has(name)) throw new ApiError("AlreadyExists", 409, "POST", "csinodes", "already exists");
    const stored = this.stamp(csiNode);
    this.csiNodes.set(name, stored);
    return structuredClone(stored);
  }

  async updateCSINode(csiNode: ApiObject) {
    this.enter("updateCSINode", [csiNode]);
    const name = String(csiNode.metadata?.name);
    const current = this.csiNodes.get(name);
    if (!current) throw new ApiError("NotFound", 404, "PUT", "csinodes", "not found");
    if (current.metadata?.resourceVersion !== csiNode.metadata?.resourceVersion) throw new ApiError("Conflict", 409, "PUT", "csinodes", "the object has been modified");
    const stored = this.stamp(csiNode);
    this.csiNodes.set(name, stored);
    return structuredClone(stored);
  }

  async getCSIDriver(name: string) {
    this.enter("getCSIDriver", [name]);
    return structuredClone(this.csiDrivers.get(name));
  }

  async getVolumeAttachment(name: string) {
    this.enter("getVolumeAttachment", [name]);
    return structuredClone(this.volumeAttachments.get(name));
  }
}
