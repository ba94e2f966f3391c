/**
 * Registered CSI drivers (upstream pkg/volume/csi csi_plugin.go and
 * nodeinfomanager): the plugin watcher hands over each driver that
 * registers (name → endpoint, highest supported CSI version); on
 * registration the driver's NodeGetInfo goes to the API as upstream writes
 * it: the node's `csi.volume.kubernetes.io/nodeid` annotation, the topology
 * segments as node labels, and the driver's entry in the CSINode object
 * (nodeID, topologyKeys, allocatable.count). Deregistration removes the
 * entry and the annotation key; the labels stay, as upstream leaves them.
 * The volume plugin asks `client(name)` for a registered driver.
 */
import type { ApiObject, KubeApi } from "../api/index.ts";
import { ApiError, isApiReason } from "../api/errors.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { NodeUid } from "../node/registration.ts";
import { type CsiNodeClient, GrpcCsiNodeClient, type NodeInfo } from "./client.ts";
import type { PluginHandler } from "./plugin-watcher.ts";

export const NODE_ID_ANNOTATION = "csi.volume.kubernetes.io/nodeid";
/**
 * Upstream's CSINode annotation naming the in-tree plugins whose volumes a
 * 1.34 kubelet hands to CSI drivers (CSI migration: all seven are on, locked,
 * in 1.34). The scheduler and the attach/detach controller read it. This
 * agent has none of those in-tree plugins: their PersistentVolumes are
 * refused with why (volumes/claims.ts), as on a node without their driver.
 */
export const MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins";
export const MIGRATED_PLUGINS = [
  "kubernetes.io/aws-ebs",
  "kubernetes.io/azure-disk",
  "kubernetes.io/azure-file",
  "kubernetes.io/cinder",
  "kubernetes.io/gce-pd",
  "kubernetes.io/portworx-volume",
  "kubernetes.io/vsphere-volume",
].join(",");

/** A volume names a driver that has not registered on this node (upstream's wording). */
export class CsiDriverNotFoundError extends Error {
  override readonly name = "CsiDriverNotFoundError";
  constructor(readonly driver: string) {
    super(`driver name ${driver} not found in the list of registered CSI drivers`);
  }
}

export interface CsiDriversOptions {
  nodeName: string;
  /** Absent standalone: drivers register, and nothing is written to an API. */
  api?: KubeApi;
  /** The Node's UID once registered (the CSINode's owner reference). */
  node: NodeUid;
  clock: Clock;
  logger: Logger;
  /** Injected for tests; the gRPC client by default. */
  dial?: (endpoint: string) => CsiNodeClient;
  /** Attempts (500 ms apart) at the node and CSINode updates, as upstream's nodeUpdateBackoff. */
  updateAttempts?: number;
}

interface Driver {
  endpoint: string;
  version: [number, number, number];
  client: CsiNodeClient;
}

/** "1.2.0" or "v1.2" → [1, 2, 0]; undefined when it is not a version. */
function parseVersion(v: string): [number, number, number] | undefined {
  const m = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[-+].*)?$/.exec(v.trim());
  if (!m) return undefined;
  return [Number(m[1]), Number(m[2] ?? 0), Number(m[3] ?? 0)];
}

const less = (a: readonly number[], b: readonly number[]) => {
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) < (b[i] ?? 0);
  return false;
};

/** The highest CSI version of `versions` this agent speaks (1.x), as upstream's highestSupportedVersion. */
export function highestSupportedVersion(versions: string[]): [number, number, number] {
  if (versions.length === 0) throw new Error("CSI driver reporting empty array for supported versions");
  let best: [number, number, number] | undefined;
  const ones = versions.map(parseVersion).filter((v): v is [number, number, number] => v !== undefined && v[0] === 1);
  for (const v of ones) if (!best || less(best, v)) best = v;
  if (!best) throw new Error("none of the CSI versions reported by this driver are supported");
  return best;
}

export class CsiDrivers implements PluginHandler {
  private readonly drivers = new Map<string, Driver>();
  /** One API update at a time: CSINode and the node annotation are read-modify-write. */
  private updates: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: CsiDriversOptions) {}

  validate(name: string, endpoint: string, versions: string[]): void {
    if (!name) throw new Error("plugin name is empty");
    let version: [number, number, number];
    try {
      version = highestSupportedVersion(versions);
    } catch (err) {
      throw new Error(`validation failed for CSI Driver ${name} at endpoint ${endpoint}: ${errorMessage(err)}`);
    }
    const existing = this.drivers.get(name);
    if (existing && less(version, existing.version)) {
      throw new Error(`new version of plugin ${name} (${version.join(".")}) is not higher than existing version (${existing.version.join(".")})`);
    }
  }

  async register(name: string, endpoint: string, versions: string[]): Promise<void> {
    const version = highestSupportedVersion(versions);
    const client = (this.opts.dial ?? ((e) => new GrpcCsiNodeClient(e)))(endpoint);
    const previous = this.drivers.get(name);
    this.drivers.set(name, { endpoint, version, client });
    previous?.client.close();
    try {
      const info = await client.nodeInfo();
      if (!info.nodeId) throw new Error("NodeGetInfo returned an empty node_id");
      await this.serialised(() => this.install(name, info));
      this.opts.logger.info("CSI driver registered", { driver: name, endpoint, nodeId: info.nodeId, topology: info.topology, maxVolumesPerNode: info.maxVolumesPerNode });
    } catch (err) {
      // Upstream unregisters the driver again when the node cannot be told about it.
      if (this.drivers.get(name)?.client === client) this.drivers.delete(name);
      client.close();
      throw err;
    }
  }

  /**
   * Upstream initializeCSINode: once the Node exists, its CSINode is created
   * (no drivers yet, owned by the Node, with the migrated-plugins
   * annotation), or an existing one gets the annotation; before any driver
   * registers, so that the scheduler sees the node's CSI state at once.
   * Retried while the Node is not found or the write conflicts.
   */
  async initializeCsiNode(): Promise<void> {
    const { api, nodeName } = this.opts;
    if (!api) return;
    await this.serialised(() =>
      this.retrying("failed to initialize CSINode", async () => {
        const current = await api.getCSINode(nodeName);
        if (!current) {
          if (!(await api.getNode(nodeName))) throw new ApiError("NotFound", 404, "GET", `/api/v1/nodes/${nodeName}`, `node ${nodeName} not found`);
          await api.createCSINode(this.newCsiNode([]));
          this.opts.logger.info("CSINode created", { node: nodeName });
          return;
        }
        const meta = (current.metadata ?? {}) as { annotations?: Record<string, string> };
        if (meta.annotations?.[MIGRATED_PLUGINS_ANNOTATION] === MIGRATED_PLUGINS) return;
        current.metadata = { ...meta, annotations: { ...(meta.annotations ?? {}), [MIGRATED_PLUGINS_ANNOTATION]: MIGRATED_PLUGINS } };
        await api.updateCSINode(current);
      }),
    );
  }

  async deregister(name: string): Promise<void> {
    const driver = this.drivers.get(name);
    this.drivers.delete(name);
    driver?.client.close();
    await this.serialised(() => this.uninstall(name));
    this.opts.logger.info("CSI driver deregistered", { driver: name });
  }

  /** The client of a registered driver; throws CsiDriverNotFoundError. */
  client(name: string): CsiNodeClient {
    const driver = this.drivers.get(name);
    if (!driver) throw new CsiDriverNotFoundError(name);
    return driver.client;
  }

  registered(): string[] {
    return [...this.drivers.keys()].sort();
  }

  private serialised<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.updates.then(fn, fn);
    this.updates = run.catch(() => undefined);
    return run;
  }

  /** Retries `fn` on NotFound (the node is not registered yet) and Conflict, 500 ms apart. */
  private async retrying(what: string, fn: () => Promise<void>): Promise<void> {
    const attempts = this.opts.updateAttempts ?? 10;
    for (let i = 1; ; i++) {
      try {
        return await fn();
      } catch (err) {
        if (i >= attempts || !(isApiReason(err, "NotFound") || isApiReason(err, "Conflict") || isApiReason(err, "AlreadyExists"))) {
          throw new Error(`${what}: ${errorMessage(err)}`);
        }
        await this.opts.clock.sleep(500);
      }
    }
  }

  private async install(name: string, info: NodeInfo): Promise<void> {
    const { api, nodeName } = this.opts;
    if (!api) return;
    await this.retrying("error updating Node object with CSI driver node info", async () => {
      const node = await api.getNode(nodeName);
      if (!node) throw new ApiError("NotFound", 404, "GET", `/api/v1/nodes/${nodeName}`, `node ${nodeName} not found`);
      const meta = (node.metadata ?? {}) as { labels?: Record<string, string>; annotations?: Record<string, string> };
      for (const [k, v] of Object.entries(info.topology)) {
        const have = meta.labels?.[k];
        if (have !== undefined && have !== v) throw new Error(`detected topology value collision: driver reported "${k}":"${v}" but existing label is "${k}":"${have}"`);
      }
      const ids = parseNodeIds(meta.annotations?.[NODE_ID_ANNOTATION]);
      const labelsMissing = Object.entries(info.topology).some(([k, v]) => meta.labels?.[k] !== v);
      if (ids[name] === info.nodeId && !labelsMissing) return;
      ids[name] = info.nodeId;
      await api.patchNode(nodeName, { metadata: { labels: info.topology, annotations: { [NODE_ID_ANNOTATION]: JSON.stringify(ids) } } });
    });
    const entry: Record<string, unknown> = { name, nodeID: info.nodeId, topologyKeys: Object.keys(info.topology).sort() };
    if (info.maxVolumesPerNode > 0) entry.allocatable = { count: Math.min(info.maxVolumesPerNode, 2 ** 31 - 1) };
    await this.retrying("error updating CSINode object with CSI driver node info", async () => {
      const current = await api.getCSINode(nodeName);
      if (!current) {
        await api.createCSINode(this.newCsiNode([entry]));
        return;
      }
      const spec = (current.spec ?? {}) as { drivers?: Record<string, unknown>[] };
      const drivers = spec.drivers ?? [];
      const same = drivers.find((d) => d.name === name);
      if (same && JSON.stringify(same) === JSON.stringify({ ...same, ...entry }) && (entry.allocatable !== undefined || same.allocatable === undefined)) return;
      current.spec = { ...spec, drivers: [...drivers.filter((d) => d.name !== name), entry] };
      await api.updateCSINode(current);
    });
  }

  private async uninstall(name: string): Promise<void> {
    const { api, nodeName } = this.opts;
    if (!api) return;
    await this.retrying("error removing CSI driver from CSINode object", async () => {
      const current = await api.getCSINode(nodeName);
      const spec = (current?.spec ?? {}) as { drivers?: { name?: string }[] };
      if (!current || !spec.drivers?.some((d) => d.name === name)) return;
      current.spec = { ...spec, drivers: spec.drivers.filter((d) => d.name !== name) };
      await api.updateCSINode(current);
    });
    await this.retrying("error removing CSI driver node ID from Node object", async () => {
      const node = await api.getNode(nodeName);
      const ids = parseNodeIds((node?.metadata as { annotations?: Record<string, string> } | undefined)?.annotations?.[NODE_ID_ANNOTATION]);
      if (!node || !(name in ids)) return;
      delete ids[name];
      const value = Object.keys(ids).length ? JSON.stringify(ids) : null;
      await api.patchNode(nodeName, { metadata: { annotations: { [NODE_ID_ANNOTATION]: value } } });
    });
  }

  private newCsiNode(drivers: Record<string, unknown>[]): ApiObject {
    const uid = this.opts.node.uid();
    const metadata: Record<string, unknown> = { name: this.opts.nodeName, annotations: { [MIGRATED_PLUGINS_ANNOTATION]: MIGRATED_PLUGINS } };
    if (uid) metadata.ownerReferences = [{ apiVersion: "v1", kind: "Node", name: this.opts.nodeName, uid }];
    return { apiVersion: "storage.k8s.io/v1", kind: "CSINode", metadata, spec: { drivers } };
  }

  /** Closes every driver connection. */
  close(): void {
    for (const d of this.drivers.values()) d.client.close();
    this.drivers.clear();
  }
}

function parseNodeIds(annotation: string | undefined): Record<string, string> {
  if (!annotation) return {};
  try {
    const parsed = JSON.parse(annotation) as unknown;
    return parsed && typeof parsed === "object" ? { ...(parsed as Record<string, string>) } : {};
  } catch {
    return {};
  }
}
