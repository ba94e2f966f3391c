// A minimal OCI distribution registry on 127.0.0.1 (plain HTTP, which
// containerd uses for localhost registries) serving the project's busybox
// image under any repository name. It can require HTTP Basic auth and
// delay each answer, and records every request with the time it was
// answered, so tests can see the credentials a pull used and whether pulls
// overlapped.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const repoRoot = resolve(import.meta.dir, "../..");

export interface RegistryRequest {
  method: string;
  repository: string;
  kind: "manifests" | "blobs" | "base";
  /** user:password from a Basic Authorization header, if any. */
  basicAuth?: string;
  startedAt: number;
  answeredAt: number;
  status: number;
}

/** A request that gets no answer; `abandonedAt` once the client went away (its pull cancelled). */
export interface StalledRequest {
  repository: string;
  startedAt: number;
  abandonedAt?: number;
}

export interface RegistryHandle {
  /** host:port, e.g. 127.0.0.1:40123 */
  host: string;
  requests: RegistryRequest[];
  /** Requests held by `stallRepositoriesOf`, as they come. */
  stalls: StalledRequest[];
  stop(): void;
}

export function startRegistry(
  opts: {
    credentials?: { username: string; password: string };
    delayMs?: number;
    /**
     * Repositories whose name starts with this never answer (manifests and blobs: containerd holds this
     * image's blobs already, content-addressed): their requests wait until the client goes away.
     */
    stallRepositoriesOf?: string;
  } = {},
): RegistryHandle {
  const dir = mkdtempSync(join(tmpdir(), "bunlet-registry-"));
  const untar = Bun.spawnSync(["tar", "-C", dir, "-xf", join(repoRoot, ".cache/images/busybox.tar")]);
  if (untar.exitCode !== 0) throw new Error(`untar busybox image: ${untar.stderr.toString()}`);
  const index = JSON.parse(readFileSync(join(dir, "index.json"), "utf8")) as { manifests: { digest: string; mediaType: string }[] };
  const manifest = index.manifests[0]!;
  const blob = (digest: string) => readFileSync(join(dir, "blobs", digest.replace(":", "/")));
  const requests: RegistryRequest[] = [];
  const stalls: StalledRequest[] = [];
  const expected = opts.credentials ? `${opts.credentials.username}:${opts.credentials.password}` : undefined;

  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    // No idle limit: a stalled request ends only when its client goes away, not after Bun's 10 s.
    idleTimeout: 0,
    async fetch(req) {
      const startedAt = Date.now();
      const url = new URL(req.url);
      const m = /^\/v2\/(.+)\/(manifests|blobs)\/([^/]+)$/.exec(url.pathname);
      const header = req.headers.get("authorization") ?? "";
      const basicAuth = header.startsWith("Basic ") ? Buffer.from(header.slice(6), "base64").toString("utf8") : undefined;
      const record = (status: number) =>
        requests.push({
          method: req.method,
          repository: m?.[1] ?? "",
          kind: (m?.[2] as "manifests" | "blobs") ?? "base",
          ...(basicAuth ? { basicAuth } : {}),
          startedAt,
          answeredAt: Date.now(),
          status,
        });
      if (expected && basicAuth !== expected) {
        record(401);
        return new Response("unauthorized", { status: 401, headers: { "WWW-Authenticate": 'Basic realm="bunlet-test"' } });
      }
      if (opts.delayMs) await Bun.sleep(opts.delayMs);
      if (url.pathname === "/v2/" || url.pathname === "/v2") {
        record(200);
        return new Response("{}", { headers: { "Docker-Distribution-API-Version": "registry/2.0" } });
      }
      if (!m) {
        record(404);
        return new Response("not found", { status: 404 });
      }
      const [, repository, kind, ref] = m;
      if (opts.stallRepositoriesOf && repository!.startsWith(opts.stallRepositoriesOf)) {
        const stall: StalledRequest = { repository: repository!, startedAt };
        stalls.push(stall);
        await new Promise((resolve) => (req.signal.aborted ? resolve(undefined) : req.signal.addEventListener("abort", resolve, { once: true })));
        stall.abandonedAt = Date.now();
        return new Response("abandoned", { status: 499 });
      }
      let body: Buffer;
      let type = "application/octet-stream";
      let digest = ref!;
      try {
        if (kind === "manifests") {
          digest = ref!.startsWith("sha256:") ? ref! : manifest.digest;
          body = blob(digest);
          type = manifest.mediaType;
        } else body = blob(ref!);
      } catch {
        record(404);
        return new Response("unknown", { status: 404 });
      }
      record(200);
      const headers = { "Content-Type": type, "Docker-Content-Digest": digest, "Content-Length": String(body.length) };
      return new Response(req.method === "HEAD" ? null : body, { headers });
    },
  });
  return {
    host: `127.0.0.1:${server.port}`,
    requests,
    stalls,
    stop() {
      server.stop(true);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
