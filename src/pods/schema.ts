/**
 * The part of the core/v1 Pod the agent acts on, as valibot schemas: the
 * single source of truth for parsing manifests (file and URL sources) and
 * the `Pod` type. Objects are loose: fields this agent does not act on yet
 * are kept, as the upstream decoder keeps them, but the ones it reads are
 * checked for type.
 */
import * as v from "valibot";
import { LocalDescendingPath, Volume, VolumeMount } from "./volume-schema.ts";

export { Volume, VolumeMount };

const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export const DnsLabel = v.pipe(v.string(), v.maxLength(63, "must be no more than 63 characters"), v.regex(dns1123Label, "must be a lowercase RFC 1123 label (a-z, 0-9, '-')"));
export const DnsSubdomain = v.pipe(v.string(), v.maxLength(253, "must be no more than 253 characters"), v.regex(dns1123Subdomain, "must be a lowercase RFC 1123 subdomain"));

const StringMap = v.record(v.string(), v.string());
const Int = v.pipe(v.number(), v.integer());
/** core/v1 SELinuxOptions: the label handed to the runtime (pod-wide, or a container's, which replaces the pod's). */
const SELinuxOptions = v.object({ user: v.optional(v.string()), role: v.optional(v.string()), type: v.optional(v.string()), level: v.optional(v.string()) });
/** A security context: loose, with the fields whose type the agent relies on checked. */
const SecurityContext = v.looseObject({ seLinuxOptions: v.optional(SELinuxOptions) });
const Port = v.pipe(Int, v.minValue(1), v.maxValue(65535));
/** Quantities stay strings here; cgroup values are computed where they are used. */
const Quantity = v.union([v.string(), v.number()]);

export const ObjectMeta = v.looseObject({
  name: v.optional(v.string()),
  generateName: v.optional(v.string()),
  namespace: v.optional(v.string()),
  uid: v.optional(v.string()),
  resourceVersion: v.optional(v.string()),
  creationTimestamp: v.optional(v.nullable(v.string())),
  deletionTimestamp: v.optional(v.nullable(v.string())),
  deletionGracePeriodSeconds: v.optional(v.nullable(Int)),
  labels: v.optional(StringMap),
  annotations: v.optional(StringMap),
});

export const EnvVar = v.looseObject({
  name: v.pipe(v.string(), v.minLength(1, "must not be empty")),
  value: v.optional(v.string()),
  valueFrom: v.optional(v.looseObject({})),
});

export const ContainerPort = v.looseObject({
  name: v.optional(v.string()),
  containerPort: Port,
  hostPort: v.optional(v.pipe(Int, v.minValue(0), v.maxValue(65535))),
  hostIP: v.optional(v.string()),
  protocol: v.optional(v.picklist(["TCP", "UDP", "SCTP"])),
});

export const ResourceRequirements = v.looseObject({
  limits: v.optional(v.record(v.string(), Quantity)),
  requests: v.optional(v.record(v.string(), Quantity)),
});

export const Container = v.looseObject({
  name: DnsLabel,
  image: v.pipe(v.string(), v.minLength(1, "must not be empty")),
  command: v.optional(v.array(v.string())),
  args: v.optional(v.array(v.string())),
  workingDir: v.optional(v.string()),
  env: v.optional(v.array(EnvVar)),
  envFrom: v.optional(v.array(v.looseObject({}))),
  ports: v.optional(v.array(ContainerPort)),
  resources: v.optional(ResourceRequirements),
  volumeMounts: v.optional(v.array(VolumeMount)),
  imagePullPolicy: v.optional(v.picklist(["Always", "IfNotPresent", "Never"])),
  securityContext: v.optional(SecurityContext),
  stdin: v.optional(v.boolean()),
  stdinOnce: v.optional(v.boolean()),
  tty: v.optional(v.boolean()),
  terminationMessagePath: v.optional(v.string()),
  terminationMessagePolicy: v.optional(v.picklist(["File", "FallbackToLogsOnError"])),
  restartPolicy: v.optional(v.literal("Always")),
  /** In-place resize: whether a change of cpu or memory restarts the container (default NotRequired). */
  resizePolicy: v.optional(v.array(v.looseObject({ resourceName: v.string(), restartPolicy: v.picklist(["NotRequired", "RestartContainer"]) }))),
});

/**
 * A debugging container added to a running pod through the
 * `ephemeralcontainers` subresource (kubectl debug): started once in the
 * pod's sandbox, never restarted; with `targetContainerName` it shares that
 * container's process namespace.
 */
export const EphemeralContainer = v.looseObject({
  ...Container.entries,
  targetContainerName: v.optional(v.string()),
});

export const PodSpec = v.looseObject({
  containers: v.pipe(v.array(Container), v.minLength(1, "must have at least one container")),
  initContainers: v.optional(v.array(Container)),
  ephemeralContainers: v.optional(v.array(EphemeralContainer)),
  /** Pod-level resources (PodLevelResources): cpu, memory and hugepages for the whole pod. */
  resources: v.optional(v.nullable(ResourceRequirements)),
  restartPolicy: v.optional(v.picklist(["Always", "OnFailure", "Never"])),
  terminationGracePeriodSeconds: v.optional(v.nullable(v.pipe(Int, v.minValue(0)))),
  activeDeadlineSeconds: v.optional(v.nullable(v.pipe(Int, v.minValue(1)))),
  nodeName: v.optional(v.string()),
  hostNetwork: v.optional(v.boolean()),
  hostPID: v.optional(v.boolean()),
  hostIPC: v.optional(v.boolean()),
  shareProcessNamespace: v.optional(v.boolean()),
  hostname: v.optional(DnsLabel),
  subdomain: v.optional(DnsLabel),
  dnsPolicy: v.optional(v.picklist(["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"])),
  volumes: v.optional(v.array(Volume)),
  securityContext: v.optional(SecurityContext),
  priority: v.optional(Int),
  priorityClassName: v.optional(v.string()),
  runtimeClassName: v.optional(v.nullable(v.string())),
  /** Pod conditions (set by others through the API) that must be True for the pod to be Ready. */
  readinessGates: v.optional(v.nullable(v.array(v.looseObject({ conditionType: v.string() })))),
  /** The OS the pod needs; a node of another OS rejects it at admission (PodOSNotSupported). */
  os: v.optional(v.nullable(v.looseObject({ name: v.string() }))),
});

export const PodManifest = v.looseObject({
  apiVersion: v.optional(v.literal("v1", 'must be "v1"')),
  kind: v.optional(v.literal("Pod", 'must be "Pod"')),
  metadata: ObjectMeta,
  spec: PodSpec,
  status: v.optional(v.looseObject({})),
});

export type Pod = v.InferOutput<typeof PodManifest>;
export type PodSpecT = v.InferOutput<typeof PodSpec>;
export type ContainerSpec = v.InferOutput<typeof Container>;
export type EphemeralContainerSpec = v.InferOutput<typeof EphemeralContainer>;

/** Renders valibot issues as `field "a.b[0].c": message` lines. */
export function formatIssues(issues: readonly v.BaseIssue<unknown>[]): string {
  return issues
    .map((issue) => {
      const path = (issue.path ?? [])
        .map((p) => (typeof p.key === "number" ? `[${p.key}]` : `.${String(p.key)}`))
        .join("")
        .replace(/^\./, "");
      // valibot words a missing key as "Invalid key: Expected ..."; say it plainly.
      const message = issue.message.startsWith("Invalid key:") ? "is required" : issue.message;
      // An issue at the root (a string or a list instead of a Pod) names the document instead of a field.
      return issue.path?.length ? `field "${path}": ${message}` : `document: ${message}`;
    })
    .join("; ");
}

export type ParseResult<T> = { ok: true; value: T } | { ok: false; error: string };

/** Checks a decoded manifest and the rules the schema cannot express. */
export function parsePod(input: unknown): ParseResult<Pod> {
  const result = v.safeParse(PodManifest, input);
  if (!result.success) return { ok: false, error: formatIssues(result.issues) };
  const pod = result.output;
  const problems: string[] = [];
  const names = new Set<string>();
  const all = [...(pod.spec.initContainers ?? []), ...pod.spec.containers, ...(pod.spec.ephemeralContainers ?? [])];
  all.forEach((c) => {
    if (names.has(c.name)) problems.push(`field "spec.containers": duplicate container name "${c.name}"`);
    names.add(c.name);
  });
  problems.push(...volumeProblems(pod));
  if (!pod.metadata.name) problems.push('field "metadata.name": must be set');
  else if (!v.is(DnsSubdomain, pod.metadata.name)) problems.push(`field "metadata.name": "${pod.metadata.name}" must be a lowercase RFC 1123 subdomain`);
  if (pod.metadata.namespace !== undefined && !v.is(DnsLabel, pod.metadata.namespace))
    problems.push(`field "metadata.namespace": "${pod.metadata.namespace}" must be a lowercase RFC 1123 label`);
  return problems.length ? { ok: false, error: problems.join("; ") } : { ok: true, value: pod };
}

/** Message-level valibot default messages name the expectation; keep them. */

/** Upstream validation of volumes and mounts: unique names, mounts naming a volume, safe subPaths. */
function volumeProblems(pod: Pod): string[] {
  const problems: string[] = [];
  const volumes = new Set<string>();
  (pod.spec.volumes ?? []).forEach((vol, i) => {
    if (volumes.has(vol.name)) problems.push(`field "spec.volumes[${i}].name": duplicate volume name "${vol.name}"`);
    volumes.add(vol.name);
  });
  const check = (field: string, containers: ContainerSpec[] | undefined) =>
    (containers ?? []).forEach((c, i) =>
      (c.volumeMounts ?? []).forEach((m, j) => {
        const at = `spec.${field}[${i}].volumeMounts[${j}]`;
        if (!volumes.has(m.name)) problems.push(`field "${at}.name": volume "${m.name}" not found`);
        if (m.subPath && m.subPathExpr) problems.push(`field "${at}.subPathExpr": subPathExpr and subPath are mutually exclusive`);
        for (const key of ["subPath", "subPathExpr"] as const) {
          const value = m[key];
          if (!value) continue;
          const r = v.safeParse(LocalDescendingPath, value);
          if (!r.success) problems.push(`field "${at}.${key}": ${r.issues[0].message}`);
        }
      }),
    );
  check("containers", pod.spec.containers);
  check("initContainers", pod.spec.initContainers);
  return problems;
}
