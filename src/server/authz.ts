/**
 * Authorization for the kubelet API (10250), after upstream's
 * pkg/kubelet/server/auth.go (nodeAuthorizerAttributesGetter) and the
 * InstallAuthFilter in server.go.
 *
 * Every request maps to attributes on the Node object:
 * `{ verb: <from the HTTP method>, resource: nodes, name: <node>, subresource }`
 * where the subresource comes from the path (see `requestAttributes`). With
 * KubeletFineGrainedAuthz (on by default, as upstream 1.33+), `/pods`,
 * `/runningpods`, `/healthz` and `/configz` are tried with their own
 * subresource first and then with `proxy`; any allowed attribute lets the
 * request through. Denied: 403 `Forbidden (user=..., verb=..., resource=nodes,
 * subresource(s)=[pods proxy])` plus a newline, every subresource tried, as
 * upstream's InstallAuthFilter writes it; an authorizer error: 500
 * `Authorization error (...)`.
 */
import type { MiddlewareHandler } from "hono";
import type { Logger } from "../util/log.ts";
import { errorMessage } from "../util/errors.ts";
import type { KubeletEnv, UserInfo } from "./authn.ts";

export interface AuthzAttributes {
  user: UserInfo;
  verb: string;
  namespace: "";
  apiGroup: "";
  apiVersion: "v1";
  resource: "nodes";
  subresource: string;
  name: string;
  resourceRequest: true;
  path: string;
}

export interface AuthzDecision {
  allowed: boolean;
  reason?: string;
}

/** POST /apis/authorization.k8s.io/v1/subjectaccessreviews, as the agent's API client does it. */
export type SubjectAccessReview = (attrs: AuthzAttributes) => Promise<AuthzDecision>;

export interface Authorizer {
  authorize(attrs: AuthzAttributes): Promise<AuthzDecision>;
}

export const DEFAULT_AUTHORIZED_TTL_MS = 5 * 60_000;
export const DEFAULT_UNAUTHORIZED_TTL_MS = 30_000;

/** authorization.mode AlwaysAllow */
export function alwaysAllow(): Authorizer {
  return { authorize: async () => ({ allowed: true }) };
}

/**
 * authorization.mode Webhook: SubjectAccessReview, decisions cached by their
 * attributes (`cacheAuthorizedTTL` 5m, `cacheUnauthorizedTTL` 30s); errors
 * are not cached.
 */
export function webhookAuthorizer(opts: {
  subjectAccessReview: SubjectAccessReview;
  cacheAuthorizedTTLMs?: number;
  cacheUnauthorizedTTLMs?: number;
  now?: () => number;
}): Authorizer {
  const okTTL = opts.cacheAuthorizedTTLMs ?? DEFAULT_AUTHORIZED_TTL_MS;
  const denyTTL = opts.cacheUnauthorizedTTLMs ?? DEFAULT_UNAUTHORIZED_TTL_MS;
  const now = opts.now ?? Date.now;
  const cache = new Map<string, { expires: number; decision: AuthzDecision }>();
  return {
    async authorize(attrs) {
      const { user, path: _path, ...rest } = attrs;
      // The path does not change the decision for resource requests; leave it out of the key.
      const key = JSON.stringify([user.username, user.uid ?? "", [...user.groups].sort(), rest]);
      const t = now();
      const hit = cache.get(key);
      if (hit && t < hit.expires) return hit.decision;
      if (hit) cache.delete(key);
      const decision = await opts.subjectAccessReview(attrs);
      const ttl = decision.allowed ? okTTL : denyTTL;
      if (ttl > 0) {
        if (cache.size > 4096) for (const [k, v] of cache) if (t >= v.expires) cache.delete(k);
        cache.set(key, { expires: now() + ttl, decision });
      }
      return decision;
    },
  };
}

const VERBS: Record<string, string> = { POST: "create", GET: "get", PUT: "update", PATCH: "patch", DELETE: "delete" };

/** Upstream isSubpath: `path` itself or anything below it. */
export function isSubpath(subpath: string, path: string): boolean {
  const p = path.endsWith("/") ? path.slice(0, -1) : path;
  return subpath === p || (subpath.startsWith(p) && subpath[p.length] === "/");
}

/** The attributes to try for one request, most specific first. */
export function requestAttributes(nodeName: string, user: UserInfo, method: string, path: string, fineGrained = true): AuthzAttributes[] {
  const attr = (subresource: string): AuthzAttributes => ({
    user,
    verb: VERBS[method.toUpperCase()] ?? "",
    namespace: "",
    apiGroup: "",
    apiVersion: "v1",
    resource: "nodes",
    subresource,
    name: nodeName,
    resourceRequest: true,
    path,
  });
  const single: [string, string][] = [
    ["/stats/", "stats"],
    ["/metrics", "metrics"],
    ["/logs/", "log"],
    ["/spec/", "spec"],
    ["/checkpoint", "checkpoint"],
  ];
  for (const [prefix, sub] of single) if (isSubpath(path, prefix)) return [attr(sub)];
  const withProxy: [string, string][] = [
    ["/pods", "pods"],
    ["/runningpods", "pods"],
    ["/healthz", "healthz"],
    ["/configz", "configz"],
  ];
  for (const [prefix, sub] of withProxy) {
    if (isSubpath(path, prefix)) return fineGrained ? [attr(sub), attr("proxy")] : [attr("proxy")];
  }
  return [attr("proxy")];
}

const describe = (a: AuthzAttributes) => `(user=${a.user.username}, verb=${a.verb}, resource=${a.resource}, subresource=${a.subresource})`;

/** The outcome of authorizing one request: through, or the status and upstream's message to answer with. */
export type AccessDecision = { allowed: true } | { allowed: false; status: 403 | 500; message: string };

export interface AccessCheckOptions {
  nodeName: string;
  authorizer: Authorizer;
  fineGrained?: boolean;
  logger?: Logger;
}

/**
 * Authorizes `method path` for `user`: allowed when any of its attributes is.
 * Shared by the middleware and the streaming upgrade path (exec, attach,
 * portForward), which runs outside Hono.
 */
export function accessChecker(opts: AccessCheckOptions): (user: UserInfo, method: string, path: string) => Promise<AccessDecision> {
  const log = opts.logger?.with({ component: "kubeletAuthz" });
  return async (user, method, path) => {
    const attrs = requestAttributes(opts.nodeName, user, method, path, opts.fineGrained ?? true);
    let last = attrs[0]!;
    for (const a of attrs) {
      last = a;
      let decision: AuthzDecision;
      try {
        decision = await opts.authorizer.authorize(a);
      } catch (err) {
        const message = `Authorization error ${describe(a)}`;
        log?.error(message, { err: errorMessage(err) });
        return { allowed: false, status: 500, message };
      }
      if (decision.allowed) return { allowed: true };
    }
    // Upstream's message names every subresource tried, as Go prints a []string.
    const message = `Forbidden (user=${user.username}, verb=${last.verb}, resource=${last.resource}, subresource(s)=[${attrs.map((a) => a.subresource).join(" ")}])\n`;
    log?.v(2).info(message);
    return { allowed: false, status: 403, message };
  };
}

/** Hono middleware, after `authentication`: lets the request through when any of its attributes is allowed. */
export function authorization(opts: AccessCheckOptions): MiddlewareHandler<KubeletEnv> {
  return authorizeWith(accessChecker(opts));
}

/** The same middleware around an existing checker, so the streaming upgrade path shares its decision cache. */
export function authorizeWith(check: (user: UserInfo, method: string, path: string) => Promise<AccessDecision>): MiddlewareHandler<KubeletEnv> {
  return async (c, next) => {
    const user = c.get("user");
    if (!user) return c.text("Unauthorized", 401);
    const decision = await check(user, c.req.method, c.req.path);
    if (!decision.allowed) return c.text(decision.message, decision.status);
    await next();
  };
}
