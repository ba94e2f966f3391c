/**
 * Facts about this machine for the Node object, read from procfs, sysfs
 * and statfs (upstream gets them from cAdvisor). Read once at start; the
 * caller decides when to read again.
 */
import { readFileSync, statfsSync } from "node:fs";
import { arch, cpus, hostname, networkInterfaces, release } from "node:os";
import { parseDefaultRouteInterface } from "../stats/procfs.ts";
import { readHugePagePools, type HugePagePool } from "../cgroups/hugepages.ts";

export interface MachineInfo {
  machineID: string;
  systemUUID: string;
  bootID: string;
  kernelVersion: string;
  osImage: string;
  architecture: string;
  cpuCores: number;
  memoryBytes: number;
  ephemeralStorageBytes: number;
  hostname: string;
  /** The huge page pools (/sys/kernel/mm/hugepages), smallest page first: the node's hugepages-<size> resources. */
  hugePages: HugePagePool[];
}

const read = (path: string): string => {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return "";
  }
};

/** Go's GOARCH names, which Kubernetes uses for kubernetes.io/arch. */
export function goArch(nodeArch = arch()): string {
  return ({ x64: "amd64", arm64: "arm64", arm: "arm", ppc64: "ppc64le", s390x: "s390x", riscv64: "riscv64" } as Record<string, string>)[nodeArch] ?? nodeArch;
}

export function parseMeminfoTotal(text: string): number {
  const m = /^MemTotal:\s+(\d+)\s+kB/m.exec(text);
  return m ? Number(m[1]) * 1024 : 0;
}

export function parseOsRelease(text: string): string {
  const m = /^PRETTY_NAME="?([^"\n]*)"?/m.exec(text);
  return m?.[1] ?? "Linux";
}

export function readMachineInfo(opts: { rootDir: string; procRoot?: string; sysRoot?: string }): MachineInfo {
  const proc = opts.procRoot ?? "/proc";
  let ephemeralStorageBytes = 0;
  try {
    const fs = statfsSync(opts.rootDir);
    ephemeralStorageBytes = Number(fs.blocks) * Number(fs.bsize);
  } catch {
    const fs = statfsSync("/");
    ephemeralStorageBytes = Number(fs.blocks) * Number(fs.bsize);
  }
  return {
    machineID: read("/etc/machine-id") || read("/var/lib/dbus/machine-id"),
    systemUUID: read("/sys/class/dmi/id/product_uuid").toLowerCase(),
    bootID: read(`${proc}/sys/kernel/random/boot_id`),
    kernelVersion: release(),
    osImage: parseOsRelease(read("/etc/os-release")),
    architecture: goArch(),
    cpuCores: cpus().length,
    memoryBytes: parseMeminfoTotal(read(`${proc}/meminfo`)),
    ephemeralStorageBytes,
    hostname: hostname(),
    hugePages: readHugePagePools(opts.sysRoot ?? "/sys"),
  };
}

/**
 * The IPv4 address of the interface holding the default route (upstream
 * picks the node IP the same way when --node-ip is not given).
 */
export function defaultRouteIPv4(routeTable = read("/proc/net/route"), interfaces = networkInterfaces()): string | undefined {
  const iface = parseDefaultRouteInterface(routeTable);
  const onRoute = iface ? interfaces[iface]?.find((a) => a.family === "IPv4" && !a.internal) : undefined;
  if (onRoute) return onRoute.address;
  for (const addrs of Object.values(interfaces)) {
    const addr = addrs?.find((a) => a.family === "IPv4" && !a.internal);
    if (addr) return addr.address;
  }
  return undefined;
}
