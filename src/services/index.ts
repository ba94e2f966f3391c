/**
 * Services for container environment variables. In cluster mode a watched
 * cache of every Service (cache.ts); standalone, none (upstream: kubelets
 * without an API server set no service variables).
 */
import { serviceEnvVars, type Service } from "./envvars.ts";

export interface ServiceLister {
  /** Whether the first list has arrived; before it, no container environment can be built (upstream). */
  hasSynced(): boolean;
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

/** Service variables for a pod of `namespace`; throws ServicesNotSyncedError before the first list. */
export type ServiceEnv = (namespace: string, enableServiceLinks: boolean) => Map<string, string>;

export function serviceEnvFrom(lister: ServiceLister): ServiceEnv {
  return (namespace, enableServiceLinks) => {
    if (!lister.hasSynced()) throw new ServicesNotSyncedError();
    return serviceEnvVars(lister.list(), namespace, enableServiceLinks);
  };
}

/** A fixed set of services (unit tests); `synced` false models the time before the first list. */
export class FakeServices implements ServiceLister {
  constructor(
    public services: Service[] = [],
    public synced = true,
  ) {}
  hasSynced(): boolean {
    return this.synced;
  }
  list(): Service[] {
    return this.services;
  }
}

export { fromServices, serviceEnvVars, isServiceIPSet, MASTER_SERVICE_NAMESPACE, type Service } from "./envvars.ts";
export { WatchedServices } from "./cache.ts";
