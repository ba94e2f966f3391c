import { describe, expect, test } from "bun:test";
import { CgroupDriverMismatchError, chooseCgroupDriver } from "./driver.ts";

describe("the cgroup driver: the runtime's where it answers, the config's where it does not", () => {
  test("the runtime answers: its driver is used when the config did not choose one", () => {
    expect(chooseCgroupDriver({ configured: "cgroupfs", explicit: false, runtime: { kind: "driver", driver: "systemd" } })).toEqual({ driver: "systemd", source: "runtime" });
  });

  test("the runtime answers the same as the config", () => {
    expect(chooseCgroupDriver({ configured: "systemd", explicit: true, runtime: { kind: "driver", driver: "systemd" } })).toEqual({ driver: "systemd", source: "runtime" });
  });

  test("the config chose another driver: an error naming both", () => {
    const run = () => chooseCgroupDriver({ configured: "cgroupfs", explicit: true, runtime: { kind: "driver", driver: "systemd" } });
    expect(run).toThrow(CgroupDriverMismatchError);
    expect(run).toThrow(/cgroupDriver is "cgroupfs" .* runtime reports cgroup driver "systemd"/);
  });

  test("Unimplemented (containerd 1.6): the config decides", () => {
    expect(chooseCgroupDriver({ configured: "systemd", explicit: true, runtime: { kind: "unimplemented" } })).toEqual({ driver: "systemd", source: "config" });
    expect(chooseCgroupDriver({ configured: "cgroupfs", explicit: false, runtime: { kind: "unimplemented" } })).toEqual({ driver: "cgroupfs", source: "config" });
  });
});
