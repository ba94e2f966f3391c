import { expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import type { ApiObject } from "./index.ts";
import { reflect } from "./reflector.ts";
import type { WatchEvent } from "./rest.ts";

const obj = (name: string, rv: string): ApiObject => ({ metadata: { name, resourceVersion: rv } });
const settle = async () => {
  for (let i = 0; i < 20; i++) await Bun.sleep(0);
};

test("list, watch from the list's version, resume after a watch ends, relist on ERROR, back off after failures", async () => {
  const clock = new FakeClock();
  const abort = new AbortController();
  const log: string[] = [];
  const watches: string[] = [];
  let lists = 0;
  // Scripted watches: the events each sends before it ends, or a failure.
  const script: (WatchEvent<ApiObject>[] | Error)[] = [
    [
      { type: "ADDED", object: obj("a", "11") },
      { type: "BOOKMARK", object: obj("", "12") },
    ],
    [{ type: "ERROR", object: {} }],
    new Error("apiserver down"),
    [{ type: "DELETED", object: obj("a", "31") }],
  ];
  const failures: number[] = [];
  const done = reflect({
    list: async () => {
      lists++;
      return { items: [obj(`l${lists}`, `${lists}0`)], resourceVersion: `${lists}0` };
    },
    watch: async (rv, onEvent) => {
      watches.push(rv);
      const next = script.shift();
      if (!next) return new Promise<void>(() => {}); // the last watch stays open
      if (next instanceof Error) throw next;
      for (const e of next) onEvent(e);
    },
    onList: (items) => log.push(`list ${items.map((i) => i.metadata?.name).join(",")}`),
    onEvent: (e) => log.push(`${e.type} ${e.object.metadata?.name}`),
    onFailure: (err, n) => (failures.push(n), log.push(`failed: ${(err as Error).message}`), 5000),
    clock,
    signal: abort.signal,
  });
  await settle();
  // Watch 1 from the list's version; it ends after a bookmark, so watch 2 resumes from 12; its ERROR relists;
  // the watch from that list fails: the failure waits 5 s, then a new list.
  expect(watches).toEqual(["10", "12", "20"]);
  expect(log).toEqual(["list l1", "ADDED a", "list l2", "failed: apiserver down"]);
  clock.advance(4999);
  await settle();
  expect(lists).toBe(2);
  clock.advance(1);
  await settle();
  expect(log.slice(4)).toEqual(["list l3", "DELETED a"]);
  expect(watches).toEqual(["10", "12", "20", "30", "31"]);
  expect(failures).toEqual([0]);
  abort.abort();
  clock.advance(0);
  await Promise.race([done, Bun.sleep(50)]);
});
