/**
 * The volume sources this agent acts on (core/v1 Volume and VolumeMount),
 * as valibot schemas checked the way upstream API validation does: relative
 * item paths without "..", modes within 0777, token lifetimes of at least
 * 10 minutes. Other sources (nfs, ...) are kept loose; the volume
 * manager reports them as unsupported.
 */
import * as v from "valibot";

const Int = v.pipe(v.number(), v.integer());
const Quantity = v.union([v.string(), v.number()]);

/** Upstream validateLocalDescendingPath: relative, no ".." element, not starting with "..". */
export const LocalDescendingPath = v.pipe(
  v.string(),
  v.minLength(1, "must not be empty"),
  v.check((p) => !p.startsWith("/"), "must be a relative path"),
  v.check((p) => !p.split("/").includes(".."), "must not contain '..'"),
  v.check((p) => !p.startsWith(".."), "must not start with '..'"),
);

export const FileMode = v.pipe(
  Int,
  v.minValue(0, "must be a number between 0 and 0777 (octal), both inclusive"),
  v.maxValue(0o777, "must be a number between 0 and 0777 (octal), both inclusive"),
);

export const KeyToPath = v.looseObject({
  key: v.pipe(v.string(), v.minLength(1, "must not be empty")),
  path: LocalDescendingPath,
  mode: v.optional(v.nullable(FileMode)),
});

export const ConfigMapProjection = v.looseObject({
  name: v.optional(v.string()),
  items: v.optional(v.nullable(v.array(KeyToPath))),
  optional: v.optional(v.nullable(v.boolean())),
});
export const ConfigMapVolumeSource = v.looseObject({ ...ConfigMapProjection.entries, defaultMode: v.optional(v.nullable(FileMode)) });

export const SecretProjection = v.looseObject({
  name: v.optional(v.string()),
  items: v.optional(v.nullable(v.array(KeyToPath))),
  optional: v.optional(v.nullable(v.boolean())),
});
export const SecretVolumeSource = v.looseObject({
  secretName: v.optional(v.string()),
  items: v.optional(v.nullable(v.array(KeyToPath))),
  optional: v.optional(v.nullable(v.boolean())),
  defaultMode: v.optional(v.nullable(FileMode)),
});

export const DownwardAPIVolumeFile = v.looseObject({
  path: LocalDescendingPath,
  fieldRef: v.optional(v.nullable(v.looseObject({ fieldPath: v.string(), apiVersion: v.optional(v.string()) }))),
  resourceFieldRef: v.optional(v.nullable(v.looseObject({ containerName: v.optional(v.string()), resource: v.string(), divisor: v.optional(Quantity) }))),
  mode: v.optional(v.nullable(FileMode)),
});
export const DownwardAPIProjection = v.looseObject({ items: v.optional(v.nullable(v.array(DownwardAPIVolumeFile))) });
export const DownwardAPIVolumeSource = v.looseObject({ ...DownwardAPIProjection.entries, defaultMode: v.optional(v.nullable(FileMode)) });

export const ServiceAccountTokenProjection = v.looseObject({
  audience: v.optional(v.string()),
  expirationSeconds: v.optional(
    v.nullable(v.pipe(Int, v.minValue(600, "may not specify a duration less than 10 minutes"), v.maxValue(2 ** 32, "may not specify a duration larger than 2^32 seconds"))),
  ),
  path: LocalDescendingPath,
});

export const VolumeProjection = v.looseObject({
  configMap: v.optional(v.nullable(ConfigMapProjection)),
  secret: v.optional(v.nullable(SecretProjection)),
  downwardAPI: v.optional(v.nullable(DownwardAPIProjection)),
  serviceAccountToken: v.optional(v.nullable(ServiceAccountTokenProjection)),
});
export const ProjectedVolumeSource = v.looseObject({
  sources: v.optional(v.nullable(v.array(VolumeProjection))),
  defaultMode: v.optional(v.nullable(FileMode)),
});

export const EmptyDirVolumeSource = v.looseObject({
  medium: v.optional(
    v.pipe(v.string(), v.regex(/^(|Memory|HugePages|HugePages-\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?)$/, 'must be "", "Memory", "HugePages" or "HugePages-<size>"')),
  ),
  sizeLimit: v.optional(v.nullable(Quantity)),
});

export const HostPathTypes = ["", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice"] as const;
export const HostPathVolumeSource = v.looseObject({
  path: v.pipe(
    v.string(),
    v.minLength(1, "must not be empty"),
    v.check((p) => !p.split("/").includes(".."), "must not contain '..'"),
  ),
  type: v.optional(v.nullable(v.picklist(HostPathTypes, `must be one of ${HostPathTypes.map((t) => JSON.stringify(t)).join(", ")}`))),
});

export const PersistentVolumeClaimVolumeSource = v.looseObject({
  claimName: v.pipe(v.string(), v.minLength(1, "must not be empty")),
  readOnly: v.optional(v.boolean()),
});

/** A generic ephemeral volume: the claim `<pod>-<volume>` the ephemeral volume controller makes from the template. */
export const EphemeralVolumeSource = v.looseObject({
  volumeClaimTemplate: v.optional(v.nullable(v.looseObject({ metadata: v.optional(v.unknown()), spec: v.unknown() }))),
});

/** The sources this agent sets up; the first one present names the volume's kind. */
/** An inline CSI volume: published by the named driver for this pod only (the driver must allow the Ephemeral lifecycle mode). */
export const CSIVolumeSource = v.looseObject({
  driver: v.pipe(v.string(), v.minLength(1, "must not be empty")),
  readOnly: v.optional(v.nullable(v.boolean())),
  fsType: v.optional(v.nullable(v.string())),
  volumeAttributes: v.optional(v.nullable(v.record(v.string(), v.string()))),
  nodePublishSecretRef: v.optional(v.nullable(v.looseObject({ name: v.optional(v.string()) }))),
});

export const SUPPORTED_SOURCES = ["emptyDir", "hostPath", "configMap", "secret", "downwardAPI", "projected", "persistentVolumeClaim", "ephemeral", "csi"] as const;

export const Volume = v.pipe(
  v.looseObject({
    name: v.pipe(
      v.string(),
      v.maxLength(63, "must be no more than 63 characters"),
      v.regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "must be a lowercase RFC 1123 label (a-z, 0-9, '-')"),
    ),
    emptyDir: v.optional(v.nullable(EmptyDirVolumeSource)),
    hostPath: v.optional(v.nullable(HostPathVolumeSource)),
    configMap: v.optional(v.nullable(ConfigMapVolumeSource)),
    secret: v.optional(v.nullable(SecretVolumeSource)),
    downwardAPI: v.optional(v.nullable(DownwardAPIVolumeSource)),
    projected: v.optional(v.nullable(ProjectedVolumeSource)),
    persistentVolumeClaim: v.optional(v.nullable(PersistentVolumeClaimVolumeSource)),
    ephemeral: v.optional(v.nullable(EphemeralVolumeSource)),
    csi: v.optional(v.nullable(CSIVolumeSource)),
  }),
  v.check((vol) => SUPPORTED_SOURCES.filter((k) => vol[k] != null).length <= 1, "may not specify more than 1 volume type"),
);

export const VolumeMount = v.looseObject({
  name: v.string(),
  mountPath: v.pipe(v.string(), v.minLength(1, "must not be empty")),
  readOnly: v.optional(v.boolean()),
  subPath: v.optional(v.string()),
  subPathExpr: v.optional(v.string()),
  mountPropagation: v.optional(v.nullable(v.picklist(["None", "HostToContainer", "Bidirectional"], 'must be "None", "HostToContainer" or "Bidirectional"'))),
});

export type VolumeSpec = v.InferOutput<typeof Volume>;
export type VolumeMountSpec = v.InferOutput<typeof VolumeMount>;
export type KeyToPathSpec = v.InferOutput<typeof KeyToPath>;
export type DownwardAPIFileSpec = v.InferOutput<typeof DownwardAPIVolumeFile>;
