// Image garbage collection and container log rotation on a real containerd
// (test/harness/containerd.ts): what is removed, what is kept, and that the
// runtime keeps writing whole CRI log lines across rotations.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { createCriClient } from "../../src/cri/client.ts";
import { NamespaceMode, type CriService, type In, type PodSandboxConfig } from "../../src/cri/index.ts";
import { createImageGC, statfsBytes } from "../../src/images/gc.ts";
import { createLogRotation } from "../../src/logs/rotation.ts";
import { FakeClock, realClock } from "../../src/util/clock.ts";
import { memoryLogger } from "../../src/util/log.ts";
import { eventually } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

let ctd: ContainerdHandle;
let cri: CriService;
const sandboxes: string[] = [];

beforeAll(async () => {
  requireRoot();
  ctd = await startContainerd({ name: "imglogs" });
  cri = createCriClient({ endpoint: ctd.endpoint, requestTimeoutMs: 20_000, logger: memoryLogger().logger });
}, 60_000);

afterAll(async () => {
  for (const id of sandboxes) await cri?.removePodSandbox(id).catch(() => {});
  cri?.close();
  await ctd?.stop();
});

async function run(cmd: string[]): Promise<string> {
  const proc = Bun.spawn(cmd, { stdout: "pipe", stderr: "pipe" });
  const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  if (code !== 0) throw new Error(`${cmd.join(" ")} exited ${code}: ${err}`);
  return out;
}

const ctr = (...args: string[]) => run([ctd.ctr, "-a", ctd.socket, "-n", "k8s.io", ...args]);

/**
 * Imports a one-file OCI image named `name`: its own layer and config, so
 * its own image id (a `ctr images tag` of an existing image would share
 * that image's id, and to the CRI be the same image).
 */
async function importImage(name: string, content: string): Promise<void> {
  const work = join(ctd.dir, `image-${createHash("sha256").update(name).digest("hex").slice(0, 8)}`);
  const blobs = join(work, "layout/blobs/sha256");
  mkdirSync(join(work, "rootfs"), { recursive: true });
  mkdirSync(blobs, { recursive: true });
  writeFileSync(join(work, "rootfs/hello.txt"), content);
  await run(["tar", "--mtime=@0", "--owner=0", "--group=0", "--numeric-owner", "-cf", join(work, "layer.tar"), "-C", join(work, "rootfs"), "hello.txt"]);
  const blob = (data: Uint8Array | string) => {
    const digest = createHash("sha256").update(data).digest("hex");
    writeFileSync(join(blobs, digest), data);
    return { digest: `sha256:${digest}`, size: typeof data === "string" ? Buffer.byteLength(data) : data.length };
  };
  const arch = process.arch === "arm64" ? "arm64" : "amd64";
  const layer = blob(readFileSync(join(work, "layer.tar")));
  const config = blob(JSON.stringify({ architecture: arch, os: "linux", config: { Cmd: ["/hello.txt"] }, rootfs: { type: "layers", diff_ids: [layer.digest] } }));
  const manifest = blob(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
      layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", ...layer }],
    }),
  );
  writeFileSync(join(work, "layout/oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  writeFileSync(
    join(work, "layout/index.json"),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [
        { mediaType: "application/vnd.oci.image.manifest.v1+json", ...manifest, platform: { architecture: arch, os: "linux" }, annotations: { "io.containerd.image.name": name } },
      ],
    }),
  );
  await run(["tar", "-cf", join(work, "image.tar"), "-C", join(work, "layout"), "oci-layout", "index.json", "blobs"]);
  await ctr("images", "import", join(work, "image.tar"));
  // containerd 2.x's CRI learns of an imported image from containerd's image event, a moment after ctr returns
  // (seen once under load: the image was not listed yet).
  await eventually(`${name} listed by the CRI after its import`, () => tagged(name), 10_000, 50);
}

/** A sandbox with one busybox container running `script`; its log goes to `<logDirectory>/<name>/0.log`. */
async function runBusybox(name: string, script: string): Promise<{ containerId: string; logPath: string }> {
  const logDirectory = join(ctd.dir, "pod-logs", name);
  mkdirSync(join(logDirectory, name), { recursive: true });
  const config: In<PodSandboxConfig> = {
    metadata: { name, namespace: "images-logs", uid: `uid-${name}`, attempt: 0 },
    logDirectory,
    linux: { cgroupParent: `${ctd.cgroupParent}/${name}`, securityContext: { namespaceOptions: { network: NamespaceMode.NODE } } },
  };
  const sandboxId = await cri.runPodSandbox(config);
  sandboxes.push(sandboxId);
  const containerId = await cri.createContainer(
    sandboxId,
    { metadata: { name }, image: { image: ctd.busyboxImage }, command: ["sh", "-c", script], logPath: `${name}/0.log` },
    config,
  );
  await cri.startContainer(containerId);
  const logPath = (await cri.containerStatus(containerId)).status!.logPath;
  return { containerId, logPath };
}

const tagged = async (ref: string) => (await cri.listImages()).find((i) => i.repoTags.includes(ref));

describe("image GC on containerd", () => {
  const EXTRA = "localhost/bunlet/extra:1";
  const EXTRA2 = "localhost/bunlet/extra:2";
  const ALIAS = "localhost/bunlet/busybox-alias:1";
  const clock = new FakeClock(Date.now());
  const statfsPaths: string[] = [];
  // A virtual disk sized so that the images present fill it past the
  // thresholds (high = low = 50%) and removing the unused image is exactly
  // what brings it back: the real image filesystem is far too big for a
  // test to fill. The mountpoint is still statfs'd for real.
  let capacityBytes = 0;
  const statfs = (path: string) => {
    statfsPaths.push(path);
    expect(statfsBytes(path).capacityBytes).toBeGreaterThan(0);
    return { capacityBytes, availableBytes: capacityBytes - imagesBytes };
  };
  let imagesBytes = 0;
  const measure = async () => {
    imagesBytes = (await cri.listImages()).reduce((s, i) => s + Number(i.size), 0);
  };
  let busyboxId = "";

  beforeAll(async () => {
    await importImage(EXTRA, "unused image\n");
    await ctr("images", "tag", ctd.busyboxImage, ALIAS);
    await runBusybox("gc-user", "sleep 3600");
    busyboxId = (await tagged(ctd.busyboxImage))!.id;
  }, 60_000);

  test("a tag of an image is the same image to the CRI (so tagging cannot make an unused copy)", async () => {
    const alias = await tagged(ALIAS);
    expect(alias?.id).toBe(busyboxId);
    expect(alias?.repoTags.sort()).toEqual([ALIAS, ctd.busyboxImage].sort());
  });

  test("garbageCollect removes the unused image only: not the image in use (nor its other tag), not the pause image; young images wait", async () => {
    const gc = createImageGC({
      cri,
      highThresholdPercent: 50,
      lowThresholdPercent: 50,
      minimumAgeMs: 2 * 60_000,
      pauseImage: ctd.pauseImage,
      statfs,
      clock,
      logger: memoryLogger().logger,
    });
    const extra = (await tagged(EXTRA))!;
    await measure();
    capacityBytes = 2 * imagesBytes - Number(extra.size);

    await gc.detectImages();
    // Everything was first seen just now: too young. (Not `expect(p).rejects`:
    // on Bun 1.4.5 it stalls the gRPC socket's I/O until the call's deadline.)
    const young = await gc.garbageCollect().then(
      () => undefined,
      (e: Error) => e,
    );
    expect(young?.message).toMatch(/only found 0 bytes eligible/);
    expect(await tagged(EXTRA)).toBeDefined();

    clock.advance(2 * 60_000);
    await gc.garbageCollect();
    expect(await tagged(EXTRA)).toBeUndefined();
    expect((await tagged(ctd.busyboxImage))?.id).toBe(busyboxId);
    expect((await tagged(ALIAS))?.id).toBe(busyboxId);
    expect(await tagged(ctd.pauseImage)).toBeDefined();
    const fsInfo = await cri.imageFsInfo();
    expect(statfsPaths.length).toBeGreaterThan(0);
    expect(statfsPaths.every((p) => p === fsInfo.imageFilesystems[0]?.fsId?.mountpoint)).toBe(true);
    await gc[Symbol.asyncDispose]();
  }, 30_000);

  test("freeSpace (eviction) removes every eligible image and reports its size; in-use and pause images stay", async () => {
    await importImage(EXTRA2, "another unused image\n");
    const extra2 = (await tagged(EXTRA2))!;
    const gc = createImageGC({
      cri,
      highThresholdPercent: 85,
      lowThresholdPercent: 80,
      minimumAgeMs: 0,
      pauseImage: ctd.pauseImage,
      statfs: statfsBytes,
      clock,
      logger: memoryLogger().logger,
    });
    clock.advance(1);
    expect(await gc.freeSpace(Infinity)).toBe(Number(extra2.size));
    const left = (await cri.listImages()).flatMap((i) => i.repoTags).sort();
    expect(left).toEqual([ALIAS, ctd.busyboxImage, ctd.pauseImage].sort());
  }, 30_000);
});

describe("log rotation on containerd", () => {
  test("rotations keep ≤ maxFiles files, gzip all but the newest rotated, and the runtime keeps writing whole lines", async () => {
    const { containerId, logPath } = await runBusybox("chatty", "i=0; while true; do echo line $i; i=$((i+1)); usleep 200; done");
    let reopens = 0;
    const rotation = createLogRotation({
      cri: {
        listContainers: (f) => cri.listContainers(f),
        containerStatus: (id) => cri.containerStatus(id),
        reopenContainerLog: async (id) => {
          await cri.reopenContainerLog(id);
          if (id === containerId) reopens++;
        },
      },
      maxSizeBytes: 64 * 1024,
      maxFiles: 3,
      clock: realClock,
      logger: memoryLogger().logger,
    });
    const dir = join(logPath, "..");
    const files = () => readdirSync(dir).sort();
    const until = Date.now() + 30_000;
    // Rotated names have one-second resolution: at most one rotation a second.
    while (reopens < 4 && Date.now() < until) {
      await rotation.rotateAll();
      const now = files();
      expect(now.length).toBeLessThanOrEqual(3);
      await Bun.sleep(250);
    }
    expect(reopens).toBeGreaterThanOrEqual(4);

    // The runtime writes to the new file after the reopen.
    const size = statSync(logPath).size;
    await Bun.sleep(500);
    expect(statSync(logPath).size).toBeGreaterThan(size);

    await cri.stopContainer(containerId, 0);
    const names = files();
    expect(names.length).toBe(3);
    const [oldest, newest, current] = names.sort((a, b) => (a === "0.log" ? 1 : b === "0.log" ? -1 : a.localeCompare(b)));
    expect(current).toBe("0.log");
    expect(oldest).toMatch(/^0\.log\.\d{8}-\d{6}\.gz$/);
    expect(newest).toMatch(/^0\.log\.\d{8}-\d{6}$/);

    // Every line whole, in CRI format, numbered without a gap across both
    // rotation boundaries.
    const text = [gunzipSync(readFileSync(join(dir, oldest!))).toString(), readFileSync(join(dir, newest!), "utf8"), readFileSync(logPath, "utf8")];
    for (const t of text) expect(t.endsWith("\n")).toBe(true);
    const lines = text.join("").split("\n").slice(0, -1);
    const numbers = lines.map((l) => {
      const m = l.match(/^\d{4}-\d\d-\d\dT\S+ stdout F line (\d+)$/);
      if (!m) throw new Error(`malformed CRI log line: ${JSON.stringify(l)}`);
      return Number(m[1]);
    });
    expect(numbers.length).toBeGreaterThan(1000);
    const gaps = numbers.flatMap((n, i) => (i > 0 && n !== numbers[i - 1]! + 1 ? [[numbers[i - 1], n]] : []));
    expect(gaps).toEqual([]);
    expect(existsSync(logPath)).toBe(true);
    await rotation[Symbol.asyncDispose]();
  }, 60_000);
});
