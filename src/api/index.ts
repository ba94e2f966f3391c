/**
 * What the agent needs from the API server, as one small interface: the
 * node subsystem, the API pod source and the status manager use only this.
 * `createKubeApi` implements it over the REST client; `FakeKubeApi`
 * (fake.ts) holds objects in memory for unit tests.
 */
import type { RestClient, WatchEvent } from "./rest.ts";
import { isApiReason } from "./errors.ts";
import { ProtobufRequests } from "./negotiate.ts";
import { eventCodec, leaseCodec } from "./proto-objects.ts";
import { PROTOBUF } from "./protobuf.ts";

export type ApiObject = Record<string, unknown> & {
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string; [k: string]: unknown };
};

export interface PodList {
  items: ApiObject[];
  resourceVersion: string;
}

export interface KubeApi {
  getNode(name: string): Promise<ApiObject | undefined>;
  createNode(node: ApiObject): Promise<ApiObject>;
  /** Strategic merge patch of the node object (labels, annotations, taints). */
  patchNode(name: string, patch: unknown): Promise<ApiObject>;
  /** Strategic merge patch of the node's status subresource (conditions merge by type). */
  patchNodeStatus(name: string, patch: unknown): Promise<ApiObject>;
  getLease(namespace: string, name: string): Promise<ApiObject | undefined>;
  createLease(namespace: string, lease: ApiObject): Promise<ApiObject>;
  /** Optimistic update: rejects with reason Conflict when the resourceVersion is stale. */
  updateLease(namespace: string, lease: ApiObject): Promise<ApiObject>;
  listPods(fieldSelector: string): Promise<PodList>;
  watchPods(fieldSelector: string, resourceVersion: string, onEvent: (e: WatchEvent<ApiObject>) => void, signal: AbortSignal): Promise<void>;
  getPod(namespace: string, name: string): Promise<ApiObject | undefined>;
  createPod(namespace: string, pod: ApiObject): Promise<ApiObject>;
  /** Strategic merge patch of the pod's status subresource: `conditions` merge by type, so conditions the patch leaves out (other writers') are kept. */
  patchPodStatus(namespace: string, name: string, patch: unknown): Promise<void>;
  /** Deletes with a UID precondition, so a newer pod of the same name is never touched. NotFound counts as done. */
  deletePod(namespace: string, name: string, opts: { uid: string; gracePeriodSeconds: number }): Promise<void>;
  createEvent(namespace: string, event: ApiObject): Promise<void>;
  /** TokenReview: who a bearer token belongs to (10250 authentication). */
  reviewToken(token: string): Promise<{ authenticated: boolean; user?: { username: string; uid?: string; groups?: string[] } }>;
  /** SubjectAccessReview: may `user` do this on the node (10250 authorization). */
  reviewAccess(spec: ApiObject): Promise<{ allowed: boolean; reason?: string }>;
  patchEvent(namespace: string, name: string, patch: unknown): Promise<void>;
  /** Lists configMaps or secrets of a namespace; the node asks by `metadata.name=<name>` (what the Node authorizer allows). */
  listObjects(resource: ObjectResource, namespace: string, fieldSelector: string): Promise<PodList>;
  /** Watches configMaps or secrets from `resourceVersion` until the server ends the watch or `signal` aborts. */
  watchObjects(
    resource: ObjectResource,
    namespace: string,
    fieldSelector: string,
    resourceVersion: string,
    onEvent: (e: WatchEvent<ApiObject>) => void,
    signal: AbortSignal,
  ): Promise<void>;
  /** TokenRequest for a service account, bound to a pod (serviceaccounts/<name>/token). */
  /** The token, its expiry and the lifetime the server granted (its answer's spec.expirationSeconds, when it has one). */
  createToken(namespace: string, serviceAccount: string, spec: TokenRequestSpec): Promise<{ token: string; expirationTimestamp: string; expirationSeconds?: number }>;
  /** Every Service of the cluster (service environment variables); the Node authorizer lets nodes list and watch them. */
  listServices(): Promise<PodList>;
  watchServices(resourceVersion: string, onEvent: (e: WatchEvent<ApiObject>) => void, signal: AbortSignal): Promise<void>;
  /** node.k8s.io/v1 RuntimeClass by name; undefined when it does not exist. */
  getRuntimeClass(name: string): Promise<ApiObject | undefined>;
  /** A PersistentVolumeClaim (the Node authorizer allows those of pods bound to the node); undefined when it does not exist. */
  getPersistentVolumeClaim(namespace: string, name: string): Promise<ApiObject | undefined>;
  /**
   * JSON merge patch of a claim's status subresource (node expansion: capacity,
   * allocatedResourceStatuses, conditions); a patch carrying
   * metadata.resourceVersion is rejected with Conflict when it is stale.
   */
  patchPersistentVolumeClaimStatus(namespace: string, name: string, patch: unknown): Promise<ApiObject>;
  /** A PersistentVolume bound to such a claim; undefined when it does not exist. */
  getPersistentVolume(name: string): Promise<ApiObject | undefined>;
  /** storage.k8s.io/v1 CSINode (named as the node); undefined when it does not exist. */
  getCSINode(name: string): Promise<ApiObject | undefined>;
  createCSINode(csiNode: ApiObject): Promise<ApiObject>;
  /** Optimistic update: rejects with reason Conflict when the resourceVersion is stale. */
  updateCSINode(csiNode: ApiObject): Promise<ApiObject>;
  /** storage.k8s.io/v1 CSIDriver by driver name; undefined when it does not exist. */
  getCSIDriver(name: string): Promise<ApiObject | undefined>;
  /** storage.k8s.io/v1 VolumeAttachment by name; undefined when it does not exist. */
  getVolumeAttachment(name: string): Promise<ApiObject | undefined>;
}

export type ObjectResource = "configmaps" | "secrets";

export interface TokenRequestSpec {
  audiences: string[];
  expirationSeconds: number;
  boundObjectRef: { apiVersion: "v1"; kind: "Pod"; name: string; uid: string };
}

const STRATEGIC = "application/strategic-merge-patch+json";
const MERGE = "application/merge-patch+json";
const STORAGE = "/apis/storage.k8s.io/v1";

async function orUndefined<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (isApiReason(err, "NotFound")) return undefined;
    throw err;
  }
}

/** Upstream's reflector default minWatchTimeout: a watch asks the API server to end it after 5 to 10 minutes. */
export const WATCH_MIN_TIMEOUT_SECONDS = 300;
/**
 * Upstream's watch-based configMap and secret managers give their reflectors
 * MinWatchTimeout 30 minutes ("to avoid recreating watches too often"): one
 * watch per referenced object, ended after 30 to 60 minutes.
 */
export const OBJECT_WATCH_MIN_TIMEOUT_SECONDS = 1800;

/** A reflector's timeoutSeconds: its minimum times [1, 2) (upstream minWatchTimeout * (rand.Float64() + 1)). */
export const watchTimeoutSeconds = (minSeconds: number, random: () => number): number => Math.floor(minSeconds * (1 + random()));

/**
 * `contentType` is the kubelet's (--kube-api-content-type): with protobuf,
 * upstream's default, Leases and Events go as protobuf as upstream's client
 * sends them; everything else is JSON either way (patches are JSON by
 * definition, and the other objects have no codec here). `random` (in [0, 1))
 * spreads the watches' timeouts.
 */
export function createKubeApi(rest: RestClient, opts: { contentType: string; random?: () => number } = { contentType: "application/json" }): KubeApi {
  const watchTimeout = (min: number) => watchTimeoutSeconds(min, opts.random ?? Math.random);
  const pods = (ns: string) => `/api/v1/namespaces/${encodeURIComponent(ns)}/pods`;
  const leases = (ns: string) => `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/leases`;
  const proto = new ProtobufRequests(rest, opts.contentType === PROTOBUF);
  const getLeaseJson = (ns: string, name: string) => rest.request<ApiObject>("GET", `${leases(ns)}/${name}`);
  return {
    getNode: (name) => orUndefined(rest.request("GET", `/api/v1/nodes/${name}`)),
    createNode: (node) => rest.request("POST", "/api/v1/nodes", { body: node }),
    patchNode: (name, patch) => rest.request("PATCH", `/api/v1/nodes/${name}`, { body: patch, contentType: STRATEGIC }),
    patchNodeStatus: (name, patch) => rest.request("PATCH", `/api/v1/nodes/${name}/status`, { body: patch, contentType: STRATEGIC }),
    getLease: (ns, name) =>
      orUndefined(
        proto.request(
          "GET",
          `${leases(ns)}/${name}`,
          leaseCodec,
          undefined,
          () => getLeaseJson(ns, name),
          () => getLeaseJson(ns, name),
        ),
      ),
    createLease: (ns, lease) =>
      proto.request(
        "POST",
        leases(ns),
        leaseCodec,
        lease,
        () => rest.request("POST", leases(ns), { body: lease }),
        () => getLeaseJson(ns, String(lease.metadata?.name)),
      ),
    updateLease: (ns, lease) =>
      proto.request(
        "PUT",
        `${leases(ns)}/${lease.metadata?.name}`,
        leaseCodec,
        lease,
        () => rest.request("PUT", `${leases(ns)}/${lease.metadata?.name}`, { body: lease }),
        () => getLeaseJson(ns, String(lease.metadata?.name)),
      ),
    async listPods(fieldSelector) {
      const list = await rest.request<{ items: ApiObject[]; metadata: { resourceVersion: string } }>("GET", "/api/v1/pods", { query: { fieldSelector } });
      return { items: list.items ?? [], resourceVersion: list.metadata.resourceVersion };
    },
    watchPods: (fieldSelector, resourceVersion, onEvent, signal) =>
      rest.watch(
        "/api/v1/pods",
        { fieldSelector, resourceVersion, allowWatchBookmarks: true, timeoutSeconds: watchTimeout(WATCH_MIN_TIMEOUT_SECONDS) },
        onEvent as (e: WatchEvent) => void,
        signal,
      ),
    getPod: (ns, name) => orUndefined(rest.request("GET", `${pods(ns)}/${name}`)),
    createPod: (ns, pod) => rest.request("POST", pods(ns), { body: pod }),
    // Neither answer (the whole Pod) is read: the server may send it as protobuf.
    patchPodStatus: (ns, name, patch) => proto.unread("PATCH", `${pods(ns)}/${name}/status`, patch, STRATEGIC),
    async deletePod(ns, name, { uid, gracePeriodSeconds }) {
      const options = { kind: "DeleteOptions", apiVersion: "v1", gracePeriodSeconds, preconditions: { uid } };
      await orUndefined(proto.unread("DELETE", `${pods(ns)}/${name}`, options, "application/json"));
    },
    async createEvent(ns, event) {
      const path = `/api/v1/namespaces/${encodeURIComponent(ns)}/events`;
      await proto.write("POST", path, eventCodec, event, () => rest.request("POST", path, { body: event }));
    },
    async reviewToken(token) {
      const review = await rest.request<{ status?: { authenticated?: boolean; user?: { username: string; uid?: string; groups?: string[] } } }>(
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        { body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token } } },
      );
      return { authenticated: review.status?.authenticated === true, ...(review.status?.user ? { user: review.status.user } : {}) };
    },
    async reviewAccess(spec) {
      const review = await rest.request<{ status?: { allowed?: boolean; reason?: string } }>("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        body: { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec },
      });
      return { allowed: review.status?.allowed === true, ...(review.status?.reason ? { reason: review.status.reason } : {}) };
    },
    async listObjects(resource, ns, fieldSelector) {
      const list = await rest.request<{ items: ApiObject[]; metadata: { resourceVersion: string } }>("GET", `/api/v1/namespaces/${encodeURIComponent(ns)}/${resource}`, {
        query: { fieldSelector },
      });
      return { items: list.items ?? [], resourceVersion: list.metadata.resourceVersion };
    },
    watchObjects: (resource, ns, fieldSelector, resourceVersion, onEvent, signal) =>
      rest.watch(
        `/api/v1/namespaces/${encodeURIComponent(ns)}/${resource}`,
        { fieldSelector, resourceVersion, allowWatchBookmarks: true, timeoutSeconds: watchTimeout(OBJECT_WATCH_MIN_TIMEOUT_SECONDS) },
        onEvent as (e: WatchEvent) => void,
        signal,
      ),
    async createToken(ns, serviceAccount, spec) {
      const tr = await rest.request<{ spec?: { expirationSeconds?: number }; status?: { token?: string; expirationTimestamp?: string } }>(
        "POST",
        `/api/v1/namespaces/${encodeURIComponent(ns)}/serviceaccounts/${encodeURIComponent(serviceAccount)}/token`,
        { body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec } },
      );
      if (!tr.status?.token || !tr.status.expirationTimestamp) throw new Error(`TokenRequest for ${ns}/${serviceAccount}: the answer has no token`);
      const granted = tr.spec?.expirationSeconds;
      return {
        token: tr.status.token,
        expirationTimestamp: tr.status.expirationTimestamp,
        ...(typeof granted === "number" && granted > 0 ? { expirationSeconds: granted } : {}),
      };
    },
    async listServices() {
      const list = await rest.request<{ items: ApiObject[]; metadata: { resourceVersion: string } }>("GET", "/api/v1/services");
      return { items: list.items ?? [], resourceVersion: list.metadata.resourceVersion };
    },
    watchServices: (resourceVersion, onEvent, signal) =>
      rest.watch(
        "/api/v1/services",
        { resourceVersion, allowWatchBookmarks: true, timeoutSeconds: watchTimeout(WATCH_MIN_TIMEOUT_SECONDS) },
        onEvent as (e: WatchEvent) => void,
        signal,
      ),
    getRuntimeClass: (name) => orUndefined(rest.request("GET", `/apis/node.k8s.io/v1/runtimeclasses/${encodeURIComponent(name)}`)),
    getPersistentVolumeClaim: (ns, name) => orUndefined(rest.request("GET", `/api/v1/namespaces/${encodeURIComponent(ns)}/persistentvolumeclaims/${encodeURIComponent(name)}`)),
    patchPersistentVolumeClaimStatus: (ns, name, patch) =>
      rest.request("PATCH", `/api/v1/namespaces/${encodeURIComponent(ns)}/persistentvolumeclaims/${encodeURIComponent(name)}/status`, { body: patch, contentType: MERGE }),
    getPersistentVolume: (name) => orUndefined(rest.request("GET", `/api/v1/persistentvolumes/${encodeURIComponent(name)}`)),
    getCSINode: (name) => orUndefined(rest.request("GET", `${STORAGE}/csinodes/${encodeURIComponent(name)}`)),
    createCSINode: (csiNode) => rest.request("POST", `${STORAGE}/csinodes`, { body: csiNode }),
    updateCSINode: (csiNode) => rest.request("PUT", `${STORAGE}/csinodes/${encodeURIComponent(String(csiNode.metadata?.name))}`, { body: csiNode }),
    getCSIDriver: (name) => orUndefined(rest.request("GET", `${STORAGE}/csidrivers/${encodeURIComponent(name)}`)),
    getVolumeAttachment: (name) => orUndefined(rest.request("GET", `${STORAGE}/volumeattachments/${encodeURIComponent(name)}`)),
    async patchEvent(ns, name, patch) {
      await rest.request("PATCH", `/api/v1/namespaces/${encodeURIComponent(ns)}/events/${name}`, { body: patch, contentType: STRATEGIC });
    },
  };
}

export { ApiError, hasStatusCause, isApiReason } from "./errors.ts";
export type { WatchEvent } from "./rest.ts";
