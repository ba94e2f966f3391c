/**
 * Service account tokens for projected volumes, after upstream's token
 * manager (pkg/kubelet/token/token_manager.go): one TokenRequest per
 * (service account, audiences, lifetime, bound pod), cached, and asked
 * again once 80% of its lifetime has passed (or 24 hours since it was
 * issued), with up to 10 s of jitter so a node's pods do not refresh at once.
 * The lifetime is the one the API server granted, which it may cap below
 * the one asked for, as upstream reads it from the TokenRequest's answer.
 */
import type { Clock } from "../util/clock.ts";
import type { TokenRequestSpec, IssuedToken, RequestToken } from "../api/objects.ts";

export interface TokenSource {
  /** A valid token for `spec`: the cached one unless it needs a refresh. Throws when the API refuses. */
  token(spec: TokenRequestSpec): Promise<string>;
  /** Drops the tokens bound to a pod that is gone. */
  forgetPod(uid: string): void;
}

const MAX_TTL_MS = 24 * 60 * 60 * 1000;
/** Upstream's jitter is whole seconds below 10 (time.Duration(rand.Float64()*10) * time.Second). */
const MAX_JITTER_SECONDS = 10;

const keyOf = (s: TokenRequestSpec) => JSON.stringify([s.namespace, s.serviceAccount, s.audiences, s.expirationSeconds, s.pod.name, s.pod.uid]);

/**
 * Upstream requiresRefresh (token_manager.go): older than 24h, or within 20% of its lifetime (whole seconds, minus
 * jitter) of expiring. The lifetime is the granted one; a token checkpointed without it uses the one asked for.
 */
export function requiresRefresh(now: number, issued: IssuedToken, requestedSeconds: number, jitterMs: number): boolean {
  const lifetimeSeconds = issued.lifetimeSeconds ?? requestedSeconds;
  const issuedAt = issued.expiresAt - lifetimeSeconds * 1000;
  if (now > issuedAt + MAX_TTL_MS - jitterMs) return true;
  return now > issued.expiresAt - Math.floor((lifetimeSeconds * 20) / 100) * 1000 - jitterMs;
}

export class TokenManager implements TokenSource {
  private readonly cache = new Map<string, { issued: IssuedToken; spec: TokenRequestSpec }>();

  constructor(private readonly opts: { request: RequestToken; clock: Clock; random?: () => number }) {}

  async token(spec: TokenRequestSpec): Promise<string> {
    const key = keyOf(spec);
    const cached = this.cache.get(key);
    const jitter = Math.floor((this.opts.random ?? Math.random)() * MAX_JITTER_SECONDS) * 1000;
    if (cached && !requiresRefresh(this.opts.clock.now(), cached.issued, spec.expirationSeconds, jitter)) return cached.issued.token;
    try {
      const issued = await this.opts.request(spec);
      this.cache.set(key, { issued, spec });
      return issued.token;
    } catch (err) {
      // Upstream keeps serving a cached token that has not expired yet when the refresh fails.
      if (cached && cached.issued.expiresAt > this.opts.clock.now()) return cached.issued.token;
      throw err;
    }
  }

  forgetPod(uid: string): void {
    for (const [key, entry] of this.cache) if (entry.spec.pod.uid === uid) this.cache.delete(key);
  }
}
