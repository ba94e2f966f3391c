// The runtime's cgroup driver over CRI, through the real gRPC client and
// server (FakeCri behind serveCri), then the choice against the config.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CgroupDriverMismatchError, chooseCgroupDriver } from "../cgroups/index.ts";
import { createCriClient } from "../cri/client.ts";
import { FakeCri } from "../cri/fake.ts";
import { serveCri, type CriGrpcServer } from "../cri/grpc-server.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { runtimeCgroupDriver } from "./cgroup-driver.ts";

let dir: string | undefined;
let server: CriGrpcServer | undefined;
afterEach(async () => {
  server?.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
  server = undefined;
  dir = undefined;
});

async function ask(driver: "cgroupfs" | "systemd" | "unimplemented") {
  dir = mkdtempSync(join(tmpdir(), "cgdriver-"));
  const sock = join(dir, "cri.sock");
  server = await serveCri(new FakeCri({ clock: new FakeClock(), cgroupDriver: driver }), sock);
  const client = createCriClient({ endpoint: `unix://${sock}`, requestTimeoutMs: 5000, logger: memoryLogger().logger });
  try {
    return await runtimeCgroupDriver(client);
  } finally {
    client.close();
  }
}

describe("RuntimeConfig over the wire", () => {
  test("a runtime on systemd says so", async () => {
    expect(await ask("systemd")).toEqual({ kind: "driver", driver: "systemd" });
  });

  test("a runtime on cgroupfs says so", async () => {
    expect(await ask("cgroupfs")).toEqual({ kind: "driver", driver: "cgroupfs" });
  });

  test("containerd 1.6 answers Unimplemented: the config decides", async () => {
    const answer = await ask("unimplemented");
    expect(answer).toEqual({ kind: "unimplemented" });
    expect(chooseCgroupDriver({ configured: "systemd", explicit: true, runtime: answer }).driver).toBe("systemd");
  });

  test("the runtime's systemd against a config file's cgroupfs: the startup error naming both", async () => {
    const answer = await ask("systemd");
    expect(() => chooseCgroupDriver({ configured: "cgroupfs", explicit: true, runtime: answer })).toThrow(CgroupDriverMismatchError);
  });
});
