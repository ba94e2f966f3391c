/**
 * The configMaps and secrets that pods reference, as volumes, env and
 * envFrom read them. One interface so the runtime never asks the API server
 * per sync: the cluster implementation keeps a watched cache of just the
 * referenced objects; standalone mode has none (every lookup is "not found").
 */

export interface ConfigMapData {
  data: Record<string, string>;
  /** base64 as the API sends it. */
  binaryData: Record<string, string>;
}

export interface SecretData {
  /** base64 as the API sends it. */
  data: Record<string, string>;
  type?: string;
}

export interface PodObjects {
  /** undefined when the object does not exist (or cannot be read yet). Throws PodObjectError when the API cannot be asked. */
  configMap(namespace: string, name: string): Promise<ConfigMapData | undefined>;
  secret(namespace: string, name: string): Promise<SecretData | undefined>;
}

/** The API could not answer a lookup (not "the object is absent"): callers retry instead of treating it as missing. */
export class PodObjectError extends Error {
  constructor(
    readonly kind: "ConfigMap" | "Secret",
    readonly namespace: string,
    readonly objectName: string,
    cause: unknown,
  ) {
    super(`reading ${kind} ${namespace}/${objectName}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/** Standalone mode: there is no API server, so nothing is ever found. */
export const noPodObjects: PodObjects = {
  configMap: async () => undefined,
  secret: async () => undefined,
};

/** In-memory objects for unit tests, keyed `namespace/name`. */
export class FakePodObjects implements PodObjects {
  readonly configMaps = new Map<string, ConfigMapData>();
  readonly secrets = new Map<string, SecretData>();
  async configMap(namespace: string, name: string) {
    return structuredClone(this.configMaps.get(`${namespace}/${name}`));
  }
  async secret(namespace: string, name: string) {
    return structuredClone(this.secrets.get(`${namespace}/${name}`));
  }
}

/** A service account token for a pod's projected volume (serviceaccounts/<name>/token). */
export interface TokenRequestSpec {
  namespace: string;
  serviceAccount: string;
  /** Empty: the API server's own audiences. */
  audiences: string[];
  expirationSeconds: number;
  pod: { name: string; uid: string };
}

export interface IssuedToken {
  token: string;
  /** Milliseconds since the epoch. */
  expiresAt: number;
  /**
   * The lifetime the API server granted (the answer's spec.expirationSeconds): less than the one asked for when
   * the server caps it (--service-account-max-token-expiration). Absent in tokens checkpointed before it was kept.
   */
  lifetimeSeconds?: number;
}

/** The TokenRequest API (serviceaccounts/<name>/token), as the KubeApi offers it. */
export type RequestToken = (spec: TokenRequestSpec) => Promise<IssuedToken>;
