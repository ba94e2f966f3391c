import { expect, test } from "bun:test";
import { ContainerConfig } from "../cri/gen/api.ts";
import { withDevices } from "./cri.ts";

test("a container's devices go into its CRI config: plugin env first (the container's own wins), mounts, device nodes, annotations under the agent's, CDI devices", () => {
  const config = ContainerConfig.create({
    envs: [{ key: "A", value: "container" }],
    mounts: [{ containerPath: "/vol", hostPath: "/host/vol" }],
    annotations: { "io.kubernetes.container.hash": "abc", shared: "agent" },
  });
  const out = withDevices(config, {
    envs: [
      { key: "A", value: "plugin" },
      { key: "B", value: "plugin" },
    ],
    mounts: [{ containerPath: "/dev-data", hostPath: "/tmp/d1", readonly: true }],
    devices: [{ containerPath: "/dev/x", hostPath: "/dev/null", permissions: "rw" }],
    annotations: { shared: "plugin", "plugin.example.com/id": "d1" },
    cdiDevices: [{ name: "example.com/dev=d1" }],
  });
  expect(out.envs).toEqual([
    { key: "A", value: "plugin" },
    { key: "B", value: "plugin" },
    { key: "A", value: "container" },
  ]);
  expect(out.mounts.map((m) => [m.containerPath, m.hostPath, m.readonly])).toEqual([
    ["/dev-data", "/tmp/d1", true],
    ["/vol", "/host/vol", false],
  ]);
  expect(out.devices).toEqual([{ containerPath: "/dev/x", hostPath: "/dev/null", permissions: "rw" }]);
  expect(out.annotations).toEqual({ "io.kubernetes.container.hash": "abc", shared: "agent", "plugin.example.com/id": "d1" });
  expect(out.cDIDevices).toEqual([{ name: "example.com/dev=d1" }]);
  expect(withDevices(config, { envs: [], mounts: [], devices: [], annotations: {}, cdiDevices: [] })).toBe(config);
});
