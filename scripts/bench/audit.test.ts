import { expect, test } from "bun:test";
import { apiLoad, parseAudit } from "./audit.ts";

const ev = (auditID: string, stage: string, verb: string, user: string, at: string, resource?: string, subresource?: string) =>
  JSON.stringify({
    auditID,
    stage,
    verb,
    user: { username: user },
    userAgent: `${user}-agent`,
    ...(resource ? { objectRef: { resource, ...(subresource ? { subresource } : {}) } } : {}),
    stageTimestamp: `2026-11-24T17:00:${at}Z`,
  });

const log = [
  ev("w0", "ResponseStarted", "watch", "system:node:a", "01", "pods"), // before the window: open, not counted
  ev("u1", "ResponseComplete", "update", "system:node:a", "11", "leases"),
  ev("u2", "ResponseComplete", "update", "system:node:b", "12", "leases"),
  ev("p1", "ResponseComplete", "patch", "system:node:b", "13", "nodes", "status"),
  ev("w1", "ResponseStarted", "watch", "system:node:b", "14", "services"),
  ev("w1", "ResponseComplete", "watch", "system:node:b", "15", "services"), // ended: not open, counted once
  ev("w2", "ResponseStarted", "watch", "system:node:a", "16", "configmaps"), // open at the end
  ev("c1", "ResponseComplete", "list", "system:kube-controller-manager", "17", "nodes"), // another user
  ev("u3", "ResponseComplete", "update", "system:node:a", "40", "leases"), // after the window
].join("\n");

test("requests of the wanted users in the window, by verb and resource and by user; watches counted once, open ones at the end", () => {
  const t0 = Date.parse("2026-11-24T17:00:10Z");
  const t1 = Date.parse("2026-11-24T17:00:30Z");
  const load = apiLoad(parseAudit(log), (u) => u.startsWith("system:node:"), t0, t1);
  expect(load.requests).toEqual(
    new Map([
      ["update leases", 2],
      ["patch nodes/status", 1],
      ["watch services", 1],
      ["watch configmaps", 1],
    ]),
  );
  expect(load.byUser.get("system:node:a")).toEqual(
    new Map([
      ["update leases", 1],
      ["watch configmaps", 1],
    ]),
  );
  expect(load.byUser.get("system:node:b")?.get("update leases")).toBe(1);
  expect(load.byUser.has("system:kube-controller-manager")).toBe(false);
  expect(load.watchesOpenAtEnd).toBe(2); // w0 and w2
  expect(load.userAgent).toBe("system:node:a-agent");
  expect(apiLoad(parseAudit(log), (u) => u === "system:node:b", t0, t1).watchesOpenAtEnd).toBe(0);
});
