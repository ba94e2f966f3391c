/**
 * Registry credentials from a pod's imagePullSecrets, matched to an image
 * as upstream's credential provider keyring does (pkg/credentialprovider
 * keyring.go): kubernetes.io/dockerconfigjson and kubernetes.io/dockercfg
 * secrets; a key matches when its host has as many dot-separated parts, each
 * glob-matching (`*.example.com`), the same port, and its path is a prefix
 * of the image's; more specific keys come first; Docker Hub images fall
 * back to the `index.docker.io` entry.
 */
import type { PodObjects } from "../api/objects.ts";
import { normalizeImageRef } from "../cri/image-ref.ts";
import { CriError, goRpcError, type CriService, type Image, type PodSandboxConfig } from "../cri/index.ts";
import type { Pod } from "../pods/schema.ts";
import type { Clock } from "../util/clock.ts";
import type { PullQueue } from "./pull-queue.ts";

export interface RegistryAuth {
  username: string;
  password: string;
}

interface DockerConfigEntry {
  username?: string;
  password?: string;
  auth?: string;
}

const DEFAULT_REGISTRY_HOST = "index.docker.io";

/** Upstream BasicDockerKeyring.Add: the key is host plus path, without scheme and without a /v1/ or /v2/ prefix. */
export function keyringKey(location: string): string | undefined {
  let url: URL;
  try {
    url = new URL(/^https?:\/\//.test(location) ? location : `https://${location}`);
  } catch {
    return undefined;
  }
  let path = url.pathname;
  if (path.startsWith("/v2/") || path.startsWith("/v1/")) path = path.slice(3);
  return path.length > 0 && path !== "/" ? url.host + path : url.host;
}

function entryAuth(e: DockerConfigEntry): RegistryAuth {
  // Upstream DockerConfigEntry: "auth" (base64 user:password) wins over the separate fields.
  if (e.auth) {
    const decoded = Buffer.from(e.auth, "base64").toString("utf8");
    const i = decoded.indexOf(":");
    if (i > 0) return { username: decoded.slice(0, i), password: decoded.slice(i + 1) };
  }
  return { username: e.username ?? "", password: e.password ?? "" };
}

/** Registry location → entry, from one secret's data (base64 values); undefined for other secret types or bad JSON. */
export function dockerConfigOf(secret: { type?: string; data: Record<string, string> }): Record<string, DockerConfigEntry> | undefined {
  const decode = (k: string) => (secret.data[k] === undefined ? undefined : Buffer.from(secret.data[k]!, "base64").toString("utf8"));
  try {
    if (secret.type === "kubernetes.io/dockerconfigjson") {
      const text = decode(".dockerconfigjson");
      return text ? ((JSON.parse(text) as { auths?: Record<string, DockerConfigEntry> }).auths ?? {}) : undefined;
    }
    if (secret.type === "kubernetes.io/dockercfg") {
      const text = decode(".dockercfg");
      return text ? (JSON.parse(text) as Record<string, DockerConfigEntry>) : undefined;
    }
  } catch {
    return undefined;
  }
  return undefined;
}

/** Go's filepath.Match for one host part, for `*` and `?`. */
const globMatch = (glob: string, part: string): boolean =>
  new RegExp(
    `^${glob
      .replace(/[.+^${}()|[\]\\]/g, "\\$&")
      .replace(/\*/g, "[^/]*")
      .replace(/\?/g, "[^/]")}$`,
  ).test(part);

function splitHost(host: string): { parts: string[]; port: string } {
  const i = host.lastIndexOf(":");
  return i > 0 ? { parts: host.slice(0, i).split("."), port: host.slice(i + 1) } : { parts: host.split("."), port: "" };
}

/** Upstream URLsMatchStr for schemeless "host[:port][/path]" strings. */
export function keyMatchesImage(key: string, image: string): boolean {
  const split = (s: string) => {
    const slash = s.indexOf("/");
    return slash === -1 ? { host: s, path: "" } : { host: s.slice(0, slash), path: s.slice(slash) };
  };
  const k = split(key);
  const t = split(image);
  const kh = splitHost(k.host);
  const th = splitHost(t.host);
  if (kh.port !== th.port || kh.parts.length !== th.parts.length) return false;
  if (!t.path.startsWith(k.path)) return false;
  return kh.parts.every((p, i) => globMatch(p, th.parts[i]!));
}

/** Upstream isDefaultRegistryMatch: images that pull from Docker Hub. */
function isDefaultRegistryMatch(repo: string): boolean {
  const [first, rest] = [repo.split("/")[0] ?? "", repo.includes("/")];
  if (!first) return false;
  if (!rest) return true;
  if (first === "docker.io" || first === "index.docker.io") return true;
  return !/[.:]/.test(first) && first !== "localhost";
}

/** The repository of an image without tag or digest, normalized as the runtime names it (docker.io/library/busybox). */
export function repositoryOf(image: string): string {
  const full = normalizeImageRef(image);
  const at = full.indexOf("@");
  const name = at >= 0 ? full.slice(0, at) : full;
  const colon = name.lastIndexOf(":");
  return colon > name.lastIndexOf("/") ? name.slice(0, colon) : name;
}

export class Keyring {
  private readonly creds = new Map<string, RegistryAuth[]>();

  add(config: Record<string, DockerConfigEntry>): void {
    for (const [location, entry] of Object.entries(config)) {
      const key = keyringKey(location);
      if (key === undefined) continue;
      this.creds.set(key, [...(this.creds.get(key) ?? []), entryAuth(entry)]);
    }
  }

  /** Every credential that applies to the image, the most specific key first; empty for an anonymous pull. */
  lookup(image: string): RegistryAuth[] {
    const repo = repositoryOf(image);
    const keys = [...this.creds.keys()].sort().reverse(); // reverse-sorted: longer paths of one host first, as upstream
    const found = keys.filter((k) => keyMatchesImage(k, repo)).flatMap((k) => this.creds.get(k)!);
    if (found.length) return found;
    return isDefaultRegistryMatch(repo) ? (this.creds.get(DEFAULT_REGISTRY_HOST) ?? []) : [];
  }
}

/**
 * The keyring of a pod's imagePullSecrets. Secrets that cannot be retrieved
 * are named in `missing` (upstream getPullSecretsForPod, kubelet_pods.go:1073);
 * one of another type, or without a docker config, adds no credentials
 * (upstream MakeDockerKeyring) and is not missing.
 */
export async function podKeyring(pod: Pod, objects: PodObjects): Promise<{ keyring: Keyring; missing: string[] }> {
  const keyring = new Keyring();
  const missing: string[] = [];
  const refs = ((pod.spec as { imagePullSecrets?: { name?: string }[] }).imagePullSecrets ?? []) as { name?: string }[];
  for (const ref of refs) {
    const name = ref.name ?? "";
    if (!name) continue;
    const secret = await objects.secret(pod.metadata.namespace ?? "default", name).catch(() => undefined);
    if (!secret) {
      missing.push(name);
      continue;
    }
    const config = dockerConfigOf(secret);
    if (config) keyring.add(config);
  }
  return { keyring, missing };
}

export interface PullRequest {
  cri: Pick<CriService, "pullImage" | "imageStatus">;
  queue: PullQueue;
  objects: PodObjects;
  clock: Pick<Clock, "now">;
  pod: Pod;
  /** The name as the runtime is asked for it (with upstream's default tag). */
  image: string;
  sandbox: PodSandboxConfig;
  /** Aborted when the pod no longer needs the pull: it leaves the queue, or its CRI call is cancelled. */
  signal?: AbortSignal;
}

/** A pull's image reference, its size, and how long it took once its turn came, as upstream's pullResult. */
export interface PulledImage {
  ref: string;
  /** The image's size in bytes; 0 when its status cannot be read (upstream: best effort). */
  size: number;
  /** The image's status after the pull, when it could be read. */
  status: Image | undefined;
  /** From its turn in the queue to its size read (upstream's pullDuration). */
  pullMs: number;
}

/**
 * The CRI ImageSpec of a pod's image status and pull, as upstream's image
 * manager makes it (images/image_manager.go:162-174, kuberuntime/convert.go:63-81):
 * the image with its default tag and the pod's annotations; no
 * userSpecifiedImage (only CreateContainer's spec has it), no runtime handler
 * (only with the RuntimeClassInImageCriAPI feature gate, alpha and off).
 */
export const podImageSpec = (pod: Pod, image: string) => ({ image, annotations: { ...(pod.metadata.annotations ?? {}) }, userSpecifiedImage: "", runtimeHandler: "" });

/**
 * Upstream kuberuntime PullImage: without matching credentials one
 * anonymous pull; otherwise each matching credential in turn until one
 * pull succeeds, failing with all their errors. Runs in the node-wide
 * queue, and the whole pull takes one registryPullQPS token, as upstream's
 * throttled image service wraps that PullImage (images/helpers.go:47).
 */
export async function pullWithSecrets(r: PullRequest): Promise<PulledImage> {
  const { keyring } = await podKeyring(r.pod, r.objects);
  const spec = podImageSpec(r.pod, r.image);
  const auths = keyring.lookup(r.image);
  try {
    return await r.queue.run(async () => {
      const began = r.clock.now();
      r.queue.throttle();
      const ref = await pullEach(r, spec, auths);
      // Upstream's puller reads the size after a pull, best effort, within the pull's duration (images/puller.go:113-124).
      const status = await r.cri.imageStatus(spec).catch(() => undefined);
      return { ref, size: Number(status?.size ?? 0), status, pullMs: r.clock.now() - began };
    }, r.signal);
  } catch (err) {
    // Left the queue before its turn: upstream's request waits its turn, then its cancelled context fails the
    // runtime call at once with these words; here it is not waited on.
    if (r.signal?.aborted && err === r.signal.reason)
      throw new Error(goRpcError(new CriError({ kind: "Canceled", method: "PullImage", target: r.image, detail: "context canceled" })));
    throw err;
  }
}

async function pullEach(r: PullRequest, spec: Parameters<CriService["pullImage"]>[0], auths: RegistryAuth[]): Promise<string> {
  const opts = r.signal ? { signal: r.signal } : undefined;
  if (!auths.length) return r.cri.pullImage(spec, undefined, r.sandbox, opts).catch((err: unknown) => Promise.reject(new Error(goRpcError(err, true))));
  const errors: string[] = [];
  for (const auth of auths) {
    try {
      return await r.cri.pullImage(spec, { username: auth.username, password: auth.password }, r.sandbox, opts);
    } catch (err) {
      errors.push(goRpcError(err, true));
    }
  }
  // utilerrors.NewAggregate's message: one error alone, otherwise the distinct ones in brackets.
  const distinct = [...new Set(errors)];
  throw new Error(distinct.length === 1 ? distinct[0] : `[${distinct.join(", ")}]`);
}

/**
 * Upstream getPullSecretsForPod's warning, which every sync of a running pod
 * gives while some of its imagePullSecrets cannot be retrieved, whether an
 * image is pulled or not (kubelet.go:2087, kubelet_pods.go:1093-1095).
 */
export async function missingPullSecretsWarning(pod: Pod, objects: PodObjects): Promise<string | undefined> {
  const { missing } = await podKeyring(pod, objects);
  return missing.length ? `Unable to retrieve some image pull secrets (${missing.join(", ")}); attempting to pull the image may not succeed.` : undefined;
}
