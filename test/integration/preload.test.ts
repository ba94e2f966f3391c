// Air-gapped install: image tarballs in --image-preload-dir reach the
// runtime through containerd's own API before pods start. Two images that
// containerd has never seen (new layers over busybox's), one as an OCI
// layout and one as `docker save` output, and a broken tarball beside them;
// static pods run the imported images with imagePullPolicy Never.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { createCriClient } from "../../src/cri/client.ts";
import type { CriService } from "../../src/cri/index.ts";
import { MEDIA, planArchive } from "../../src/images/archive.ts";
import { containerdImageStore } from "../../src/images/containerd/client.ts";
import { createLogger, memoryLogger } from "../../src/util/log.ts";
import { eventually, startAgent, type AgentHandle } from "../harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../harness/containerd.ts";

let ctd: ContainerdHandle;
let agent: AgentHandle;
let cri: CriService;
let work: string;
const OCI_IMAGE = "localhost/preload/oci:1.0";
const DOCKER_IMAGE = "localhost/preload/docker:1.0";

const sha = (b: Uint8Array) => `sha256:${createHash("sha256").update(b).digest("hex")}`;
const tar = (out: string, dir: string, ...names: string[]) => {
  const r = Bun.spawnSync(["tar", "--format=gnu", "-cf", out, "-C", dir, ...names]);
  if (r.exitCode !== 0) throw new Error(r.stderr.toString());
};

/** busybox's config and layer, from the test image's OCI tarball. */
async function busyboxParts() {
  const plan = await planArchive(resolve(import.meta.dir, "../../.cache/images/busybox.tar"));
  const read = async (mediaPart: string) => {
    const blob = plan.blobs.find((b) => b.mediaType.includes(mediaPart))!;
    const parts: Uint8Array[] = [];
    for await (const c of blob.chunks()) parts.push(c);
    return new Uint8Array(Buffer.concat(parts));
  };
  return { config: JSON.parse(new TextDecoder().decode(await read("config"))), layer: await read("layer") };
}

/** A layer holding /preloaded.txt with `text`, as an uncompressed tar. */
function layerWith(text: string): Uint8Array {
  const dir = mkdtempSync(join(work, "layer-"));
  writeFileSync(join(dir, "preloaded.txt"), `${text}\n`);
  tar(join(dir, "..", `${dir.split("/").pop()}.tar`), dir, "preloaded.txt");
  return new Uint8Array(readFileSync(join(dir, "..", `${dir.split("/").pop()}.tar`)));
}

async function buildTarballs(dir: string) {
  const base = await busyboxParts();
  // OCI layout
  {
    const extra = layerWith("from an OCI layout");
    const config = new TextEncoder().encode(JSON.stringify({ ...base.config, rootfs: { type: "layers", diff_ids: [sha(base.layer), sha(extra)] } }));
    const layers = [base.layer, extra].map((l) => ({ mediaType: "application/vnd.oci.image.layer.v1.tar", digest: sha(l), size: l.length }));
    const manifest = new TextEncoder().encode(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: MEDIA.ociManifest,
        config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: sha(config), size: config.length },
        layers,
      }),
    );
    const src = mkdtempSync(join(work, "oci-"));
    mkdirSync(join(src, "blobs/sha256"), { recursive: true });
    for (const b of [base.layer, extra, config, manifest]) writeFileSync(join(src, "blobs/sha256", sha(b).slice(7)), b);
    writeFileSync(join(src, "oci-layout", ""), '{"imageLayoutVersion":"1.0.0"}');
    writeFileSync(
      join(src, "index.json"),
      JSON.stringify({
        schemaVersion: 2,
        manifests: [{ mediaType: MEDIA.ociManifest, digest: sha(manifest), size: manifest.length, annotations: { "io.containerd.image.name": OCI_IMAGE } }],
      }),
    );
    tar(join(dir, "oci.tar"), src, "oci-layout", "index.json", "blobs");
  }
  // docker save
  {
    const extra = layerWith("from docker save");
    const config = new TextEncoder().encode(JSON.stringify({ ...base.config, rootfs: { type: "layers", diff_ids: [sha(base.layer), sha(extra)] } }));
    const src = mkdtempSync(join(work, "docker-"));
    mkdirSync(join(src, "l1"));
    mkdirSync(join(src, "l2"));
    writeFileSync(join(src, "l1/layer.tar"), base.layer);
    writeFileSync(join(src, "l2/layer.tar"), extra);
    writeFileSync(join(src, `${sha(config).slice(7)}.json`), config);
    writeFileSync(join(src, "manifest.json"), JSON.stringify([{ Config: `${sha(config).slice(7)}.json`, RepoTags: [DOCKER_IMAGE], Layers: ["l1/layer.tar", "l2/layer.tar"] }]));
    tar(join(dir, "docker.tar"), src, "manifest.json", `${sha(config).slice(7)}.json`, "l1", "l2");
  }
  writeFileSync(join(dir, "broken.tar"), "this is not a tarball ".repeat(50));
}

const pod = (name: string, image: string) =>
  JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: { terminationGracePeriodSeconds: 1, containers: [{ name: "c", image, imagePullPolicy: "Never", command: ["sh", "-c", "cat /preloaded.txt; sleep 3600"] }] },
  });

const logOf = (name: string) => {
  const dir = readdirSync(agent.podLogsDir).find((d) => d.startsWith(`default_${name}-test-node_`));
  return dir ? readFileSync(join(agent.podLogsDir, dir, "c", "0.log"), "utf8") : "";
};

beforeAll(async () => {
  requireRoot();
  ctd = await startContainerd({ name: "preload" });
  cri = createCriClient({ endpoint: ctd.endpoint, logger: createLogger({ verbosity: 0 }) });
  work = mkdtempSync(join(ctd.dir, "work-"));
  const preloadDir = join(work, "images");
  mkdirSync(preloadDir);
  await buildTarballs(preloadDir);
  agent = await startAgent(ctd, { name: "preload", extraConfig: { imagePreloadDir: preloadDir } });
  writeFileSync(join(agent.manifests, "oci.json"), pod("oci", OCI_IMAGE));
  writeFileSync(join(agent.manifests, "docker.json"), pod("docker", DOCKER_IMAGE));
}, 120_000);

afterAll(async () => {
  await agent?.kill("SIGKILL");
  cri?.close();
  await ctd?.stop();
});

describe("image preload (air-gapped nodes)", () => {
  test("both formats are imported before pods start; pods run them with pullPolicy Never; the broken tarball is named", async () => {
    try {
      await eventually("both pods print their layer's file", () => logOf("oci").includes("from an OCI layout") && logOf("docker").includes("from docker save"), 60_000);
    } catch (e) {
      const states = (await agent.pods().catch(() => ({ items: [] }))).items.map((p) => `${p.metadata.name}: ${JSON.stringify(p.status.containerStatuses?.[0]?.state)}`);
      const preloadLines = agent
        .log()
        .split("\n")
        .filter((l) => l.includes("preload"));
      throw new Error(`${(e as Error).message}\n${states.join("\n")}\n${preloadLines.join("\n")}\n${agent.describe()}\n${ctd.describe()}`);
    }
    for (const image of [OCI_IMAGE, DOCKER_IMAGE]) {
      const status = await cri.imageStatus({ image, annotations: {}, userSpecifiedImage: image, runtimeHandler: "" });
      expect(status?.repoTags).toContain(image);
    }
    expect(agent.log()).toContain("could not preload an image tarball");
    expect(agent.log()).toContain("broken.tar");
  }, 90_000);

  test("a restart finds the images there and writes nothing again", async () => {
    await agent.kill("SIGTERM");
    const before = agent.log().length;
    agent.start();
    // The pass takes the tarballs one at a time in name order (broken, docker, oci): wait for each line itself.
    const preloadedLine = (tarball: string) =>
      agent
        .log()
        .slice(before)
        .split("\n")
        .find((l) => l.includes("preloaded images") && l.includes(tarball));
    await eventually("the preload pass after the restart", () => preloadedLine("oci.tar") !== undefined && preloadedLine("docker.tar") !== undefined, 30_000);
    expect(preloadedLine("oci.tar")).toContain(`imported=[] unchanged=["${OCI_IMAGE}"]`);
    expect(preloadedLine("docker.tar")).toContain(`imported=[] unchanged=["${DOCKER_IMAGE}"]`);
  }, 60_000);

  test("blobs of 1 byte to 5 MB, one after another on one connection, go into the content store on their first stream (Bun's HTTP/2 client stalled the 2 MB one)", async () => {
    const { logger, lines } = memoryLogger();
    const store = containerdImageStore(ctd.endpoint, { stallMs: 10_000, logger });
    try {
      // Checked under the lease: nothing references these blobs, and containerd's GC may take them once it ends.
      const started = Date.now();
      const committed = await store.withLease(async () => {
        const digests: string[] = [];
        for (const size of [1, 300_000, 2_000_000, 5_000_000, 65_536, 2_000_000, 300_000, 2_000_000]) {
          const bytes = new Uint8Array(randomBytes(size));
          digests.push(sha(bytes));
          const chunks = async function* () {
            for (let at = 0; at < size; at += 1 << 20) yield bytes.subarray(at, at + (1 << 20));
          };
          await store.writeBlob({ mediaType: "application/octet-stream", digest: sha(bytes), size, labels: {}, chunks });
        }
        return Promise.all(digests.map((d) => store.hasBlob(d)));
      });
      expect(lines.filter((l) => l.includes("stalled"))).toEqual([]);
      // 13 MB take well under a second; one stalled stream costs the whole stall period (10 s) before its retry.
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(committed).toEqual(Array(8).fill(true));
    } finally {
      store.close();
    }
  }, 90_000);
});
