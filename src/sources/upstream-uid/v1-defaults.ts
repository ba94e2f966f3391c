/**
 * v1 defaulting of a Pod as the upstream decoder applies it before converting
 * to the internal type (k8s.io/kubernetes v1.34.12 pkg/apis/core/v1:
 * SetObjectDefaults_Pod and the SetDefaults_* it calls), on the manifest's
 * JSON in place. Parts that depend on feature gates or that this code does
 * not model throw UnmodelledField instead of defaulting differently.
 * Quantities are rounded later, where they are decoded (quantity.ts).
 */
import { UnmodelledField } from "./errors.ts";

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
/** A list of structs; a null element decodes to a zero struct in Go, which defaulting then fills: an object here. */
const list = (v: unknown): Obj[] => {
  if (!Array.isArray(v)) return [];
  for (let i = 0; i < v.length; i++) if (v[i] === null) v[i] = {};
  return v.filter(isObj);
};
const empty = (v: unknown): boolean => v === undefined || v === null || v === "";

/** The tag the image reference names: "latest" when it names neither tag nor digest, "" when it does not parse. */
export function imageTag(image: string): string {
  const at = image.indexOf("@");
  const name = at >= 0 ? image.slice(0, at) : image;
  if (at >= 0 && !/^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[0-9a-fA-F]{32,}$/.test(image.slice(at + 1))) return "";
  const slash = name.lastIndexOf("/");
  const colon = name.lastIndexOf(":");
  const repo = colon > slash ? name.slice(0, colon) : name;
  const tag = colon > slash ? name.slice(colon + 1) : "";
  if (colon > slash && !/^[\w][\w.-]{0,127}$/.test(tag)) return "";
  const component = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
  const domain = "(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?";
  if (!new RegExp(`^(?:${domain}/)?${component}(?:/${component})*$`).test(repo)) return "";
  if (repo.length > 255) return "";
  if (tag) return tag;
  return at >= 0 ? "" : "latest";
}

function defaultContainer(c: Obj, path: string): void {
  if (empty(c.imagePullPolicy)) c.imagePullPolicy = imageTag(typeof c.image === "string" ? c.image : "") === "latest" ? "Always" : "IfNotPresent";
  if (empty(c.terminationMessagePath)) c.terminationMessagePath = "/dev/termination-log";
  if (empty(c.terminationMessagePolicy)) c.terminationMessagePolicy = "File";
  for (const p of list(c.ports)) if (empty(p.protocol)) p.protocol = "TCP";
  for (const e of list(c.env)) {
    if (!isObj(e.valueFrom)) continue;
    if (isObj(e.valueFrom.fieldRef)) defaultFieldRef(e.valueFrom.fieldRef);
    if (isObj(e.valueFrom.fileKeyRef) && e.valueFrom.fileKeyRef.optional == null) e.valueFrom.fileKeyRef.optional = false;
  }
  for (const probe of ["livenessProbe", "readinessProbe", "startupProbe"]) {
    const p = c[probe];
    if (!isObj(p)) continue;
    if (!p.timeoutSeconds) p.timeoutSeconds = 1;
    if (!p.periodSeconds) p.periodSeconds = 10;
    if (!p.successThreshold) p.successThreshold = 1;
    if (!p.failureThreshold) p.failureThreshold = 3;
    if (isObj(p.httpGet)) defaultHttpGet(p.httpGet);
    if (isObj(p.grpc) && p.grpc.service == null) p.grpc.service = "";
  }
  if (isObj(c.lifecycle)) {
    for (const hook of ["postStart", "preStop"]) {
      const h = c.lifecycle[hook];
      if (isObj(h) && isObj(h.httpGet)) defaultHttpGet(h.httpGet);
    }
  }
  void path;
}

function defaultHttpGet(h: Obj): void {
  if (empty(h.path)) h.path = "/";
  if (empty(h.scheme)) h.scheme = "HTTP";
}

function defaultFieldRef(f: Obj): void {
  if (empty(f.apiVersion)) f.apiVersion = "v1";
}

// Every volume source of v1.VolumeSource; the defaulted ones below are modelled, the others have no defaults.
const VOLUME_SOURCES = [
  "hostPath",
  "emptyDir",
  "gcePersistentDisk",
  "awsElasticBlockStore",
  "gitRepo",
  "secret",
  "nfs",
  "iscsi",
  "glusterfs",
  "persistentVolumeClaim",
  "rbd",
  "flexVolume",
  "cinder",
  "cephfs",
  "flocker",
  "downwardAPI",
  "fc",
  "azureFile",
  "configMap",
  "vsphereVolume",
  "quobyte",
  "azureDisk",
  "photonPersistentDisk",
  "projected",
  "portworxVolume",
  "scaleIO",
  "storageos",
  "csi",
  "ephemeral",
  "image",
];

function defaultVolume(v: Obj, path: string): void {
  if (VOLUME_SOURCES.every((k) => v[k] === undefined || v[k] === null)) v.emptyDir = {};
  const mode = (o: unknown, perm: number): void => {
    if (isObj(o) && o.defaultMode == null) o.defaultMode = perm;
  };
  if (isObj(v.hostPath) && v.hostPath.type == null) v.hostPath.type = "";
  mode(v.secret, 0o644);
  mode(v.configMap, 0o644);
  if (isObj(v.iscsi) && empty(v.iscsi.iscsiInterface)) v.iscsi.iscsiInterface = "default";
  if (isObj(v.rbd)) {
    if (empty(v.rbd.pool)) v.rbd.pool = "rbd";
    if (empty(v.rbd.user)) v.rbd.user = "admin";
    if (empty(v.rbd.keyring)) v.rbd.keyring = "/etc/ceph/keyring";
  }
  if (isObj(v.downwardAPI)) {
    mode(v.downwardAPI, 0o644);
    for (const item of list(v.downwardAPI.items)) if (isObj(item.fieldRef)) defaultFieldRef(item.fieldRef);
  }
  if (isObj(v.azureDisk)) {
    const d = v.azureDisk;
    if (d.cachingMode == null) d.cachingMode = "ReadWrite";
    if (d.fsType == null) d.fsType = "ext4";
    if (d.readOnly == null) d.readOnly = false;
    if (d.kind == null) d.kind = "Shared";
  }
  if (isObj(v.projected)) {
    mode(v.projected, 0o644);
    for (const src of list(v.projected.sources)) {
      if (isObj(src.downwardAPI)) for (const item of list(src.downwardAPI.items)) if (isObj(item.fieldRef)) defaultFieldRef(item.fieldRef);
      if (isObj(src.serviceAccountToken) && src.serviceAccountToken.expirationSeconds == null) src.serviceAccountToken.expirationSeconds = 3600;
    }
  }
  if (isObj(v.scaleIO)) {
    if (empty(v.scaleIO.storageMode)) v.scaleIO.storageMode = "ThinProvisioned";
    if (empty(v.scaleIO.fsType)) v.scaleIO.fsType = "xfs";
  }
  // Defaulting that depends on feature gates or PVC spec defaults: not modelled.
  if (v.ephemeral != null) throw new UnmodelledField(`${path}.ephemeral`, "ephemeral volumes are not modelled");
  if (v.image != null) throw new UnmodelledField(`${path}.image`, "image volumes (feature gate ImageVolume) are not modelled");
}

/** SetObjectDefaults_Pod on a manifest's JSON (mutated). */
export function setPodDefaults(pod: Obj): void {
  if (!isObj(pod.spec)) pod.spec = {};
  const spec = pod.spec as Obj;
  // SetDefaults_Pod
  if (spec.resources != null) throw new UnmodelledField("spec.resources", "pod-level resources (feature gate PodLevelResources) are not modelled");
  if (spec.ephemeralContainers != null) throw new UnmodelledField("spec.ephemeralContainers", "ephemeral containers are not modelled");
  if (pod.status != null && !(isObj(pod.status) && Object.keys(pod.status).length === 0)) throw new UnmodelledField("status", "a manifest's status is not modelled");
  for (const key of ["containers", "initContainers"]) {
    for (const c of list(spec[key])) {
      if (!isObj(c.resources) || !isObj(c.resources.limits)) continue;
      if (!isObj(c.resources.requests)) c.resources.requests = {};
      const requests = c.resources.requests as Obj;
      for (const [name, q] of Object.entries(c.resources.limits)) if (!(name in requests)) requests[name] = q;
    }
  }
  if (spec.enableServiceLinks == null) spec.enableServiceLinks = true;
  if (spec.hostNetwork === true) {
    for (const key of ["containers", "initContainers"]) for (const c of list(spec[key])) for (const p of list(c.ports)) if (!p.hostPort) p.hostPort = p.containerPort;
  }
  // SetDefaults_PodSpec
  if (empty(spec.dnsPolicy)) spec.dnsPolicy = "ClusterFirst";
  if (empty(spec.restartPolicy)) spec.restartPolicy = "Always";
  if (spec.securityContext == null) spec.securityContext = {};
  if (spec.terminationGracePeriodSeconds == null) spec.terminationGracePeriodSeconds = 30;
  if (empty(spec.schedulerName)) spec.schedulerName = "default-scheduler";
  list(spec.volumes).forEach((v, i) => defaultVolume(v, `spec.volumes[${i}]`));
  list(spec.initContainers).forEach((c, i) => defaultContainer(c, `spec.initContainers[${i}]`));
  list(spec.containers).forEach((c, i) => defaultContainer(c, `spec.containers[${i}]`));
}
