// The real-runtime harness itself: a private containerd starts, has both
// test images, runs a container inside the test's cgroup, survives a
// restart with its containers, and purges without leftovers.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { BUSYBOX_IMAGE, PAUSE_IMAGE, type ContainerdHandle, ownCgroup, requireRoot, runtimeUnderTest, startContainerd } from "../harness/containerd.ts";
import { startTogether } from "../harness/together.ts";

async function ctr(h: ContainerdHandle, ...args: string[]): Promise<string> {
  const proc = Bun.spawn([h.ctr, "-a", h.socket, "-n", "k8s.io", ...args], { stdout: "pipe", stderr: "pipe" });
  const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  if (code !== 0) throw new Error(`ctr ${args.join(" ")} exited ${code}: ${err}`);
  return out;
}

function networkOf(h: ContainerdHandle): Record<string, string> {
  const env = readFileSync(`${h.dir}/network.env`, "utf8");
  return Object.fromEntries(
    env
      .trim()
      .split("\n")
      .map((l) => l.split("=") as [string, string]),
  );
}

describe("containerd harness", () => {
  let a: ContainerdHandle;
  let b: ContainerdHandle;

  beforeAll(async () => {
    requireRoot();
    // Two at once: tests in parallel files each get their own instance.
    [a, b] = await startTogether([startContainerd({ name: "ha" }), startContainerd({ name: "hb" })]);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  test("both images are imported and instances do not share anything", async () => {
    const refs = (await ctr(a, "images", "ls", "-q")).trim().split("\n");
    expect(refs).toContain(PAUSE_IMAGE);
    expect(refs).toContain(BUSYBOX_IMAGE);
    expect(a.endpoint).toBe(`unix://${a.socket}`);
    expect(a.socket).not.toBe(b.socket);
    const [na, nb] = [networkOf(a), networkOf(b)];
    expect(na.CNI_BRIDGE).not.toBe(nb.CNI_BRIDGE);
    expect(na.CNI_SUBNET).not.toBe(nb.CNI_SUBNET);
    expect(a.cgroupParent.startsWith(`${ownCgroup()}/`)).toBe(true);
  });

  test("the instance runs the runtime BUNLET_RUNTIME names, and its ctr is that runtime's own", async () => {
    expect(a.runtime).toBe(runtimeUnderTest());
    // `ctr version`: the client's version, then the server's (containerd's).
    const [client, server] = [...(await ctr(a, "version")).matchAll(/^\s*Version:\s*(\S+)/gm)].map((m) => m[1]);
    expect(server).toMatch(a.runtime === "containerd2" ? /^v?2\./ : /^v?1\.6\./);
    expect(client).toBe(server);
  });

  test("runs a busybox container under the test's cgroup", async () => {
    const out = await ctr(a, "run", "--rm", "--cgroup", `${a.cgroupParent}/t1`, BUSYBOX_IMAGE, "t1", "sh", "-c", "echo hi; grep memory /proc/self/cgroup");
    expect(out).toContain("hi\n");
    expect(out).toContain(`memory:${a.cgroupParent}/t1`);
  });

  test("the pause image's program answers -v", async () => {
    const out = await ctr(a, "run", "--rm", "--cgroup", `${a.cgroupParent}/p1`, PAUSE_IMAGE, "p1", "/pause", "-v");
    expect(out).toBe("bunlet-pause 1.0\n");
  });

  test("containers survive a containerd restart; stop purges them", async () => {
    await ctr(b, "run", "-d", "--cgroup", `${b.cgroupParent}/long`, BUSYBOX_IMAGE, "long", "sleep", "1000");
    const before = await ctr(b, "tasks", "ls");
    const pid = Number(before.match(/^long\s+(\d+)\s+RUNNING/m)?.[1]);
    expect(pid).toBeGreaterThan(0);

    await b.restart();
    expect(await ctr(b, "tasks", "ls")).toMatch(new RegExp(`^long\\s+${pid}\\s+RUNNING`, "m"));

    const { CNI_BRIDGE } = networkOf(b);
    await b.stop();
    expect(existsSync(b.dir)).toBe(false);
    expect(existsSync(`/proc/${pid}/stat`) && !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ")).toBe(false);
    expect(readFileSync("/proc/self/mountinfo", "utf8")).not.toContain(b.dir);
    expect(Bun.spawnSync(["ip", "link", "show", CNI_BRIDGE!]).exitCode).not.toBe(0);
    await b.stop(); // idempotent
  });
});
