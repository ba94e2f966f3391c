import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { MEDIA, normalizeImageName, planArchive } from "./archive.ts";
import type { ImageStore, ImportDescriptor } from "./containerd/client.ts";
import { awaitImagesListed, preloadImages } from "./preload.ts";
import { readTarIndex } from "./tar.ts";

const sha = (b: Uint8Array | string) => `sha256:${createHash("sha256").update(b).digest("hex")}`;
const enc = (s: string) => new TextEncoder().encode(s);

/** Writes a tar with `tar` itself, so the reader is checked against the real format (incl. long names). */
function makeTar(files: Record<string, Uint8Array | string>, opts: { format?: "gnu" | "pax" } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "tarsrc-"));
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(join(dir, name, ".."), { recursive: true });
    writeFileSync(join(dir, name), content);
  }
  const out = join(mkdtempSync(join(tmpdir(), "tar-")), "image.tar");
  const r = Bun.spawnSync(["tar", `--format=${opts.format ?? "gnu"}`, "-cf", out, "-C", dir, ...Object.keys(files)]);
  if (r.exitCode !== 0) throw new Error(r.stderr.toString());
  return out;
}

function ociImage(name: string) {
  const layer = enc("layer bytes ".repeat(100));
  const config = enc(JSON.stringify({ architecture: "amd64", os: "linux", rootfs: { type: "layers", diff_ids: [sha(layer)] } }));
  const manifest = enc(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MEDIA.ociManifest,
      config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: sha(config), size: config.length },
      layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", digest: sha(layer), size: layer.length }],
    }),
  );
  const index = {
    schemaVersion: 2,
    manifests: [{ mediaType: MEDIA.ociManifest, digest: sha(manifest), size: manifest.length, annotations: { "io.containerd.image.name": name } }],
  };
  const blob = (b: Uint8Array) => [`blobs/sha256/${sha(b).slice(7)}`, b] as const;
  return {
    layer,
    config,
    manifest,
    files: Object.fromEntries([["oci-layout", '{"imageLayoutVersion":"1.0.0"}'], ["index.json", JSON.stringify(index)], blob(layer), blob(config), blob(manifest)]),
  };
}

class FakeStore implements ImageStore {
  blobs = new Map<string, { bytes: Uint8Array; labels: Record<string, string> }>();
  images = new Map<string, ImportDescriptor>();
  leases = 0;
  async imageTarget(name: string) {
    return this.images.get(name);
  }
  async hasBlob(digest: string) {
    return this.blobs.has(digest);
  }
  async writeBlob(blob: ImportDescriptor & { labels: Record<string, string>; chunks(): AsyncIterable<Uint8Array> }) {
    const parts: Uint8Array[] = [];
    for await (const c of blob.chunks()) parts.push(c);
    const bytes = new Uint8Array(Buffer.concat(parts));
    if (sha(bytes) !== blob.digest || bytes.length !== blob.size) throw new Error(`digest mismatch for ${blob.digest}`);
    this.blobs.set(blob.digest, { bytes, labels: { ...blob.labels } });
  }
  async addLabels(digest: string, labels: Record<string, string>) {
    Object.assign(this.blobs.get(digest)!.labels, labels);
  }
  async putImage(name: string, target: ImportDescriptor) {
    this.images.set(name, target);
  }
  async withLease<T>(fn: () => Promise<T>) {
    this.leases++;
    return fn();
  }
  close() {}
}

describe("tar index", () => {
  test("offsets and sizes of every file, long names (GNU and PAX) included", () => {
    const long = `blobs/sha256/${"a".repeat(120)}`;
    for (const format of ["gnu", "pax"] as const) {
      const file = makeTar({ "index.json": "{}", [long]: "x".repeat(1000) }, { format });
      const entries = readTarIndex(file).filter((e) => e.type === "file");
      expect(entries.map((e) => [e.name, e.size])).toEqual([
        ["index.json", 2],
        [long, 1000],
      ]);
    }
  });

  test("a file that is not a tar, or is cut short, is an error saying so", () => {
    const dir = mkdtempSync(join(tmpdir(), "bad-"));
    writeFileSync(join(dir, "junk.tar"), "x".repeat(2048));
    expect(() => readTarIndex(join(dir, "junk.tar"))).toThrow("bad header checksum at byte 0");
    const good = readFileSync(makeTar({ "big.bin": "y".repeat(5000) }));
    writeFileSync(join(dir, "cut.tar"), good.subarray(0, 2048));
    expect(() => readTarIndex(join(dir, "cut.tar"))).toThrow("truncated entry big.bin");
  });
});

describe("archive plans", () => {
  test("OCI layout: blobs children-first with containerd's GC labels on the manifest; the image named from index.json", async () => {
    const img = ociImage("localhost/app:1.0");
    const plan = await planArchive(makeTar(img.files));
    expect(plan.format).toBe("oci");
    expect(plan.images).toEqual([{ name: "localhost/app:1.0", target: { mediaType: MEDIA.ociManifest, digest: sha(img.manifest), size: img.manifest.length } }]);
    expect(plan.blobs.map((b) => b.digest)).toEqual([sha(img.config), sha(img.layer), sha(img.manifest)]);
    expect(plan.blobs[2]!.labels).toEqual({ "containerd.io/gc.ref.content.config": sha(img.config), "containerd.io/gc.ref.content.l.0": sha(img.layer) });
  });

  test("docker save: a schema 2 manifest is made from manifest.json; names normalized as docker does", async () => {
    const layer = enc("docker layer");
    const config = enc('{"rootfs":{"type":"layers","diff_ids":[]}}');
    const file = makeTar({
      "manifest.json": JSON.stringify([{ Config: "cfg.json", RepoTags: ["busybox:1.36", "me/app"], Layers: ["abc/layer.tar"] }]),
      "cfg.json": config,
      "abc/layer.tar": layer,
    });
    const plan = await planArchive(file);
    expect(plan.images.map((i) => i.name)).toEqual(["docker.io/library/busybox:1.36", "docker.io/me/app:latest"]);
    const manifest = plan.blobs.at(-1)!;
    const parts: Uint8Array[] = [];
    for await (const c of manifest.chunks()) parts.push(c);
    expect(JSON.parse(Buffer.concat(parts).toString())).toEqual({
      schemaVersion: 2,
      mediaType: MEDIA.dockerManifest,
      config: { mediaType: MEDIA.dockerConfig, size: config.length, digest: sha(config) },
      layers: [{ mediaType: MEDIA.dockerLayer, digest: sha(layer), size: layer.length }],
    });
    expect(manifest.labels["containerd.io/gc.ref.content.l.0"]).toBe(sha(layer));
  });

  test("names: docker's normalization", () => {
    expect(normalizeImageName("busybox")).toBe("docker.io/library/busybox:latest");
    expect(normalizeImageName("localhost/x")).toBe("localhost/x:latest");
    expect(normalizeImageName("registry.local:5000/team/app:2")).toBe("registry.local:5000/team/app:2");
  });

  test("what is wrong is named: a missing blob, a wrong size, an unnamed image, neither format", async () => {
    const img = ociImage("localhost/app:1.0");
    const noLayer = { ...img.files };
    delete noLayer[`blobs/sha256/${sha(img.layer).slice(7)}`];
    await expect(planArchive(makeTar(noLayer))).rejects.toThrow(`blob ${sha(img.layer)} (application/vnd.oci.image.layer.v1.tar) is missing`);
    const unnamed = {
      ...img.files,
      "index.json": JSON.stringify({
        manifests: [{ mediaType: MEDIA.ociManifest, digest: sha(img.manifest), size: img.manifest.length, annotations: { "org.opencontainers.image.ref.name": "1.0" } }],
      }),
    };
    await expect(planArchive(makeTar(unnamed))).rejects.toThrow("has no image name");
    const wrongSize = {
      ...img.files,
      "index.json": JSON.stringify({ manifests: [{ mediaType: MEDIA.ociManifest, digest: sha(img.manifest), size: 1, annotations: { "io.containerd.image.name": "a/b:1" } }] }),
    };
    await expect(planArchive(makeTar(wrongSize))).rejects.toThrow("its descriptor says 1");
    await expect(planArchive(makeTar({ "readme.txt": "hi" }))).rejects.toThrow("neither an OCI image layout");
  });
});

describe("preloadImages", () => {
  test("imports under a lease, skips what is already there, and goes on past a bad tarball", async () => {
    const dir = mkdtempSync(join(tmpdir(), "preload-"));
    const img = ociImage("localhost/app:1.0");
    Bun.spawnSync(["cp", makeTar(img.files), join(dir, "a-app.tar")]);
    writeFileSync(join(dir, "b-broken.tar"), "not a tar".repeat(100));
    writeFileSync(join(dir, "notes.txt"), "ignored");
    const store = new FakeStore();
    const { logger, lines } = memoryLogger();
    const first = await preloadImages(dir, store, logger);
    expect(first.map((r) => [r.file.split("/").pop(), r.imported, r.unchanged, r.error !== undefined])).toEqual([
      ["a-app.tar", ["localhost/app:1.0"], [], false],
      ["b-broken.tar", [], [], true],
    ]);
    expect(store.images.get("localhost/app:1.0")?.digest).toBe(sha(img.manifest));
    expect(store.blobs.get(sha(img.manifest))?.labels["containerd.io/gc.ref.content.config"]).toBe(sha(img.config));
    expect(store.leases).toBe(1);
    expect(lines.some((l) => l.includes("could not preload") && l.includes("b-broken.tar"))).toBe(true);
    const again = await preloadImages(dir, store, logger);
    expect(again[0]).toMatchObject({ imported: [], unchanged: ["localhost/app:1.0"] });
    expect(store.leases).toBe(1);
  });
});

describe("awaitImagesListed", () => {
  /** Runs `wait` on a fake clock, moving it 100 ms at a time until `wait` settles. */
  async function onFakeClock<T>(clock: FakeClock, wait: Promise<T>): Promise<T> {
    let settled = false;
    void wait.finally(() => {
      settled = true;
    });
    for (let i = 0; i < 10_000 && !settled; i++) {
      await Bun.sleep(0);
      clock.advance(100);
    }
    return wait;
  }

  test("waits until the CRI lists each preloaded image (containerd's CRI learns of them from an event, later), then says how long it took", async () => {
    const clock = new FakeClock();
    const start = clock.now();
    const listedAt = new Map([
      ["localhost/a:1", start + 300],
      ["localhost/b:1", start + 1_200],
    ]);
    const asked: string[] = [];
    const isListed = async (name: string) => {
      asked.push(name);
      return clock.now() >= listedAt.get(name)!;
    };
    const { logger, lines } = memoryLogger();
    const left = await onFakeClock(clock, awaitImagesListed([...listedAt.keys()], isListed, { clock, logger }));
    expect(left).toEqual([]);
    expect(clock.now() - start).toBeGreaterThanOrEqual(1_200);
    expect(clock.now() - start).toBeLessThan(1_500);
    // a listed image is not asked about again
    expect(asked.filter((n) => n === "localhost/a:1").length).toBe(4);
    expect(lines.some((l) => l.includes("the runtime lists the preloaded images") && l.includes("waitedMs=1200"))).toBe(true);
  });

  test("an image the CRI never lists is returned and named in a warning, with the CRI's last error, after the timeout", async () => {
    const clock = new FakeClock();
    let calls = 0;
    const isListed = async (name: string) => {
      calls++;
      if (name === "localhost/gone:1" && calls % 2 === 0) throw new Error("rpc error: code = Unavailable");
      return name === "localhost/ok:1";
    };
    const { logger, lines } = memoryLogger();
    const left = await onFakeClock(clock, awaitImagesListed(["localhost/ok:1", "localhost/gone:1"], isListed, { clock, logger, timeoutMs: 5_000 }));
    expect(left).toEqual(["localhost/gone:1"]);
    const warning = lines.find((l) => l.includes("does not list preloaded images"));
    expect(warning).toContain("waitedMs=5000");
    expect(warning).toContain('images=["localhost/gone:1"]');
    expect(warning).toContain("Unavailable");
  });

  test("images listed at once cost one look each and no log line; a stopping agent stops the wait", async () => {
    const clock = new FakeClock();
    const { logger, lines } = memoryLogger();
    let calls = 0;
    const listed = async () => {
      calls++;
      return true;
    };
    expect(await awaitImagesListed(["a", "b"], listed, { clock, logger })).toEqual([]);
    expect(calls).toBe(2);
    expect(lines).toEqual([]);
    const stop = new AbortController();
    const waiting = awaitImagesListed(["never"], async () => false, { clock, logger, signal: stop.signal });
    await Bun.sleep(0);
    stop.abort(new Error("agent stopping"));
    expect(await waiting).toEqual(["never"]);
    expect(lines).toEqual([]);
  });
});
