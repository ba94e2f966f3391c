/**
 * Authentication for the kubelet API (10250), after upstream's delegating
 * authenticator (k8s.io/apiserver authenticatorfactory, as the kubelet
 * builds it in BuildAuth):
 *   - x509: a client certificate that verified against
 *     `authentication.x509.clientCAFile` (the TLS layer checks the chain,
 *     `socket.authorized`) → user = subject CN, groups = subject O. A
 *     certificate that is presented but does not verify is an error (401),
 *     as upstream's x509 authenticator;
 *   - bearer token: `Authorization: Bearer <t>` → TokenReview through the
 *     injected `tokenReview`, results (authenticated or not) cached for
 *     `authentication.webhook.cacheTTL` (default 2m); a token the review
 *     rejects is an error (401), not a fall-through to anonymous;
 *   - anonymous (`system:anonymous`, group `system:unauthenticated`) only
 *     when `authentication.anonymous.enabled` and nothing above applied.
 * Authenticated users get the `system:authenticated` group (upstream's
 * AuthenticatedGroupAdder). Otherwise: 401 `Unauthorized`.
 */
import { createHash } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import type { Logger } from "../util/log.ts";
import { errorMessage } from "../util/errors.ts";

export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
}

export interface TokenReviewResult {
  authenticated: boolean;
  user?: { username: string; uid?: string; groups?: string[] };
}

/** POST /apis/authentication.k8s.io/v1/tokenreviews, as the agent's API client does it. */
export type TokenReview = (token: string) => Promise<TokenReviewResult>;

/** The subset of node's PeerCertificate that authentication reads. */
export interface PeerCertificateLike {
  subject?: Record<string, string | string[] | undefined>;
  ext_key_usage?: string[];
}

/** The subset of the TLS socket (c.env.incoming.socket) that authentication reads. */
export interface PeerSocket {
  authorized?: boolean;
  authorizationError?: Error | string | null;
  getPeerCertificate?(detailed?: boolean): PeerCertificateLike | Record<string, never> | null;
}

/** Hono env of the 10250 app: the raw request (from serveTls) and the authenticated user. */
export interface KubeletEnv {
  Bindings: { incoming?: { socket?: PeerSocket } };
  Variables: { user: UserInfo };
}

export const ANONYMOUS_USER = "system:anonymous";
export const UNAUTHENTICATED_GROUP = "system:unauthenticated";
export const AUTHENTICATED_GROUP = "system:authenticated";
export const DEFAULT_TOKEN_CACHE_TTL_MS = 2 * 60_000;

export interface AuthenticationOptions {
  /** authentication.x509.clientCAFile is set (and given to serveTls as clientCA). */
  x509: boolean;
  /** authentication.webhook.enabled: TokenReview for bearer tokens. */
  tokenReview?: TokenReview;
  /** authentication.webhook.cacheTTL in ms (default 2m); 0 disables the cache. */
  cacheTTLMs?: number;
  /** authentication.anonymous.enabled */
  anonymous: boolean;
  now?: () => number;
  logger?: Logger;
}

export class AuthenticationError extends Error {}

const CLIENT_AUTH_EKU = "1.3.6.1.5.5.7.3.2";
const ANY_EKU = "2.5.29.37.0";

const lastOf = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[v.length - 1] : v);
const allOf = (v: string | string[] | undefined): string[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

/** x509: undefined when no certificate was presented or it names no user; throws when it did not verify. */
export function userFromCertificate(socket: PeerSocket | undefined): UserInfo | undefined {
  const cert = socket?.getPeerCertificate?.(false);
  if (!cert || !("subject" in cert) || !cert.subject) return undefined;
  if (!socket?.authorized) {
    const why = socket?.authorizationError;
    throw new AuthenticationError(`verifying certificate: ${why ? String(why instanceof Error ? why.message : why) : "unknown authority"}`);
  }
  const eku = cert.ext_key_usage;
  if (eku?.length && !eku.includes(CLIENT_AUTH_EKU) && !eku.includes(ANY_EKU)) {
    throw new AuthenticationError("verifying certificate: incompatible key usage");
  }
  const cn = lastOf(cert.subject.CN);
  if (!cn) return undefined;
  return { username: cn, groups: allOf(cert.subject.O) };
}

/** `Bearer <token>` (scheme case-insensitive) or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const parts = header.trim().split(/\s+/);
  if (parts.length < 2 || parts[0]!.toLowerCase() !== "bearer" || !parts[1]) return undefined;
  return parts[1];
}

/** TokenReview with upstream's token cache: results kept for `ttlMs`, errors not kept, concurrent reviews of one token shared. */
export function cachedTokenReview(review: TokenReview, ttlMs: number, now: () => number = Date.now): TokenReview {
  const cache = new Map<string, { at: number; result: TokenReviewResult }>();
  const inflight = new Map<string, Promise<TokenReviewResult>>();
  return async (token) => {
    const key = createHash("sha256").update(token).digest("hex");
    const hit = cache.get(key);
    const t = now();
    if (hit && t - hit.at < ttlMs) return hit.result;
    if (hit) cache.delete(key);
    let p = inflight.get(key);
    if (!p) {
      p = review(token).then((result) => {
        if (ttlMs > 0) {
          // Drop expired entries now and then, so the cache stays bounded by the live tokens.
          if (cache.size > 4096) for (const [k, v] of cache) if (t - v.at >= ttlMs) cache.delete(k);
          cache.set(key, { at: now(), result });
        }
        return result;
      });
      inflight.set(key, p);
      p.then(
        () => inflight.delete(key),
        () => inflight.delete(key),
      );
    }
    return p;
  };
}

function withAuthenticatedGroup(u: UserInfo): UserInfo {
  return u.groups.includes(AUTHENTICATED_GROUP) ? u : { ...u, groups: [...u.groups, AUTHENTICATED_GROUP] };
}

/** Who the request is: a user, undefined (no credentials), or throws AuthenticationError (bad credentials). */
export type Authenticate = (req: { socket: PeerSocket | undefined; authorization: string | undefined }) => Promise<UserInfo | undefined>;

export function createAuthenticator(opts: AuthenticationOptions): Authenticate {
  const review = opts.tokenReview ? cachedTokenReview(opts.tokenReview, opts.cacheTTLMs ?? DEFAULT_TOKEN_CACHE_TTL_MS, opts.now) : undefined;
  return async ({ socket, authorization }) => {
    // Union of x509 and token: the first that knows the user wins; errors count only if none did.
    const errors: string[] = [];
    if (opts.x509) {
      try {
        const u = userFromCertificate(socket);
        if (u) return withAuthenticatedGroup(u);
      } catch (err) {
        errors.push(errorMessage(err));
      }
    }
    const token = review ? bearerToken(authorization) : undefined;
    if (review && token !== undefined) {
      try {
        const r = await review(token);
        if (r.authenticated && r.user?.username) {
          return withAuthenticatedGroup({ username: r.user.username, groups: r.user.groups ?? [], ...(r.user.uid ? { uid: r.user.uid } : {}) });
        }
        errors.push("invalid bearer token");
      } catch (err) {
        errors.push(`token review: ${errorMessage(err)}`);
      }
    }
    if (errors.length) throw new AuthenticationError(errors.join(", "));
    if (opts.anonymous) return { username: ANONYMOUS_USER, groups: [UNAUTHENTICATED_GROUP] };
    return undefined;
  };
}

/** Hono middleware: sets `c.var.user` or answers 401 `Unauthorized` (upstream's body). */
export function authentication(opts: AuthenticationOptions): MiddlewareHandler<KubeletEnv> {
  return authenticateWith(createAuthenticator(opts), opts.logger);
}

/** The same middleware around an existing authenticator, so the streaming upgrade path shares its token cache. */
export function authenticateWith(authenticate: Authenticate, logger?: Logger): MiddlewareHandler<KubeletEnv> {
  const log = logger?.with({ component: "kubeletAuthn" });
  return async (c, next) => {
    let user: UserInfo | undefined;
    try {
      user = await authenticate({ socket: c.env?.incoming?.socket, authorization: c.req.header("authorization") });
    } catch (err) {
      log?.v(2).info("unable to authenticate the request", { err: errorMessage(err), path: c.req.path });
    }
    if (!user) return c.text("Unauthorized", 401);
    c.set("user", user);
    await next();
  };
}
