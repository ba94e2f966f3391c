import { describe, expect, test } from "bun:test";
import { testNode } from "./testing.ts";
import { LinuxContainerSecurityContext, LinuxSandboxSecurityContext } from "../cri/index.ts";
import type { Pod } from "../pods/schema.ts";
import { containerConfig, sandboxConfig } from "./cri-config.ts";

const node = testNode({ podLogsDir: "/var/log/pods", podsCgroupParent: "/kubepods", clusterDomain: "cluster.local" });

const pod = (podSc: Record<string, unknown> | undefined, containers: Record<string, unknown>[]): Pod =>
  ({
    metadata: { name: "p", namespace: "default", uid: "u1" },
    spec: { ...(podSc ? { securityContext: podSc } : {}), containers: containers.map((sc, i) => ({ name: `c${i}`, image: "busybox:1", securityContext: sc })) },
  }) as Pod;

describe("seLinuxOptions to the CRI", () => {
  const podLabel = { user: "system_u", role: "system_r", type: "container_t", level: "s0:c1,c2" };

  test("the pod's options label the sandbox and every container that sets none", () => {
    const p = pod({ seLinuxOptions: podLabel }, [{}]);
    expect(sandboxConfig(p, 0, node, "/kubepods/pod-u1").linux?.securityContext?.selinuxOptions).toEqual(podLabel);
    expect(containerConfig(p, p.spec.containers[0]!, 0, "sha256:x", []).linux?.securityContext?.selinuxOptions).toEqual(podLabel);
  });

  test("a container's options replace the pod's whole (unset fields empty, not the pod's), as upstream DetermineEffectiveSecurityContext", () => {
    const p = pod({ seLinuxOptions: podLabel }, [{ seLinuxOptions: { level: "s0:c7,c9" } }]);
    expect(containerConfig(p, p.spec.containers[0]!, 0, "sha256:x", []).linux?.securityContext?.selinuxOptions).toEqual({ user: "", role: "", type: "", level: "s0:c7,c9" });
    // The sandbox keeps the pod's label.
    expect(sandboxConfig(p, 0, node, "").linux?.securityContext?.selinuxOptions).toEqual(podLabel);
  });

  test("a container's options without pod options label only that container", () => {
    const p = pod(undefined, [{ seLinuxOptions: { type: "spc_t" } }, {}]);
    expect(sandboxConfig(p, 0, node, "").linux?.securityContext?.selinuxOptions).toBeUndefined();
    expect(containerConfig(p, p.spec.containers[0]!, 0, "sha256:x", []).linux?.securityContext?.selinuxOptions).toEqual({ user: "", role: "", type: "spc_t", level: "" });
    expect(containerConfig(p, p.spec.containers[1]!, 0, "sha256:x", []).linux?.securityContext?.selinuxOptions).toBeUndefined();
  });

  test("on the wire: selinux_options is field 2 of LinuxSandboxSecurityContext and field 4 of LinuxContainerSecurityContext; user, role, type, level are 1-4", () => {
    const label = { user: "u", role: "r", type: "t", level: "l" };
    // SELinuxOption: tag 0x0a "u", 0x12 "r", 0x1a "t", 0x22 "l".
    const option = [0x0a, 1, 0x75, 0x12, 1, 0x72, 0x1a, 1, 0x74, 0x22, 1, 0x6c];
    expect([...LinuxSandboxSecurityContext.toBinary(LinuxSandboxSecurityContext.create({ selinuxOptions: label }))]).toEqual([0x12, option.length, ...option]);
    expect([...LinuxContainerSecurityContext.toBinary(LinuxContainerSecurityContext.create({ selinuxOptions: label }))]).toEqual([0x22, option.length, ...option]);
  });
});
