/**
 * `/spec` on the kubelet API: the machine as cAdvisor's MachineInfo JSON
 * (github.com/google/cadvisor/info/v1), the subset this agent can read
 * without cAdvisor: CPU vendor, cores, physical cores, sockets and
 * frequency (/proc/cpuinfo, cpufreq), memory and swap (/proc/meminfo),
 * huge page pools (/sys/kernel/mm/hugepages), machine, system and boot
 * IDs. Field names are cAdvisor's JSON tags, so existing clients parse it.
 * Not included: filesystems, disk_map, network_devices, topology,
 * memory_by_type and nvm (cAdvisor's deeper hardware probing).
 */
import { readFileSync } from "node:fs";
import type { MachineInfo } from "./machine.ts";
import { readHugePagePools } from "../cgroups/hugepages.ts";

export interface CpuFacts {
  vendorId: string;
  logicalCores: number;
  physicalCores: number;
  sockets: number;
  /** From "cpu MHz", in kHz; 0 when absent. */
  frequencyKHz: number;
}

/** cAdvisor's GetMachineInfo CPU part: physical cores are distinct (physical id, core id) pairs, sockets distinct physical ids. */
export function parseCpuinfo(text: string): CpuFacts {
  let vendorId = "";
  let logicalCores = 0;
  let mhz = 0;
  let physical = "0";
  const cores = new Set<string>();
  const sockets = new Set<string>();
  for (const block of text.split(/\n\s*\n/)) {
    const fields = new Map<string, string>();
    for (const line of block.split("\n")) {
      const i = line.indexOf(":");
      if (i > 0) fields.set(line.slice(0, i).trim(), line.slice(i + 1).trim());
    }
    if (!fields.has("processor")) continue;
    logicalCores++;
    vendorId ||= fields.get("vendor_id") ?? "";
    mhz ||= Number(fields.get("cpu MHz") ?? 0) || 0;
    physical = fields.get("physical id") ?? "0";
    sockets.add(physical);
    cores.add(`${physical}/${fields.get("core id") ?? String(logicalCores - 1)}`);
  }
  return { vendorId, logicalCores, physicalCores: cores.size, sockets: sockets.size, frequencyKHz: Math.round(mhz * 1000) };
}

export function parseSwapTotal(meminfo: string): number {
  const m = /^SwapTotal:\s+(\d+)\s+kB/m.exec(meminfo);
  return m ? Number(m[1]) * 1024 : 0;
}

export interface MachineSpecInput {
  machine: MachineInfo;
  cpu: CpuFacts;
  /** cpufreq's cpuinfo_max_freq (kHz) when the kernel has it; cAdvisor prefers it to "cpu MHz". */
  maxFrequencyKHz?: number;
  swapBytes: number;
  hugePages: { page_size: number; num_pages: number }[];
  timestampMs: number;
}

/** The JSON body of `/spec`. */
export function machineSpec(input: MachineSpecInput): Record<string, unknown> {
  const { machine, cpu } = input;
  return {
    timestamp: new Date(input.timestampMs).toISOString(),
    vendor_id: cpu.vendorId,
    num_cores: machine.cpuCores || cpu.logicalCores,
    num_physical_cores: cpu.physicalCores,
    num_sockets: cpu.sockets,
    cpu_frequency_khz: input.maxFrequencyKHz || cpu.frequencyKHz,
    memory_capacity: machine.memoryBytes,
    swap_capacity: input.swapBytes,
    hugepages: input.hugePages,
    machine_id: machine.machineID,
    system_uuid: machine.systemUUID,
    boot_id: machine.bootID,
    cloud_provider: "Unknown",
    instance_type: "Unknown",
    instance_id: "None",
  };
}

const readOr = (path: string, fallback = ""): string => {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return fallback;
  }
};

/** Reads the host's facts for machineSpec; `sysRoot`/`procRoot` for tests. */
export function readMachineSpec(machine: MachineInfo, opts: { now: number; procRoot?: string; sysRoot?: string }): Record<string, unknown> {
  const proc = opts.procRoot ?? "/proc";
  const sys = opts.sysRoot ?? "/sys";
  // Read at each request, as cAdvisor's MachineInfo: the pools as they are now.
  const hugePages = readHugePagePools(sys).map((p) => ({ page_size: p.pageSizeKiB, num_pages: p.numPages }));
  const maxFrequencyKHz = Number(readOr(`${sys}/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq`).trim()) || 0;
  return machineSpec({
    machine,
    cpu: parseCpuinfo(readOr(`${proc}/cpuinfo`)),
    ...(maxFrequencyKHz ? { maxFrequencyKHz } : {}),
    swapBytes: parseSwapTotal(readOr(`${proc}/meminfo`)),
    hugePages,
    timestampMs: opts.now,
  });
}

/** The host's machine spec, read at each request (`/spec/`, cAdvisor's machine metrics). */
export class HostMachineSpec {
  constructor(
    private readonly machine: MachineInfo,
    private readonly clock: { now(): number },
  ) {}

  spec(): Record<string, unknown> {
    return readMachineSpec(this.machine, { now: this.clock.now() });
  }
}
