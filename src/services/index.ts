/**
 * Services for container environment variables. In cluster mode a watched
 * cache of every Service (cache.ts); standalone, none (upstream: kubelets
 * without an API server set no service variables).
 */
import { serviceEnvVars, type Service } from "./envvars.ts";

export interface ServiceLister {
  /** Whether the first list has arrived; before it, API pods' containers wait (upstream). */
  hasSynced(): boolean;
  /** The last list could not reach the API server (offline autonomy: pods from the checkpoint must not wait for it). */
  apiUnreachable(): boolean;
  /** Every known service, all namespaces. */
  list(): Service[];
}

/** The services' variables cannot be known yet; the container waits with CreateContainerConfigError. */
export class ServicesNotSyncedError extends Error {
  override readonly name = "ServicesNotSyncedError";
  constructor() {
    super("services have not yet been read at least once, cannot construct envvars");
  }
}

/** Service variables for a pod of `namespace`; throws ServicesNotSyncedError for an API pod before the first list. */
export type ServiceEnv = (namespace: string, enableServiceLinks: boolean, staticPod: boolean) => Map<string, string>;

/** Standalone (no API server): no service variables, as upstream without an API client lists no services. */
export const noServiceEnv: ServiceEnv = () => new Map<string, string>();

/**
 * Upstream makeEnvironmentVariables: an API pod waits for the first list
 * (so that KUBERNETES_SERVICE_HOST is never missed after a restart); a
 * static pod does not. Bunlet extension: nor does any pod while the API
 * server cannot be reached (pods started offline from the checkpoint run
 * without the variables rather than not at all).
 */
export function serviceEnvFrom(lister: ServiceLister): ServiceEnv {
  return (namespace, enableServiceLinks, staticPod) => {
    if (!lister.hasSynced() && !staticPod && !lister.apiUnreachable()) throw new ServicesNotSyncedError();
    return serviceEnvVars(lister.list(), namespace, enableServiceLinks);
  };
}

/** A fixed set of services (unit tests); `synced` false models the time before the first list. */
export class FakeServices implements ServiceLister {
  constructor(
    public services: Service[] = [],
    public synced = true,
    public unreachable = false,
  ) {}
  hasSynced(): boolean {
    return this.synced;
  }
  apiUnreachable(): boolean {
    return this.unreachable;
  }
  list(): Service[] {
    return this.services;
  }
}

export { fromServices, serviceEnvVars, isServiceIPSet, MASTER_SERVICE_NAMESPACE, type Service } from "./envvars.ts";
export { WatchedServices } from "./cache.ts";
