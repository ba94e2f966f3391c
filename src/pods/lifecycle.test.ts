import { describe, expect, test } from "bun:test";
import { initialLifecycle, transition, type PodLifecycle } from "./lifecycle.ts";

describe("pod lifecycle", () => {
  test("deleted pod: syncing → terminating → terminated → finished", () => {
    let s: PodLifecycle = initialLifecycle;
    s = transition(s, { type: "deleted", gracePeriodSeconds: 30 });
    expect(s).toEqual({ stage: "terminating", gracePeriodSeconds: 30, reason: "deleted", deleted: true });
    s = transition(s, { type: "killed" });
    expect(s).toEqual({ stage: "terminated", deleted: true });
    s = transition(s, { type: "cleanedUp" });
    expect(s).toEqual({ stage: "finished" });
  });

  test("completed pod stays terminated until deleted", () => {
    let s: PodLifecycle = transition(initialLifecycle, { type: "completed", gracePeriodSeconds: 30 });
    s = transition(s, { type: "killed" });
    expect(transition(s, { type: "cleanedUp" })).toEqual({ stage: "terminated", deleted: false });
    s = transition(s, { type: "deleted", gracePeriodSeconds: 0 });
    expect(transition(s, { type: "cleanedUp" })).toEqual({ stage: "finished" });
  });

  test("a later delete can only shorten the grace period", () => {
    const s = transition(initialLifecycle, { type: "completed", gracePeriodSeconds: 30 });
    expect(transition(s, { type: "deleted", gracePeriodSeconds: 5 })).toMatchObject({ gracePeriodSeconds: 5, deleted: true });
    expect(transition(s, { type: "deleted", gracePeriodSeconds: 60 })).toMatchObject({ gracePeriodSeconds: 30 });
  });

  test("events that do not apply leave the stage alone", () => {
    expect(transition(initialLifecycle, { type: "killed" })).toBe(initialLifecycle);
    const finished: PodLifecycle = { stage: "finished" };
    expect(transition(finished, { type: "deleted", gracePeriodSeconds: 1 })).toBe(finished);
  });

  test("an evicted pod terminates with its message and is kept until deleted", () => {
    let s: PodLifecycle = transition(initialLifecycle, { type: "evicted", gracePeriodSeconds: 0, message: "The node was low on resource: memory." });
    expect(s).toEqual({ stage: "terminating", gracePeriodSeconds: 0, reason: "evicted", deleted: false, message: "The node was low on resource: memory." });
    s = transition(s, { type: "killed" });
    expect(s).toEqual({ stage: "terminated", deleted: false });
  });
});
