/**
 * A device plugin in the process, over real gRPC on a unix socket: it serves
 * DevicePlugin, registers with a node agent's kubelet.sock, streams its device
 * list and answers Allocate with a mount, an env variable, a device node and
 * an annotation per device. For tests; records every call.
 */
import { DevicePlugin, type ContainerAllocateResponse, type Device } from "./gen/deviceplugin/api.ts";
import { RegistrationClient } from "./gen/deviceplugin/api.client.ts";
import { dialUnix, serveUnix, type UnixServer } from "../util/grpc.ts";
import { posix } from "node:path";

export interface FakePluginOptions {
  /** The device plugin directory (where kubelet.sock is and this plugin's socket goes). */
  dir: string;
  resource: string;
  endpoint: string;
  /** `numa`: the NUMA nodes the device reports (Device.topology); none: no topology. */
  devices: FakeDevice[];
  preStartRequired?: boolean;
  /** GetPreferredAllocation's answer (offered in GetDevicePluginOptions when set); a throw fails the call. */
  preferredAllocation?: (available: string[], mustInclude: string[], size: number) => string[];
  /** Where the host side of each device's mount is (`<hostDir>/<id>`, which must exist for a real runtime); /tmp by default. */
  hostDir?: string;
}

export interface FakeDevice {
  id: string;
  healthy?: boolean;
  numa?: number[];
}

const toDevice = (d: FakeDevice): Device => ({
  iD: d.id,
  health: d.healthy === false ? "Unhealthy" : "Healthy",
  ...(d.numa ? { topology: { nodes: d.numa.map((n) => ({ iD: BigInt(n) })) } } : {}),
});

export class FakeDevicePlugin {
  /** Every call; GetPreferredAllocation's with its must-include IDs and size. */
  readonly calls: { method: string; ids: string[]; mustInclude?: string[]; size?: number }[] = [];
  private server: UnixServer | undefined;
  private devices: Device[];
  private readonly watchers = new Set<(devices: Device[]) => void>();
  private readonly ends = new Set<() => void>();

  constructor(private readonly opts: FakePluginOptions) {
    this.devices = opts.devices.map(toDevice);
  }

  get socketPath(): string {
    return posix.join(this.opts.dir, this.opts.endpoint);
  }

  /** Serves DevicePlugin on its socket. */
  async serve(): Promise<void> {
    this.server = await serveUnix(this.socketPath, [
      [
        DevicePlugin,
        {
          GetDevicePluginOptions: async () => ({ preStartRequired: !!this.opts.preStartRequired, getPreferredAllocationAvailable: !!this.opts.preferredAllocation }),
          ListAndWatch: (_req: unknown, signal: AbortSignal) => this.stream(signal),
          GetPreferredAllocation: async (req: { containerRequests: { availableDeviceIDs: string[]; mustIncludeDeviceIDs: string[]; allocationSize: number }[] }) => {
            const c = req.containerRequests[0]!;
            this.calls.push({ method: "GetPreferredAllocation", ids: c.availableDeviceIDs, mustInclude: c.mustIncludeDeviceIDs, size: c.allocationSize });
            return { containerResponses: [{ deviceIDs: this.opts.preferredAllocation!(c.availableDeviceIDs, c.mustIncludeDeviceIDs, c.allocationSize) }] };
          },
          Allocate: async (req: { containerRequests: { devicesIds: string[] }[] }) => ({
            containerResponses: req.containerRequests.map((c) => {
              this.calls.push({ method: "Allocate", ids: c.devicesIds });
              return this.response(c.devicesIds);
            }),
          }),
          PreStartContainer: async (req: { devicesIds: string[] }) => (this.calls.push({ method: "PreStartContainer", ids: req.devicesIds }), {}),
        },
      ],
    ]);
  }

  private response(ids: string[]): ContainerAllocateResponse {
    return {
      envs: { FAKE_DEVICES: ids.join(",") },
      mounts: ids.map((id) => ({ containerPath: `/dev-data/${id}`, hostPath: posix.join(this.opts.hostDir ?? "/tmp", id), readOnly: true })),
      devices: ids.map((id) => ({ containerPath: `/dev/fake-${id}`, hostPath: "/dev/null", permissions: "rw" })),
      annotations: { "fake.example.com/devices": ids.join(",") },
      cdiDevices: [],
    };
  }

  private async *stream(signal: AbortSignal): AsyncIterable<object> {
    const queue: Device[][] = [this.devices];
    let wake: (() => void) | undefined;
    let ended = false;
    const push = (d: Device[]) => (queue.push(d), wake?.());
    const end = () => ((ended = true), wake?.());
    this.watchers.add(push);
    this.ends.add(end);
    signal.addEventListener("abort", end);
    try {
      while (!ended) {
        const next = queue.shift();
        if (next) {
          yield { devices: next };
          continue;
        }
        await new Promise<void>((r) => (wake = r));
      }
    } finally {
      this.watchers.delete(push);
      this.ends.delete(end);
    }
  }

  /** Registers with the agent's kubelet.sock. */
  async register(version = "v1beta1"): Promise<void> {
    const transport = dialUnix(posix.join(this.opts.dir, "kubelet.sock"));
    try {
      await new RegistrationClient(transport).register(
        {
          version,
          endpoint: this.opts.endpoint,
          resourceName: this.opts.resource,
          options: { preStartRequired: !!this.opts.preStartRequired, getPreferredAllocationAvailable: !!this.opts.preferredAllocation },
        },
        { timeout: 5000 },
      );
    } finally {
      transport.close();
    }
  }

  /** Sends a new device list to every ListAndWatch stream. */
  setDevices(devices: FakeDevice[]): void {
    this.devices = devices.map(toDevice);
    for (const w of this.watchers) w(this.devices);
  }

  /** The plugin dies: streams fail, the socket goes. */
  kill(): void {
    this.server?.close();
    this.server = undefined;
  }
}
