import { expect, test } from "bun:test";
import { ScrapedMetrics } from "./endpoints.ts";

test("each endpoint renders what it names at the scrape: the kubelet registry then the volume stats of the last summary, the probe registry, cAdvisor's view with the machine and the clock", async () => {
  const asked: string[] = [];
  const m = new ScrapedMetrics({
    kubelet: { render: () => "kubelet_x 1\n" },
    probes: { render: () => "prober_probe_total 2\n" },
    stats: {
      summary: async () => {
        throw new Error("no summary yet");
      },
      latest: () => undefined,
      cadvisor: async ({ sandboxImage }) => (asked.push(`cadvisor ${sandboxImage}`), { containers: [] }) as never,
    },
    sandboxImage: "pause:3.10",
    machine: { spec: () => (asked.push("spec"), { num_cores: 2, memory_capacity: 1024 }) },
    version: { kernelVersion: "6.1", osImage: "Debian" },
    clock: { now: () => 1_700_000_000_000 },
  });
  expect(m.kubelet()).toBe("kubelet_x 1\n");
  expect(m.probes()).toBe("prober_probe_total 2\n");
  expect(await m.resource()).toContain("scrape_error 1");
  const cadvisor = await m.cadvisor();
  expect(asked).toEqual(["cadvisor pause:3.10", "spec"]);
  expect(cadvisor).toContain('machine_cpu_cores{boot_id="",machine_id="",system_uuid=""} 2');
});
