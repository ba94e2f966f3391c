import { describe, expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { podsFromBody, UrlSource } from "./url.ts";
import type { SourceSnapshot } from "./types.ts";

const pod = (name: string) => ({ apiVersion: "v1", kind: "Pod", metadata: { name }, spec: { containers: [{ name: "c", image: "busybox" }] } });
const opts = { url: "http://config.example/pods", nodeName: "n1" };

describe("podsFromBody", () => {
  test("a Pod or a PodList, in JSON or YAML, with static pod defaults from the URL", () => {
    const one = podsFromBody(JSON.stringify(pod("a")), opts);
    expect(one.ok && one.pods.map((p) => [p.metadata.name, p.metadata.annotations?.["kubernetes.io/config.source"]])).toEqual([["a-n1", "http"]]);
    const list = podsFromBody(`kind: PodList\napiVersion: v1\nitems:\n- ${JSON.stringify(pod("a"))}\n- ${JSON.stringify(pod("b"))}\n`, opts);
    expect(list.ok && list.pods.map((p) => p.metadata.name)).toEqual(["a-n1", "b-n1"]);
  });

  test("errors name the item and field", () => {
    const bad = { kind: "PodList", items: [pod("a"), { metadata: { name: "b" }, spec: { containers: [{ name: "c" }] } }] };
    expect(podsFromBody(JSON.stringify(bad), opts)).toEqual({ ok: false, error: 'items[1]: field "spec.containers[0].image": is required' });
    expect(podsFromBody("{nope", opts)).toMatchObject({ ok: false, error: expect.stringContaining("invalid JSON") });
  });

  test("a PodList whose items are not a list is an error, not an empty set", () => {
    expect(podsFromBody(JSON.stringify({ kind: "PodList", items: "x" }), opts)).toEqual({ ok: false, error: 'field "items": expected a list of Pods' });
    expect(podsFromBody(JSON.stringify({ kind: "PodList", items: null }), opts)).toEqual({ ok: true, pods: [], uidNotes: [] });
    expect(podsFromBody(JSON.stringify({ kind: "PodList" }), opts)).toEqual({ ok: true, pods: [], uidNotes: [] });
  });
});

describe("UrlSource", () => {
  test("polls every httpCheckFrequency with the headers; a failed fetch keeps the last good set", async () => {
    const clock = new FakeClock();
    const { logger, lines } = memoryLogger();
    let body = JSON.stringify(pod("a"));
    let status = 200;
    const seenHeaders: (string | null)[] = [];
    const fakeFetch = (async (_url: string, init: RequestInit) => {
      seenHeaders.push(new Headers(init.headers).get("x-token"));
      return new Response(body, { status });
    }) as unknown as typeof fetch;
    const snapshots: SourceSnapshot[] = [];
    await using source = new UrlSource({ ...opts, headers: { "X-Token": ["t1"] }, checkFrequencyMs: 20_000, clock, logger, fetch: fakeFetch });
    source.start((s) => snapshots.push(s));
    await Bun.sleep(0);
    expect(snapshots.map((s) => s.pods.map((p) => p.metadata.name))).toEqual([["a-n1"]]);
    status = 500;
    clock.advance(20_000);
    await Bun.sleep(0);
    expect(snapshots).toHaveLength(1);
    expect(lines.some((l) => l.includes("HTTP 500"))).toBe(true);
    status = 200;
    body = JSON.stringify({ kind: "PodList", items: [pod("b")] });
    clock.advance(20_000);
    await Bun.sleep(0);
    expect(snapshots.at(-1)!.pods.map((p) => p.metadata.name)).toEqual(["b-n1"]);
    expect(seenHeaders).toEqual(["t1", "t1", "t1"]);
  });
});
