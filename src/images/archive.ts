/**
 * What an image tarball holds, as a plan for the content store: every blob
 * (digest, size, media type, where to read it, and the containerd GC labels
 * that tie a manifest to its config and layers) and the image names with
 * their root descriptors. Two formats, as `ctr images import` takes them:
 * an OCI image layout (index.json + blobs/) and `docker save` output
 * (manifest.json + config and layer files), for which a Docker schema 2
 * manifest is made here.
 */
import { createHash } from "node:crypto";
import * as v from "valibot";
import { entryChunks, readEntry, readTarIndex, type TarEntry } from "./tar.ts";

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
}

export interface BlobToImport extends Descriptor {
  labels: Record<string, string>;
  chunks(): AsyncIterable<Uint8Array>;
}

export interface ArchivePlan {
  format: "oci" | "docker";
  images: { name: string; target: Descriptor }[];
  /** Children before parents, so that a parent never points at a blob not yet written. */
  blobs: BlobToImport[];
}

export class ArchiveError extends Error {
  override readonly name = "ArchiveError";
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(`${file}: ${message}`);
  }
}

export const MEDIA = {
  ociIndex: "application/vnd.oci.image.index.v1+json",
  ociManifest: "application/vnd.oci.image.manifest.v1+json",
  dockerList: "application/vnd.docker.distribution.manifest.list.v2+json",
  dockerManifest: "application/vnd.docker.distribution.manifest.v2+json",
  dockerConfig: "application/vnd.docker.container.image.v1+json",
  dockerLayer: "application/vnd.docker.image.rootfs.diff.tar",
  dockerLayerGzip: "application/vnd.docker.image.rootfs.diff.tar.gzip",
} as const;

const DescriptorSchema = v.looseObject({
  mediaType: v.string(),
  digest: v.pipe(v.string(), v.regex(/^sha256:[0-9a-f]{64}$/, "must be a sha256 digest")),
  size: v.pipe(v.number(), v.integer(), v.minValue(0)),
  annotations: v.optional(v.record(v.string(), v.string())),
});
const IndexSchema = v.looseObject({ mediaType: v.optional(v.string()), manifests: v.array(DescriptorSchema) });
const ManifestSchema = v.looseObject({ config: DescriptorSchema, layers: v.array(DescriptorSchema) });
const DockerManifestSchema = v.array(
  v.looseObject({
    Config: v.string(),
    RepoTags: v.optional(v.nullable(v.array(v.string()))),
    Layers: v.array(v.string()),
  }),
);

function parseJson<T>(file: string, what: string, bytes: Uint8Array, schema: v.GenericSchema<unknown, T>): T {
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder().decode(bytes));
  } catch (err) {
    throw new ArchiveError(file, `${what} is not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  const r = v.safeParse(schema, raw);
  if (!r.success) {
    const issue = r.issues[0];
    const at = issue.path?.map((p) => String(p.key)).join(".") ?? "";
    throw new ArchiveError(file, `${what}${at ? ` field ${at}` : ""}: ${issue.message}`);
  }
  return r.output;
}

/**
 * Docker's reference normalization, as `ctr import` names docker-save images:
 * `busybox` → `docker.io/library/busybox:latest`, `me/app:1` → `docker.io/me/app:1`.
 */
export function normalizeImageName(name: string): string {
  const slash = name.indexOf("/");
  const first = slash < 0 ? "" : name.slice(0, slash);
  const hasDomain = slash >= 0 && (first.includes(".") || first.includes(":") || first === "localhost");
  let full = hasDomain ? name : slash < 0 ? `docker.io/library/${name}` : `docker.io/${name}`;
  const last = full.slice(full.lastIndexOf("/") + 1);
  if (!last.includes(":") && !full.includes("@")) full += ":latest";
  return full;
}

const isIndex = (mediaType: string) => mediaType === MEDIA.ociIndex || mediaType === MEDIA.dockerList;
const isManifest = (mediaType: string) => mediaType === MEDIA.ociManifest || mediaType === MEDIA.dockerManifest;
const sha256 = (bytes: Uint8Array) => `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
const bytesChunks = (bytes: Uint8Array) =>
  async function* () {
    yield bytes;
  };

/** Reads a tarball's index and plans its import. Throws ArchiveError naming the file and what is wrong. */
export async function planArchive(file: string): Promise<ArchivePlan> {
  let entries: TarEntry[];
  try {
    entries = readTarIndex(file);
  } catch (err) {
    throw new ArchiveError(file, err instanceof Error ? err.message : String(err));
  }
  const byName = new Map(entries.filter((e) => e.type === "file").map((e) => [e.name, e]));
  if (byName.has("index.json")) return planOci(file, byName);
  if (byName.has("manifest.json")) return planDocker(file, byName);
  throw new ArchiveError(file, "neither an OCI image layout (index.json) nor a docker save archive (manifest.json)");
}

function planOci(file: string, byName: Map<string, TarEntry>): ArchivePlan {
  const blobEntry = (digest: string) => byName.get(`blobs/${digest.replace(":", "/")}`);
  const index = parseJson(file, "index.json", readEntry(file, byName.get("index.json")!), IndexSchema);
  const blobs = new Map<string, BlobToImport>();
  const add = (d: Descriptor, labels: Record<string, string> = {}) => {
    const entry = blobEntry(d.digest);
    if (!entry) throw new ArchiveError(file, `blob ${d.digest} (${d.mediaType}) is missing`);
    if (entry.size !== d.size) throw new ArchiveError(file, `blob ${d.digest} is ${entry.size} bytes, its descriptor says ${d.size}`);
    if (!blobs.has(d.digest)) blobs.set(d.digest, { mediaType: d.mediaType, digest: d.digest, size: d.size, labels, chunks: () => entryChunks(file, entry) });
  };
  // Walks a descriptor: its children are added first; the labels keep them alive once the image points at the root.
  const walk = (d: Descriptor): void => {
    if (isIndex(d.mediaType)) {
      const child = parseJson(file, `index ${d.digest}`, readEntry(file, blobEntry(d.digest) ?? missing(d)), IndexSchema);
      const labels: Record<string, string> = {};
      child.manifests.forEach((m, i) => {
        if (!blobEntry(m.digest)) return; // another platform's manifest, not in this tarball
        walk(m);
        labels[`containerd.io/gc.ref.content.m.${i}`] = m.digest;
      });
      add(d, labels);
    } else if (isManifest(d.mediaType)) {
      const m = parseJson(file, `manifest ${d.digest}`, readEntry(file, blobEntry(d.digest) ?? missing(d)), ManifestSchema);
      add(m.config);
      const labels: Record<string, string> = { "containerd.io/gc.ref.content.config": m.config.digest };
      m.layers.forEach((l, i) => {
        add(l);
        labels[`containerd.io/gc.ref.content.l.${i}`] = l.digest;
      });
      add(d, labels);
    } else {
      throw new ArchiveError(file, `unsupported media type ${d.mediaType} for ${d.digest}`);
    }
  };
  const missing = (d: Descriptor): never => {
    throw new ArchiveError(file, `blob ${d.digest} (${d.mediaType}) is missing`);
  };
  const images: ArchivePlan["images"] = [];
  for (const m of index.manifests) {
    const name = m.annotations?.["io.containerd.image.name"] ?? m.annotations?.["org.opencontainers.image.ref.name"];
    if (!name || !/[/:]/.test(name)) {
      throw new ArchiveError(file, `index.json entry ${m.digest} has no image name (annotation io.containerd.image.name, or a full org.opencontainers.image.ref.name)`);
    }
    walk(m);
    images.push({ name, target: { mediaType: m.mediaType, digest: m.digest, size: m.size } });
  }
  return { format: "oci", images, blobs: [...blobs.values()] };
}

async function planDocker(file: string, byName: Map<string, TarEntry>): Promise<ArchivePlan> {
  const manifest = parseJson(file, "manifest.json", readEntry(file, byName.get("manifest.json")!), DockerManifestSchema);
  const blobs = new Map<string, BlobToImport>();
  const images: ArchivePlan["images"] = [];
  const entryOf = (name: string): TarEntry => {
    const entry = byName.get(name.replace(/^\.\//, ""));
    if (!entry) throw new ArchiveError(file, `${name} named in manifest.json is missing`);
    return entry;
  };
  for (const [i, image] of manifest.entries()) {
    const configEntry = entryOf(image.Config);
    const configBytes = readEntry(file, configEntry);
    const config: BlobToImport = { mediaType: MEDIA.dockerConfig, digest: sha256(configBytes), size: configBytes.length, labels: {}, chunks: bytesChunks(configBytes) };
    blobs.set(config.digest, config);
    const layers: Descriptor[] = [];
    for (const layerName of image.Layers) {
      const entry = entryOf(layerName);
      // The digest of a layer file is its sha256: read it once, streaming.
      const hash = createHash("sha256");
      let gzip: boolean | undefined;
      for await (const chunk of entryChunks(file, entry)) {
        gzip ??= chunk[0] === 0x1f && chunk[1] === 0x8b;
        hash.update(chunk);
      }
      const layer = { mediaType: gzip ? MEDIA.dockerLayerGzip : MEDIA.dockerLayer, digest: `sha256:${hash.digest("hex")}`, size: entry.size };
      layers.push(layer);
      if (!blobs.has(layer.digest)) blobs.set(layer.digest, { ...layer, labels: {}, chunks: () => entryChunks(file, entry) });
    }
    const manifestBytes = new TextEncoder().encode(
      JSON.stringify({ schemaVersion: 2, mediaType: MEDIA.dockerManifest, config: { mediaType: config.mediaType, size: config.size, digest: config.digest }, layers }),
    );
    const labels: Record<string, string> = { "containerd.io/gc.ref.content.config": config.digest };
    layers.forEach((l, j) => (labels[`containerd.io/gc.ref.content.l.${j}`] = l.digest));
    const target: Descriptor = { mediaType: MEDIA.dockerManifest, digest: sha256(manifestBytes), size: manifestBytes.length };
    blobs.set(target.digest, { ...target, labels, chunks: bytesChunks(manifestBytes) });
    const tags = image.RepoTags ?? [];
    if (!tags.length) throw new ArchiveError(file, `manifest.json entry ${i} has no RepoTags: the image would have no name`);
    for (const tag of tags) images.push({ name: normalizeImageName(tag), target });
  }
  return { format: "docker", images, blobs: [...blobs.values()] };
}
