/**
 * One registered device plugin, dialed back on its socket in the device
 * plugin directory (upstream devicemanager/endpoint.go): its device list
 * streams in through ListAndWatch; allocation calls go through here with a
 * deadline each.
 */
import type { GrpcTransport } from "@protobuf-ts/grpc-transport";
import { DevicePluginClient } from "./gen/deviceplugin/api.client.ts";
import type { ContainerAllocateResponse, Device, DevicePluginOptions } from "./gen/deviceplugin/api.ts";
import { dialUnix } from "../util/grpc.ts";

/** Upstream's deadline for Allocate, PreStartContainer and GetPreferredAllocation. */
const CALL_TIMEOUT_MS = 30_000;

/** The calls the device manager makes to one plugin; a fake implements it in unit tests. */
export interface PluginEndpoint {
  readonly resource: string;
  readonly socketPath: string;
  readonly options: DevicePluginOptions;
  /** Streams device lists to `onDevices` until the plugin ends the stream (resolves) or fails (rejects), or `signal` aborts. */
  listAndWatch(onDevices: (devices: Device[]) => void, signal: AbortSignal): Promise<void>;
  /** The plugin's preferred `size` devices among `available`, including `mustInclude`. */
  preferredAllocation(available: string[], mustInclude: string[], size: number): Promise<string[]>;
  /** What one container needs to use these devices. */
  allocate(deviceIds: string[]): Promise<ContainerAllocateResponse>;
  /** Called before each start of a container holding these devices when the plugin asks for it. */
  preStartContainer(deviceIds: string[]): Promise<void>;
  /** Drops the connection. Idempotent. */
  close(): void;
}

export class GrpcPluginEndpoint implements PluginEndpoint {
  private readonly transport: GrpcTransport;
  private readonly client: DevicePluginClient;

  constructor(
    readonly resource: string,
    readonly socketPath: string,
    readonly options: DevicePluginOptions,
  ) {
    this.transport = dialUnix(socketPath);
    this.client = new DevicePluginClient(this.transport);
  }

  async listAndWatch(onDevices: (devices: Device[]) => void, signal: AbortSignal): Promise<void> {
    const call = this.client.listAndWatch({}, { abort: signal });
    for await (const res of call.responses) onDevices(res.devices);
  }

  async preferredAllocation(available: string[], mustInclude: string[], size: number): Promise<string[]> {
    const { response } = await this.client.getPreferredAllocation(
      { containerRequests: [{ availableDeviceIDs: available, mustIncludeDeviceIDs: mustInclude, allocationSize: size }] },
      { timeout: CALL_TIMEOUT_MS },
    );
    return response.containerResponses[0]?.deviceIDs ?? [];
  }

  async allocate(deviceIds: string[]): Promise<ContainerAllocateResponse> {
    const { response } = await this.client.allocate({ containerRequests: [{ devicesIds: deviceIds }] }, { timeout: CALL_TIMEOUT_MS });
    const one = response.containerResponses[0];
    if (!one) throw new Error(`no containers return in allocation response ${JSON.stringify(response)}`);
    return one;
  }

  async preStartContainer(deviceIds: string[]): Promise<void> {
    await this.client.preStartContainer({ devicesIds: deviceIds }, { timeout: CALL_TIMEOUT_MS });
  }

  close(): void {
    this.transport.close();
  }
}
