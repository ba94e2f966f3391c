/**
 * Offline autonomy for what pods read from the API besides themselves: the
 * configMaps, secrets and service account tokens their volumes, env and
 * pull secrets reference. Every answer the API gives is kept in the
 * checkpoint store (secrets and tokens encrypted at rest); when the API
 * cannot answer (not "the object is gone"), the last answer is used if it
 * is younger than offlineAutonomy.maxAge (a token: until it expires), so a
 * node rebooted while offline can still start its pods.
 */
import { createHash } from "node:crypto";
import { PodObjectError, type ConfigMapData, type PodObjects, type SecretData, type IssuedToken, type RequestToken, type TokenRequestSpec } from "../api/objects.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { CheckpointStore } from "./store.ts";

export const CONFIGMAP_CHECKPOINT_KIND = "configmaps";
export const SECRET_CHECKPOINT_KIND = "secrets";
export const TOKEN_CHECKPOINT_KIND = "tokens";

export interface ObjectCheckpointOptions {
  store: CheckpointStore;
  clock: Clock;
  logger: Logger;
  /** offlineAutonomy.maxAge: older copies are not used. */
  maxAgeMs: number;
}

/** A file-name-safe key: namespaces and names are DNS labels/subdomains, so `_` cannot occur in them. */
const objectKey = (namespace: string, name: string) => `${namespace}_${name}`;
const fingerprint = (data: unknown) => createHash("sha256").update(JSON.stringify(data)).digest("hex");

export function checkpointedPodObjects(inner: PodObjects, opts: ObjectCheckpointOptions): PodObjects {
  // What was last written per document and when: an unchanged object is rewritten only now and then,
  // so that its copy's age says when the API last confirmed it (maxAge counts from there).
  const written = new Map<string, { print: string; at: number }>();
  const offlineNoted = new Set<string>();

  async function lookup<T>(kind: string, namespace: string, name: string, sensitive: boolean, ask: () => Promise<T | undefined>): Promise<T | undefined> {
    const key = objectKey(namespace, name);
    const doc = `${kind}/${key}`;
    try {
      const value = await ask();
      offlineNoted.delete(doc);
      const now = opts.clock.now();
      if (value === undefined) {
        if (written.get(doc)?.print !== "absent") opts.store.remove(kind, key);
        written.set(doc, { print: "absent", at: now });
        return undefined;
      }
      const print = fingerprint(value);
      const last = written.get(doc);
      if (last?.print !== print || now - last.at > opts.maxAgeMs / 4) {
        try {
          opts.store.write(kind, key, value, { sensitive });
          written.set(doc, { print, at: now });
        } catch (err) {
          opts.logger.warn("could not checkpoint an object pods reference", { object: doc, err: errorMessage(err) });
        }
      }
      return value;
    } catch (err) {
      if (!(err instanceof PodObjectError)) throw err;
      const saved = opts.store.read<T>(kind, key);
      if (!saved.ok || opts.clock.now() - saved.writtenAt > opts.maxAgeMs) throw err;
      if (!offlineNoted.has(doc)) {
        offlineNoted.add(doc);
        opts.logger.warn("the API cannot answer; using the checkpointed copy", { object: doc, writtenAt: new Date(saved.writtenAt).toISOString(), err: errorMessage(err) });
      }
      return saved.data;
    }
  }

  return {
    configMap: (namespace, name) => lookup<ConfigMapData>(CONFIGMAP_CHECKPOINT_KIND, namespace, name, false, () => inner.configMap(namespace, name)),
    secret: (namespace, name) => lookup<SecretData>(SECRET_CHECKPOINT_KIND, namespace, name, true, () => inner.secret(namespace, name)),
  };
}

/** Wraps the TokenRequest call: each issued token is kept (encrypted); while the API cannot issue one, the kept token serves until it expires. */
export function checkpointedTokenRequest(request: RequestToken, opts: Omit<ObjectCheckpointOptions, "maxAgeMs">): RequestToken {
  const keyOf = (s: TokenRequestSpec) =>
    createHash("sha256")
      .update(JSON.stringify([s.namespace, s.serviceAccount, s.audiences, s.expirationSeconds, s.pod.uid]))
      .digest("hex")
      .slice(0, 32);
  return async (spec) => {
    try {
      const issued = await request(spec);
      try {
        opts.store.write(TOKEN_CHECKPOINT_KIND, keyOf(spec), issued, { sensitive: true });
      } catch (err) {
        opts.logger.warn("could not checkpoint a service account token", { pod: spec.pod.name, err: errorMessage(err) });
      }
      return issued;
    } catch (err) {
      const saved = opts.store.read<IssuedToken>(TOKEN_CHECKPOINT_KIND, keyOf(spec));
      if (saved.ok && saved.data.expiresAt > opts.clock.now()) {
        opts.logger.warn("the API cannot issue a token; using the checkpointed one until it expires", {
          pod: spec.pod.name,
          expiresAt: new Date(saved.data.expiresAt).toISOString(),
          err: errorMessage(err),
        });
        return saved.data;
      }
      throw err;
    }
  };
}

/**
 * At start: copies too old to be used (configMaps, secrets) and expired
 * tokens go, so objects no pod references any more do not pile up.
 */
export function pruneObjectCheckpoints(opts: ObjectCheckpointOptions): void {
  const now = opts.clock.now();
  for (const kind of [CONFIGMAP_CHECKPOINT_KIND, SECRET_CHECKPOINT_KIND]) {
    for (const c of opts.store.list(kind)) if (now - c.writtenAt > opts.maxAgeMs) opts.store.remove(kind, c.key);
  }
  for (const c of opts.store.list<IssuedToken>(TOKEN_CHECKPOINT_KIND)) if (c.data.expiresAt <= now) opts.store.remove(TOKEN_CHECKPOINT_KIND, c.key);
}
