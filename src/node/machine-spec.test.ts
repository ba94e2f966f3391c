import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Hono } from "hono";
import { LocalStatusStore } from "../status/index.ts";
import { readOnlyApp } from "../server/readonly.ts";
import type { MachineInfo } from "./machine.ts";
import { parseCpuinfo, parseSwapTotal, readMachineSpec } from "./machine-spec.ts";

const cpu = (processor: number, physical: number, core: number) =>
  `processor\t: ${processor}\nvendor_id\t: GenuineIntel\ncpu MHz\t\t: 2596.122\nphysical id\t: ${physical}\ncore id\t\t: ${core}\n`;
const machine: MachineInfo = {
  machineID: "m-id",
  systemUUID: "s-uuid",
  bootID: "b-id",
  kernelVersion: "6.1.0",
  osImage: "Debian",
  architecture: "amd64",
  cpuCores: 4,
  memoryBytes: 8 * 1024 ** 3,
  ephemeralStorageBytes: 0,
  hostname: "h",
  hugePages: [],
};

describe("/spec (cAdvisor MachineInfo)", () => {
  test("cpuinfo: logical cores, physical cores as (socket, core) pairs, sockets, vendor, frequency in kHz", () => {
    // Two sockets of one core each with two hyperthreads.
    const text = [cpu(0, 0, 0), cpu(1, 0, 0), cpu(2, 1, 0), cpu(3, 1, 0)].join("\n");
    expect(parseCpuinfo(text)).toEqual({ vendorId: "GenuineIntel", logicalCores: 4, physicalCores: 2, sockets: 2, frequencyKHz: 2596122 });
    expect(parseSwapTotal("MemTotal: 1 kB\nSwapTotal:  2048 kB\n")).toBe(2 * 1024 * 1024);
  });

  test("read from proc and sys roots; served with cAdvisor's JSON names on the read-only port", async () => {
    const root = mkdtempSync(join(tmpdir(), "spec-"));
    try {
      mkdirSync(join(root, "proc"));
      writeFileSync(join(root, "proc/cpuinfo"), [cpu(0, 0, 0), cpu(1, 0, 1)].join("\n"));
      writeFileSync(join(root, "proc/meminfo"), "MemTotal: 8388608 kB\nSwapTotal: 0 kB\n");
      for (const [size, n] of [
        ["2048", "16"],
        ["1048576", "0"],
      ]) {
        mkdirSync(join(root, `sys/kernel/mm/hugepages/hugepages-${size}kB`), { recursive: true });
        writeFileSync(join(root, `sys/kernel/mm/hugepages/hugepages-${size}kB/nr_hugepages`), `${n}\n`);
      }
      mkdirSync(join(root, "sys/devices/system/cpu/cpu0/cpufreq"), { recursive: true });
      writeFileSync(join(root, "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"), "3000000\n");
      const spec = readMachineSpec(machine, { now: Date.UTC(2026, 0, 1), procRoot: join(root, "proc"), sysRoot: join(root, "sys") });
      expect(spec).toEqual({
        timestamp: "2026-01-01T00:00:00.000Z",
        vendor_id: "GenuineIntel",
        num_cores: 4,
        num_physical_cores: 2,
        num_sockets: 1,
        cpu_frequency_khz: 3000000,
        memory_capacity: 8 * 1024 ** 3,
        swap_capacity: 0,
        hugepages: [
          { page_size: 2048, num_pages: 16 },
          { page_size: 1048576, num_pages: 0 },
        ],
        machine_id: "m-id",
        system_uuid: "s-uuid",
        boot_id: "b-id",
        cloud_provider: "Unknown",
        instance_type: "Unknown",
        instance_id: "None",
      });
      const app = readOnlyApp({ statuses: new LocalStatusStore(), health: new Hono(), spec: { spec: () => spec } });
      for (const path of ["/spec", "/spec/"]) {
        const res = await app.request(path);
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual(spec);
      }
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
