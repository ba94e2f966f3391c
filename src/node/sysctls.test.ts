import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { sandboxSysctls, sysctlAllowlist, SysctlConfigError } from "./sysctls.ts";
import { normalizeSysctlName } from "../config/sysctl-names.ts";

const pod = (sysctls: { name: string; value: string }[], spec: Partial<Pod["spec"]> = {}): Pod => ({
  metadata: { name: "p", namespace: "ns", uid: "u" },
  spec: { containers: [{ name: "c", image: "i" }], securityContext: { sysctls }, ...spec },
});

describe("sysctl admission", () => {
  test("safe sysctls are admitted by default; others are SysctlForbidden with upstream's message", () => {
    const list = sysctlAllowlist([]);
    expect(
      list.admit(
        pod([
          { name: "kernel.shm_rmid_forced", value: "1" },
          { name: "net.ipv4.ip_local_port_range", value: "1024 65000" },
        ]),
      ),
    ).toEqual({ admit: true });
    expect(list.admit(pod([]))).toEqual({ admit: true });
    expect(list.admit(pod([{ name: "kernel.msgmax", value: "65536" }]))).toEqual({
      admit: false,
      reason: "SysctlForbidden",
      message: 'forbidden sysctl: "kernel.msgmax" not allowlisted',
    });
  });

  test("allowedUnsafeSysctls admits names and prefixes; slash names are normalized", () => {
    const list = sysctlAllowlist(["kernel.msg*", "net.core.somaxconn", "net.ipv6.*"]);
    expect(
      list.admit(
        pod([
          { name: "kernel.msgmax", value: "1" },
          { name: "net.core.somaxconn", value: "1024" },
          { name: "net/ipv6/conf/all/forwarding", value: "1" },
        ]),
      ),
    ).toEqual({ admit: true });
    expect(list.admit(pod([{ name: "net.core.rmem_max", value: "1" }])).admit).toBe(false);
  });

  test("a host-network pod cannot set net.* sysctls, a host-IPC pod no IPC ones", () => {
    const list = sysctlAllowlist(["kernel.msg*"]);
    expect(list.admit(pod([{ name: "net.ipv4.tcp_syncookies", value: "1" }], { hostNetwork: true }))).toEqual({
      admit: false,
      reason: "SysctlForbidden",
      message: 'forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net enabled',
    });
    expect(list.admit(pod([{ name: "kernel.msgmax", value: "1" }], { hostIPC: true })).admit).toBe(false);
    expect(list.admit(pod([{ name: "kernel.msgmax", value: "1" }], { hostNetwork: true })).admit).toBe(true);
  });

  test("a pattern that is not namespaced, or not a sysctl name, is a configuration error", () => {
    expect(() => sysctlAllowlist(["vm.swappiness"])).toThrow(SysctlConfigError);
    expect(() => sysctlAllowlist(["vm.swappiness"])).toThrow('the sysctls "vm.swappiness" are not known to be namespaced');
    expect(() => sysctlAllowlist(["Bad Name"])).toThrow(SysctlConfigError);
    expect(() => sysctlAllowlist(["*"])).toThrow(SysctlConfigError);
  });

  test("names: slashes become dots (dots inside a part become slashes); the sandbox gets the normalized map", () => {
    expect(normalizeSysctlName("net/ipv4/conf/eno2.100/rp_filter")).toBe("net.ipv4.conf.eno2/100.rp_filter");
    expect(normalizeSysctlName("net.ipv4.conf.eno2/100.rp_filter")).toBe("net.ipv4.conf.eno2/100.rp_filter");
    expect(sandboxSysctls(pod([{ name: "kernel/shm_rmid_forced", value: "1" }]))).toEqual({ "kernel.shm_rmid_forced": "1" });
  });
});
