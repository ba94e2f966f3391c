// The API server's audit log (level Metadata), read by the idle and scale
// benches (scripts/bench/idle.ts, scale.ts) for what apiserver_request_total
// cannot say: which client sent a request (the metric has had no user or
// user-agent label since Kubernetes 1.17).
import { readFileSync } from "node:fs";

export interface AuditEvent {
  auditID: string;
  stage: string;
  verb: string;
  user: { username: string };
  userAgent?: string;
  objectRef?: { resource?: string; subresource?: string };
  stageTimestamp: string;
}

/** The events of a JSON-lines audit log; none when the file does not exist yet. */
export function readAudit(file: string): AuditEvent[] {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  return parseAudit(text);
}

export function parseAudit(text: string): AuditEvent[] {
  return text
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as AuditEvent);
}

export interface ApiLoad {
  /** "verb resource[/subresource]" → requests in the window (watches counted when they start). */
  requests: Map<string, number>;
  /** user → requests in the window (watches counted when they start). */
  byUser: Map<string, Map<string, number>>;
  /** Watches started up to the window's end and not completed by then. */
  watchesOpenAtEnd: number;
  /** The first user agent seen in the window. */
  userAgent: string;
}

/**
 * The requests of the users `user` accepts whose time falls in [t0, t1] (ms):
 * a watch counts when its response starts, any other request when it
 * completes (so one long-running request is not counted twice).
 */
export function apiLoad(events: readonly AuditEvent[], user: (name: string) => boolean, t0: number, t1: number): ApiLoad {
  const requests = new Map<string, number>();
  const byUser = new Map<string, Map<string, number>>();
  const started = new Set<string>();
  const completed = new Set<string>();
  let userAgent = "";
  for (const e of events) {
    if (!user(e.user.username)) continue;
    const t = Date.parse(e.stageTimestamp);
    if (t > t1) continue;
    if (e.verb === "watch") {
      if (e.stage === "ResponseStarted") started.add(e.auditID);
      if (e.stage === "ResponseComplete") completed.add(e.auditID);
    }
    const counts = e.verb === "watch" ? e.stage === "ResponseStarted" : e.stage === "ResponseComplete";
    if (!counts || t < t0) continue;
    userAgent ||= e.userAgent ?? "";
    const key = `${e.verb} ${e.objectRef?.resource ?? "(none)"}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ""}`;
    requests.set(key, (requests.get(key) ?? 0) + 1);
    let mine = byUser.get(e.user.username);
    if (!mine) byUser.set(e.user.username, (mine = new Map()));
    mine.set(key, (mine.get(key) ?? 0) + 1);
  }
  let open = 0;
  for (const id of started) if (!completed.has(id)) open++;
  return { requests, byUser, watchesOpenAtEnd: open, userAgent };
}
