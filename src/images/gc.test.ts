import { describe, expect, test } from "bun:test";
import { tmpdir } from "node:os";
import { FakeCri } from "../cri/fake.ts";
import type { EventRecorder, EventType, ObjectRef } from "../events/recorder.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { createImageGC, IMAGE_GC_PERIOD_MS, type ImageGCOptions, statfsBytes } from "./gc.ts";

const MiB = 1024 * 1024;
const MIN = 60_000;
const PAUSE = "localhost/bunlet/pause:1.0";

class Events implements EventRecorder {
  readonly seen: { object: ObjectRef; type: EventType; reason: string; message: string }[] = [];
  event(object: ObjectRef, type: EventType, reason: string, message: string): void {
    this.seen.push({ object, type, reason, message });
  }
  reasons() {
    return this.seen.map((e) => e.reason);
  }
}

/**
 * A FakeCri and an image filesystem whose usage follows the images present:
 * used = `otherBytes` + the sizes of the images the fake holds.
 */
function setup(over: Partial<ImageGCOptions> = {}, fs = { capacity: 100 * MiB, otherBytes: 0 }) {
  const clock = new FakeClock();
  const cri = new FakeCri({ clock, images: [PAUSE] });
  const events = new Events();
  const statfsCalls: string[] = [];
  const statfs = (path: string) => {
    statfsCalls.push(path);
    let used = fs.otherBytes;
    for (const [, size] of sizes) used += size;
    return { capacityBytes: fs.capacity, availableBytes: fs.capacity - used };
  };
  // Sizes of the images the fake holds, by id (the fake does not expose its map).
  const sizes = new Map<string, number>();
  const add = (ref: string, size: number) => {
    const id = cri.addImage(ref, size);
    sizes.set(id, size);
    return id;
  };
  const gc = createImageGC({
    cri: {
      listImages: (f) => cri.listImages(f),
      listContainers: (f) => cri.listContainers(f),
      imageFsInfo: () => cri.imageFsInfo(),
      removeImage: async (spec) => {
        await cri.removeImage(spec);
        sizes.delete(spec.image!);
      },
    },
    highThresholdPercent: 85,
    lowThresholdPercent: 80,
    minimumAgeMs: 2 * MIN,
    pauseImage: PAUSE,
    statfs,
    clock,
    logger: memoryLogger().logger,
    recorder: events,
    nodeName: "n1",
    ...over,
  });
  sizes.set(cri.addImage(PAUSE), MiB);
  let pods = 0;
  /** A container (in its own sandbox) from `image`; running unless told otherwise. */
  const run = async (image: string, state: "running" | "exited" | "created" = "running") => {
    const name = `p${++pods}`;
    const config = { metadata: { name, namespace: "default", uid: `uid-${name}`, attempt: 0 } };
    const sandbox = await cri.runPodSandbox(config);
    const id = await cri.createContainer(sandbox, { metadata: { name: "c" }, image: { image } }, config);
    if (state !== "created") await cri.startContainer(id);
    if (state === "exited") cri.exitContainer(id, 0);
    return { sandbox, id };
  };
  const removed = () => cri.callsOf("removeImage").map(([spec]) => (spec as { image: string }).image);
  return { clock, cri, gc, events, add, run, removed, statfsCalls, fs, sizes };
}

describe("image GC: garbageCollect", () => {
  test("below the high threshold nothing is removed", async () => {
    const t = setup({}, { capacity: 100 * MiB, otherBytes: 70 * MiB });
    t.add("old:1", 10 * MiB);
    await t.gc.detectImages();
    t.clock.advance(10 * MIN);
    await t.gc.garbageCollect(); // 81% used
    expect(t.removed()).toEqual([]);
    expect(t.statfsCalls).toEqual(["/fake/images"]);
  });

  test("at the high threshold, frees down to the low one, least recently used first, and stops there", async () => {
    // 100 MiB disk: 56 other + pause 1 + three 10 MiB images = 87% ≥ 85%.
    // Low 80%: free 100*20/100 - 13 = 7 MiB, so one image is enough.
    const t = setup({}, { capacity: 100 * MiB, otherBytes: 56 * MiB });
    const a = t.add("a:1", 10 * MiB);
    await t.gc.detectImages();
    t.clock.advance(MIN);
    const b = t.add("b:1", 10 * MiB);
    const c = t.add("c:1", 10 * MiB);
    await t.gc.detectImages();
    t.clock.advance(10 * MIN);
    await t.gc.garbageCollect();
    expect(t.removed()).toEqual([a]);
    expect(t.sizes.has(b) && t.sizes.has(c)).toBe(true);
    expect(t.events.seen).toEqual([]);
  });

  test("threshold 100 disables collection: nothing is listed, measured or removed, even on a full disk", async () => {
    const t = setup({ highThresholdPercent: 100, lowThresholdPercent: 90 }, { capacity: 100 * MiB, otherBytes: 90 * MiB });
    t.add("old:1", 9 * MiB);
    t.clock.advance(60 * MIN);
    await t.gc.garbageCollect();
    expect(t.cri.calls).toEqual([]);
    expect(t.statfsCalls).toEqual([]);
  });

  test("threshold 100 with a maximum age still collects by age", async () => {
    const t = setup({ highThresholdPercent: 100, lowThresholdPercent: 90, maximumAgeMs: 30 * MIN });
    const old = t.add("old:1", MiB);
    await t.gc.detectImages();
    t.clock.advance(31 * MIN);
    await t.gc.garbageCollect();
    expect(t.removed()).toEqual([old]);
  });

  test("images used by any container, running, created or exited, and the pause image are never removed", async () => {
    const t = setup({}, { capacity: 100 * MiB, otherBytes: 60 * MiB });
    const running = t.add("running:1", 10 * MiB);
    const exited = t.add("exited:1", 10 * MiB);
    const created = t.add("created:1", 10 * MiB);
    const unused = t.add("unused:1", 5 * MiB);
    await t.run("running:1");
    await t.run("exited:1", "exited");
    await t.run("created:1", "created");
    await t.gc.detectImages();
    t.clock.advance(60 * MIN);
    // 96% used; low 80% wants 20 MiB + 16 MiB back, only 5 MiB are eligible.
    const err = await t.gc.garbageCollect().catch((e: Error) => e);
    expect(t.removed()).toEqual([unused]);
    for (const id of [running, exited, created]) expect(t.sizes.has(id)).toBe(true);
    expect(t.cri.counts().images).toBe(4);
    expect((await t.cri.listImages()).some((i) => i.repoTags.includes(PAUSE))).toBe(true);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toContain("Attempted to free 16777216 bytes, but only found 5242880 bytes eligible to free");
    expect(t.events.seen).toEqual([{ object: { kind: "Node", name: "n1", uid: "n1" }, type: "Warning", reason: "FreeDiskSpaceFailed", message: (err as Error).message }]);
  });

  test("a pinned image is never removed", async () => {
    const t = setup({}, { capacity: 100 * MiB, otherBytes: 90 * MiB });
    t.add("pinned:1", MiB);
    const real = t.cri.listImages.bind(t.cri);
    t.cri.listImages = async (f) => (await real(f)).map((i) => ({ ...i, pinned: i.repoTags.includes("docker.io/library/pinned:1") }));
    await t.gc.detectImages();
    t.clock.advance(60 * MIN);
    await t.gc.garbageCollect().catch(() => {});
    expect(t.removed()).toEqual([]);
  });

  test("an image younger than the minimum age (since first detected) stays; later it goes", async () => {
    // 86% used; low 80% wants 6 MiB back.
    const t = setup({}, { capacity: 100 * MiB, otherBytes: 75 * MiB });
    const young = t.add("young:1", 10 * MiB);
    await t.gc.detectImages();
    t.clock.advance(2 * MIN - 1);
    await expect(t.gc.garbageCollect()).rejects.toThrow(/only found 0 bytes/);
    expect(t.removed()).toEqual([]);
    t.clock.advance(1);
    await t.gc.garbageCollect();
    expect(t.removed()).toEqual([young]);
  });

  test("an image seen first by the collection itself is young", async () => {
    const t = setup({}, { capacity: 100 * MiB, otherBytes: 85 * MiB });
    t.add("fresh:1", 5 * MiB);
    await t.gc.garbageCollect().catch(() => {});
    expect(t.removed()).toEqual([]);
  });

  test("an image that disappears is forgotten: when it comes back it is young again", async () => {
    const t = setup({}, { capacity: 100 * MiB, otherBytes: 85 * MiB });
    const id = t.add("flaky:1", 5 * MiB);
    await t.gc.detectImages();
    t.clock.advance(10 * MIN);
    await t.cri.removeImage({ image: id });
    t.sizes.delete(id);
    await t.gc.detectImages();
    t.add("flaky:1", 5 * MiB);
    await t.gc.garbageCollect().catch(() => {});
    expect(t.removed()).toEqual([id]); // only the test's own removal
  });

  test("an image last used long ago goes before one that was used recently", async () => {
    const t = setup({}, { capacity: 100 * MiB, otherBytes: 66 * MiB });
    const early = t.add("early:1", 10 * MiB);
    const late = t.add("late:1", 10 * MiB);
    const e = await t.run("early:1");
    const l = await t.run("late:1");
    await t.gc.detectImages();
    await t.cri.removePodSandbox(e.sandbox); // early: last used now
    t.clock.advance(10 * MIN);
    await t.gc.detectImages(); // late: last used 10 minutes later
    await t.cri.removePodSandbox(l.sandbox);
    t.clock.advance(10 * MIN);
    // 87% used; low 80%: 7 MiB to free, the first candidate is enough.
    await t.gc.garbageCollect();
    expect(t.removed()).toEqual([early]);
    expect(t.sizes.has(late)).toBe(true);
  });

  test("a never-used image counts as last active when first detected", async () => {
    // Differs from upstream, whose zero lastUsed puts every never-used image first.
    const t = setup({}, { capacity: 100 * MiB, otherBytes: 66 * MiB });
    const used = t.add("used:1", 10 * MiB);
    const { sandbox } = await t.run("used:1");
    await t.gc.detectImages(); // used: last active at 0
    await t.cri.removePodSandbox(sandbox);
    t.clock.advance(5 * MIN);
    const idle = t.add("idle:1", 10 * MiB);
    await t.gc.detectImages(); // idle: first detected at 5 min, never used
    t.clock.advance(10 * MIN);
    await t.gc.garbageCollect();
    expect(t.removed()).toEqual([used]);
    expect(t.sizes.has(idle)).toBe(true);
  });

  test("capacity 0 is an error and an InvalidDiskCapacity warning", async () => {
    const t = setup({}, { capacity: 0, otherBytes: 0 });
    await expect(t.gc.garbageCollect()).rejects.toThrow("invalid capacity 0 on image filesystem");
    expect(t.events.reasons()).toEqual(["InvalidDiskCapacity"]);
  });

  test("a failed removal is skipped, the others still go, and the pass reports the error", async () => {
    const t = setup({}, { capacity: 100 * MiB, otherBytes: 85 * MiB });
    t.add("a:1", 3 * MiB);
    const b = t.add("b:1", 3 * MiB);
    await t.gc.detectImages();
    t.clock.advance(10 * MIN);
    t.cri.failNext("removeImage", "Unknown", "disk is read-only");
    await expect(t.gc.garbageCollect()).rejects.toThrow(/errors in image deletion: .*disk is read-only/);
    expect(t.sizes.has(b)).toBe(false);
  });

  test("maximum age: unused images go once unused that long, but only after the manager has run that long", async () => {
    const t = setup({ maximumAgeMs: 60 * MIN });
    const stale = t.add("stale:1", MiB);
    const busy = t.add("busy:1", MiB);
    const { sandbox } = await t.run("busy:1");
    await t.gc.detectImages();
    t.clock.advance(50 * MIN);
    await t.gc.garbageCollect();
    expect(t.removed()).toEqual([]);
    t.clock.advance(11 * MIN);
    await t.gc.garbageCollect();
    expect(t.removed()).toEqual([stale]);
    // busy was in use until now; unused from here, it goes an hour later.
    await t.cri.removePodSandbox(sandbox);
    t.clock.advance(59 * MIN);
    await t.gc.garbageCollect();
    expect(t.removed()).toEqual([stale]);
    t.clock.advance(2 * MIN);
    await t.gc.garbageCollect();
    expect(t.removed()).toEqual([stale, busy]);
  });

  test("policy is checked at construction, as upstream", () => {
    expect(() => setup({ highThresholdPercent: 101 })).toThrow("invalid HighThresholdPercent 101");
    expect(() => setup({ lowThresholdPercent: -1 })).toThrow("invalid LowThresholdPercent -1");
    expect(() => setup({ highThresholdPercent: 50, lowThresholdPercent: 60 })).toThrow("LowThresholdPercent 60 can not be higher than HighThresholdPercent 50");
  });
});

describe("image GC: freeSpace (eviction)", () => {
  test("removes unused images least recently used first until enough is freed, and returns the bytes freed", async () => {
    const t = setup();
    const a = t.add("a:1", 3 * MiB);
    await t.gc.detectImages();
    t.clock.advance(MIN);
    const b = t.add("b:1", 4 * MiB);
    await t.gc.detectImages();
    t.clock.advance(MIN);
    t.add("c:1", 5 * MiB);
    await t.gc.detectImages();
    t.clock.advance(10 * MIN);
    expect(await t.gc.freeSpace(6 * MiB)).toBe(7 * MiB);
    expect(t.removed()).toEqual([a, b]);
  });

  test("Infinity removes every eligible image; in-use, pause and young ones stay", async () => {
    const t = setup();
    const a = t.add("a:1", MiB);
    const b = t.add("b:1", MiB);
    t.add("used:1", MiB);
    await t.run("used:1");
    await t.gc.detectImages();
    t.clock.advance(10 * MIN);
    t.add("young:1", MiB);
    expect(await t.gc.freeSpace(Infinity)).toBe(2 * MiB);
    expect(t.removed().sort()).toEqual([a, b].sort());
  });

  test("nothing to free asked: nothing removed", async () => {
    const t = setup();
    t.add("a:1", MiB);
    await t.gc.detectImages();
    t.clock.advance(10 * MIN);
    expect(await t.gc.freeSpace(0)).toBe(0);
    expect(t.removed()).toEqual([]);
  });

  test("a failed removal is skipped and not counted", async () => {
    const t = setup();
    const a = t.add("a:1", MiB);
    await t.gc.detectImages();
    t.clock.advance(MIN);
    const b = t.add("b:1", 2 * MiB);
    await t.gc.detectImages();
    t.clock.advance(10 * MIN);
    t.cri.failNext("removeImage", "Unknown");
    expect(await t.gc.freeSpace(MiB)).toBe(2 * MiB);
    expect(t.removed()).toEqual([a, b]);
    expect(t.sizes.has(a)).toBe(true);
  });

  test("works with collection disabled (threshold 100)", async () => {
    const t = setup({ highThresholdPercent: 100, lowThresholdPercent: 100 });
    const a = t.add("a:1", MiB);
    await t.gc.detectImages();
    t.clock.advance(10 * MIN);
    expect(await t.gc.freeSpace(1)).toBe(MiB);
    expect(t.removed()).toEqual([a]);
  });

  test("rejects when the runtime cannot be listed", async () => {
    const t = setup();
    t.cri.failNext("listImages", "Unavailable");
    await expect(t.gc.freeSpace(1)).rejects.toThrow();
  });
});

describe("image GC: start and dispose", () => {
  const settle = async () => {
    for (let i = 0; i < 20; i++) await Bun.sleep(0);
  };

  test("detects at once and every 5 minutes, collects every 5 minutes; a repeated failure is an ImageGCFailed event", async () => {
    const t = setup({}, { capacity: 100 * MiB, otherBytes: 0 });
    t.gc.start();
    await settle();
    expect(t.cri.callsOf("listImages").length).toBe(2); // detection + the first collection
    expect(t.statfsCalls.length).toBe(1);
    t.cri.failNext("imageFsInfo", "Unavailable");
    t.clock.advance(IMAGE_GC_PERIOD_MS);
    await settle();
    expect(t.events.reasons()).toEqual([]); // the first failure is only logged
    t.cri.failNext("imageFsInfo", "Unavailable");
    t.clock.advance(IMAGE_GC_PERIOD_MS);
    await settle();
    expect(t.events.reasons()).toEqual(["ImageGCFailed"]);
    expect(t.cri.callsOf("listImages").length).toBe(6);
    await t.gc[Symbol.asyncDispose]();
    expect(t.clock.pendingTimers()).toBe(0);
  });

  test("disabled: only detection runs", async () => {
    const t = setup({ highThresholdPercent: 100, lowThresholdPercent: 80 });
    t.gc.start();
    await settle();
    t.clock.advance(IMAGE_GC_PERIOD_MS);
    await settle();
    expect(t.cri.callsOf("listImages").length).toBe(2);
    expect(t.cri.callsOf("imageFsInfo").length).toBe(0);
    await t.gc[Symbol.asyncDispose]();
    expect(t.clock.pendingTimers()).toBe(0);
  });

  test("dispose waits for a pass in flight and schedules nothing after it", async () => {
    const t = setup();
    const release = t.cri.holdNext("listImages");
    t.gc.start();
    await settle();
    let disposed = false;
    const done = t.gc[Symbol.asyncDispose]().then(() => (disposed = true));
    await settle();
    expect(disposed).toBe(false);
    release();
    await done;
    expect(t.clock.pendingTimers()).toBe(0);
  });
});

test("on the fake runtime, the real statfs fails for the fake's default image filesystem and succeeds for a real directory (the hollow nodes')", async () => {
  const options = (cri: FakeCri): ImageGCOptions => ({
    cri,
    highThresholdPercent: 85,
    lowThresholdPercent: 80,
    minimumAgeMs: 0,
    statfs: statfsBytes,
    clock: new FakeClock(),
    logger: memoryLogger().logger,
  });
  await using missing = createImageGC(options(new FakeCri({ clock: new FakeClock() })));
  await expect(missing.garbageCollect()).rejects.toThrow("/fake/images");
  await using real = createImageGC(options(new FakeCri({ clock: new FakeClock(), imageFsMountpoint: tmpdir() })));
  await real.garbageCollect();
});
