/**
 * The node agent's calls to one CSI driver (csi.v1 Identity and Node
 * services) over the driver's unix socket, each with a deadline. The volume
 * plugin and the driver registry use the CsiNodeClient interface; a fake
 * driver (fake-driver.ts) serves the real protocol in unit tests.
 */
import type { GrpcTransport } from "@protobuf-ts/grpc-transport";
import { IdentityClient, NodeClient } from "./gen/csi/csi.client.ts";
import { NodeServiceCapability_RPC_Type, VolumeUsage_Unit, type VolumeCapability } from "./gen/csi/csi.ts";
import { dialUnix } from "../util/grpc.ts";

/** Upstream csi_client.go's deadline for NodeGetInfo and capabilities; publish/stage get the volume operation's (2 min 3 s upstream). */
const INFO_TIMEOUT_MS = 10_000;
const VOLUME_TIMEOUT_MS = 2 * 60_000 + 3_000;

export interface NodeInfo {
  nodeId: string;
  /** 0: no limit. */
  maxVolumesPerNode: number;
  /** Topology segments of this node (label key → value). */
  topology: Record<string, string>;
}

export interface StageRequest {
  volumeId: string;
  stagingTargetPath: string;
  publishContext: Record<string, string>;
  volumeContext: Record<string, string>;
  secrets: Record<string, string>;
  capability: VolumeCapability;
}

export interface PublishRequest extends StageRequest {
  /** Empty when the driver does not stage. */
  targetPath: string;
  readonly: boolean;
}

/** NodeGetVolumeStats' usage by unit (each absent when the driver did not report it) and its volume condition. */
export interface VolumeStats {
  bytes?: { available: number; total: number; used: number };
  inodes?: { available: number; total: number; used: number };
  condition?: { abnormal: boolean; message: string };
}

export interface ExpandRequest {
  volumeId: string;
  /** The published path (upstream passes the pod's target path, or the staging path when expanding at stage). */
  volumePath: string;
  stagingTargetPath: string;
  requiredBytes: number;
  capability: VolumeCapability;
  secrets: Record<string, string>;
}

export interface CsiNodeClient {
  pluginInfo(): Promise<{ name: string; vendorVersion: string }>;
  nodeInfo(): Promise<NodeInfo>;
  /** The driver's node capabilities by upstream name: STAGE_UNSTAGE_VOLUME, VOLUME_MOUNT_GROUP, ... */
  capabilities(): Promise<Set<string>>;
  stage(req: StageRequest): Promise<void>;
  unstage(volumeId: string, stagingTargetPath: string): Promise<void>;
  publish(req: PublishRequest): Promise<void>;
  unpublish(volumeId: string, targetPath: string): Promise<void>;
  volumeStats(volumeId: string, volumePath: string): Promise<VolumeStats>;
  /** NodeExpandVolume; resolves to the capacity the driver reports (0: not reported). */
  expand(req: ExpandRequest): Promise<number>;
  close(): void;
}

/** A CSI endpoint as drivers announce it: a socket path, or unix:// (or unix:) followed by one. */
export function socketPathOf(endpoint: string): string {
  if (endpoint.startsWith("unix://")) return endpoint.slice("unix://".length);
  if (endpoint.startsWith("unix:")) return endpoint.slice("unix:".length);
  return endpoint;
}

export class GrpcCsiNodeClient implements CsiNodeClient {
  private readonly transport: GrpcTransport;
  private readonly identity: IdentityClient;
  private readonly node: NodeClient;

  constructor(readonly endpoint: string) {
    this.transport = dialUnix(socketPathOf(endpoint));
    this.identity = new IdentityClient(this.transport);
    this.node = new NodeClient(this.transport);
  }

  async pluginInfo() {
    const { response } = await this.identity.getPluginInfo({}, { timeout: INFO_TIMEOUT_MS });
    return { name: response.name, vendorVersion: response.vendorVersion };
  }

  async nodeInfo(): Promise<NodeInfo> {
    const { response } = await this.node.nodeGetInfo({}, { timeout: INFO_TIMEOUT_MS });
    return { nodeId: response.nodeId, maxVolumesPerNode: Number(response.maxVolumesPerNode), topology: { ...(response.accessibleTopology?.segments ?? {}) } };
  }

  async capabilities(): Promise<Set<string>> {
    const { response } = await this.node.nodeGetCapabilities({}, { timeout: INFO_TIMEOUT_MS });
    const out = new Set<string>();
    for (const c of response.capabilities) {
      if (c.type.oneofKind === "rpc") out.add(NodeServiceCapability_RPC_Type[c.type.rpc.type] ?? String(c.type.rpc.type));
    }
    return out;
  }

  async stage(r: StageRequest) {
    await this.node.nodeStageVolume(
      {
        volumeId: r.volumeId,
        stagingTargetPath: r.stagingTargetPath,
        publishContext: r.publishContext,
        volumeContext: r.volumeContext,
        secrets: r.secrets,
        volumeCapability: r.capability,
      },
      { timeout: VOLUME_TIMEOUT_MS },
    );
  }

  async unstage(volumeId: string, stagingTargetPath: string) {
    await this.node.nodeUnstageVolume({ volumeId, stagingTargetPath }, { timeout: VOLUME_TIMEOUT_MS });
  }

  async publish(r: PublishRequest) {
    await this.node.nodePublishVolume(
      {
        volumeId: r.volumeId,
        stagingTargetPath: r.stagingTargetPath,
        targetPath: r.targetPath,
        publishContext: r.publishContext,
        volumeContext: r.volumeContext,
        secrets: r.secrets,
        volumeCapability: r.capability,
        readonly: r.readonly,
      },
      { timeout: VOLUME_TIMEOUT_MS },
    );
  }

  async unpublish(volumeId: string, targetPath: string) {
    await this.node.nodeUnpublishVolume({ volumeId, targetPath }, { timeout: VOLUME_TIMEOUT_MS });
  }

  async volumeStats(volumeId: string, volumePath: string): Promise<VolumeStats> {
    // Upstream's metrics call sends the volume id and the published path only.
    const { response } = await this.node.nodeGetVolumeStats({ volumeId, volumePath, stagingTargetPath: "" }, { timeout: VOLUME_TIMEOUT_MS });
    const out: VolumeStats = {};
    for (const u of response.usage) {
      const v = { available: Number(u.available), total: Number(u.total), used: Number(u.used) };
      if (u.unit === VolumeUsage_Unit.BYTES) out.bytes = v;
      else if (u.unit === VolumeUsage_Unit.INODES) out.inodes = v;
    }
    if (response.volumeCondition) out.condition = { abnormal: response.volumeCondition.abnormal, message: response.volumeCondition.message };
    return out;
  }

  async expand(r: ExpandRequest): Promise<number> {
    const { response } = await this.node.nodeExpandVolume(
      {
        volumeId: r.volumeId,
        volumePath: r.volumePath,
        stagingTargetPath: r.stagingTargetPath,
        capacityRange: { requiredBytes: BigInt(r.requiredBytes), limitBytes: 0n },
        volumeCapability: r.capability,
        secrets: r.secrets,
      },
      { timeout: VOLUME_TIMEOUT_MS },
    );
    return Number(response.capacityBytes);
  }

  close() {
    this.transport.close();
  }
}
