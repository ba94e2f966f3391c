/**
 * For tests: a CSI driver that serves csi.v1 Identity and Node on a unix
 * socket and records every call, and the registration side of
 * node-driver-registrar (pluginregistration Registration on a socket in the
 * plugins_registry directory) announcing it. Both speak the real protocol
 * through util/grpc.ts; publish creates the target directory (as a driver's
 * mount would make it exist) and unpublish removes it.
 */
import { mkdirSync, rmSync } from "node:fs";
import { RpcError, serveUnix, type UnixServer } from "../util/grpc.ts";
import { Identity, Node, NodeServiceCapability_RPC_Type } from "./gen/csi/csi.ts";
import type { NodeExpandVolumeRequest, NodeGetVolumeStatsRequest, NodeGetVolumeStatsResponse, NodePublishVolumeRequest, NodeStageVolumeRequest } from "./gen/csi/csi.ts";
import { Registration } from "./gen/pluginregistration/api.ts";
import type { RegistrationStatus } from "./gen/pluginregistration/api.ts";

export interface FakeCsiDriverOptions {
  name: string;
  nodeId: string;
  topology?: Record<string, string>;
  maxVolumesPerNode?: number;
  /** Advertise STAGE_UNSTAGE_VOLUME. */
  stageUnstage?: boolean;
  /** Advertise VOLUME_MOUNT_GROUP (the driver applies fsGroup when it mounts). */
  mountGroup?: boolean;
  /** Advertise GET_VOLUME_STATS and answer NodeGetVolumeStats with this usage (per volume id; "*" for any). */
  volumeStats?: Record<string, NodeGetVolumeStatsResponse>;
  /** Advertise EXPAND_VOLUME; NodeExpandVolume answers the required bytes as the new capacity. */
  expand?: boolean;
  /** Advertise SINGLE_NODE_MULTI_WRITER. */
  singleNodeMultiWriter?: boolean;
}

export interface FakeCall {
  method: string;
  request: object;
}

export class FakeCsiDriver {
  readonly calls: FakeCall[] = [];
  /** Make the next call of a method fail with this gRPC code and message. */
  readonly failures = new Map<string, { code: number; message: string }>();
  private server: UnixServer | undefined;

  constructor(readonly opts: FakeCsiDriverOptions) {}

  async serve(socketPath: string): Promise<void> {
    const record = (method: string, request: object) => {
      this.calls.push({ method, request });
      const failure = this.failures.get(method);
      if (failure) {
        this.failures.delete(method);
        throw new RpcError(failure.code, failure.message);
      }
    };
    const o = this.opts;
    this.server = await serveUnix(socketPath, [
      [
        Identity,
        {
          GetPluginInfo: async (r: object) => (record("GetPluginInfo", r), { name: o.name, vendorVersion: "0.0.1", manifest: {} }),
        },
      ],
      [
        Node,
        {
          NodeGetInfo: async (r: object) => (
            record("NodeGetInfo", r),
            { nodeId: o.nodeId, maxVolumesPerNode: BigInt(o.maxVolumesPerNode ?? 0), ...(o.topology ? { accessibleTopology: { segments: o.topology } } : {}) }
          ),
          NodeGetCapabilities: async (r: object) => (
            record("NodeGetCapabilities", r),
            {
              capabilities: [
                ...(o.stageUnstage ? [NodeServiceCapability_RPC_Type.STAGE_UNSTAGE_VOLUME] : []),
                ...(o.mountGroup ? [NodeServiceCapability_RPC_Type.VOLUME_MOUNT_GROUP] : []),
                ...(o.volumeStats ? [NodeServiceCapability_RPC_Type.GET_VOLUME_STATS] : []),
                ...(o.expand ? [NodeServiceCapability_RPC_Type.EXPAND_VOLUME] : []),
                ...(o.singleNodeMultiWriter ? [NodeServiceCapability_RPC_Type.SINGLE_NODE_MULTI_WRITER] : []),
              ].map((type) => ({ type: { oneofKind: "rpc", rpc: { type } } })),
            }
          ),
          NodeStageVolume: async (r: NodeStageVolumeRequest) => {
            record("NodeStageVolume", r);
            mkdirSync(r.stagingTargetPath, { recursive: true });
            return {};
          },
          NodeUnstageVolume: async (r: object) => (record("NodeUnstageVolume", r), {}),
          NodePublishVolume: async (r: NodePublishVolumeRequest) => {
            record("NodePublishVolume", r);
            mkdirSync(r.targetPath, { recursive: true });
            return {};
          },
          NodeGetVolumeStats: async (r: NodeGetVolumeStatsRequest) => {
            record("NodeGetVolumeStats", r);
            const answer = o.volumeStats?.[r.volumeId] ?? o.volumeStats?.["*"];
            if (!answer) throw new RpcError(5, `volume ${r.volumeId} not found`);
            return answer;
          },
          NodeExpandVolume: async (r: NodeExpandVolumeRequest) => {
            record("NodeExpandVolume", r);
            return { capacityBytes: r.capacityRange?.requiredBytes ?? 0n };
          },
          NodeUnpublishVolume: async (r: { targetPath: string }) => {
            record("NodeUnpublishVolume", r);
            rmSync(r.targetPath, { recursive: true, force: true });
            return {};
          },
        },
      ],
    ]);
  }

  callsOf(method: string): object[] {
    return this.calls.filter((c) => c.method === method).map((c) => c.request);
  }

  close(): void {
    this.server?.close();
  }
}

/** The registrar side: serves Registration on `socketPath` (in plugins_registry) and records the statuses it is told. */
export class FakeRegistrar {
  readonly statuses: RegistrationStatus[] = [];
  private server: UnixServer | undefined;

  constructor(readonly info: { type: string; name: string; endpoint: string; supportedVersions: string[] }) {}

  async serve(socketPath: string): Promise<void> {
    this.server = await serveUnix(socketPath, [
      [
        Registration,
        {
          GetInfo: async () => this.info,
          NotifyRegistrationStatus: async (r: RegistrationStatus) => {
            this.statuses.push(r);
            return {};
          },
        },
      ],
    ]);
  }

  close(): void {
    this.server?.close();
  }
}
