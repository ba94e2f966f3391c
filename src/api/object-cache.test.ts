import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { ApiError } from "./errors.ts";
import { FakeKubeApi } from "./fake.ts";
import { ObjectCache, referencedObjects } from "./object-cache.ts";

const cm = (name: string, data: Record<string, string>) => ({ metadata: { name, namespace: "ns" }, data });
const pod = (uid: string, volumes: NonNullable<Pod["spec"]["volumes"]>, env: unknown[] = []): Pod => ({
  metadata: { name: uid, namespace: "ns", uid },
  spec: { containers: [{ name: "c", image: "i", env: env as never }], volumes },
});
const tick = () => new Promise((r) => setTimeout(r, 5));

function setup() {
  const api = new FakeKubeApi();
  const clock = new FakeClock();
  const cache = new ObjectCache({ api, clock, logger: memoryLogger().logger, retryMs: 1000 });
  return { api, cache, clock };
}

describe("ObjectCache", () => {
  test("referencedObjects: volumes, projected sources, env, envFrom and imagePullSecrets", () => {
    const p: Pod = {
      metadata: { name: "p", uid: "u" },
      spec: {
        containers: [
          {
            name: "c",
            image: "i",
            env: [
              { name: "A", valueFrom: { configMapKeyRef: { name: "env-cm", key: "k" } } },
              { name: "B", valueFrom: { secretKeyRef: { name: "env-s", key: "k" } } },
            ],
            envFrom: [{ configMapRef: { name: "from-cm" } }, { secretRef: { name: "from-s" } }],
          },
        ],
        volumes: [
          { name: "a", configMap: { name: "vol-cm" } },
          { name: "b", secret: { secretName: "vol-s" } },
          { name: "c", projected: { sources: [{ configMap: { name: "proj-cm" } }, { secret: { name: "proj-s" } }] } },
        ],
        imagePullSecrets: [{ name: "pull" }],
      } as Pod["spec"],
    };
    expect(
      referencedObjects(p)
        .map((r) => `${r.resource}/${r.name}`)
        .sort(),
    ).toEqual(
      [
        "configmaps/env-cm",
        "configmaps/from-cm",
        "configmaps/proj-cm",
        "configmaps/vol-cm",
        "secrets/env-s",
        "secrets/from-s",
        "secrets/proj-s",
        "secrets/pull",
        "secrets/vol-s",
      ].sort(),
    );
  });

  test("a registered object is listed and watched by name once; lookups read the cache and see updates and deletes", async () => {
    const { api, cache } = setup();
    api.putObject("configmaps", cm("app", { a: "1" }));
    api.putObject("configmaps", cm("other", { x: "1" }));
    cache.registerPod(pod("u1", [{ name: "v", configMap: { name: "app" } }]));
    cache.registerPod(pod("u2", [{ name: "v", configMap: { name: "app" } }]));
    expect(await cache.configMap("ns", "app")).toEqual({ data: { a: "1" }, binaryData: {} });
    await tick();
    expect(api.calls.filter((c) => c.method === "listObjects").map((c) => c.args)).toEqual([["configmaps", "ns", "metadata.name=app"]]);
    api.putObject("configmaps", cm("app", { a: "2" }));
    expect(await cache.configMap("ns", "app")).toEqual({ data: { a: "2" }, binaryData: {} });
    api.deleteObject("configmaps", "ns", "app");
    expect(await cache.configMap("ns", "app")).toBeUndefined();
    expect(api.calls.filter((c) => c.method === "listObjects")).toHaveLength(1); // no GET per lookup
    await cache[Symbol.asyncDispose]();
  });

  test("the watch stops when no pod references the object any more (unregister or a changed spec)", async () => {
    const { api, cache } = setup();
    api.putObject("secrets", { metadata: { name: "s", namespace: "ns" }, data: { k: "dg==" } });
    cache.registerPod(pod("u1", [{ name: "v", secret: { secretName: "s" } }]));
    cache.registerPod(pod("u2", [{ name: "v", secret: { secretName: "s" } }]));
    await cache.secret("ns", "s");
    await tick();
    expect(api.objectWatchCount()).toBe(1);
    cache.unregisterPod("u1");
    expect(cache.watched()).toEqual(["secrets/ns/s"]);
    cache.registerPod(pod("u2", []));
    await tick();
    expect(cache.watched()).toEqual([]);
    expect(api.objectWatchCount()).toBe(0);
  });

  test("a watch that ends or fails is resumed and the cache catches up", async () => {
    const { api, cache, clock } = setup();
    api.putObject("configmaps", cm("app", { a: "1" }));
    cache.registerPod(pod("u1", [{ name: "v", configMap: { name: "app" } }]));
    await cache.configMap("ns", "app");
    await tick();
    api.closeObjectWatches();
    await tick();
    api.putObject("configmaps", cm("app", { a: "2" }));
    expect((await cache.configMap("ns", "app"))?.data).toEqual({ a: "2" });
    api.failNext("watchObjects", new ApiError("Unreachable", 0, "WATCH", "/api/v1/namespaces/ns/configmaps", "down"));
    api.closeObjectWatches();
    await tick();
    api.putObject("configmaps", cm("app", { a: "3" })); // while the watch is down: the relist after the pause finds it
    clock.advance(1000);
    await tick();
    expect((await cache.configMap("ns", "app"))?.data).toEqual({ a: "3" });
    await cache[Symbol.asyncDispose]();
  });

  test("while the API cannot answer a new watch's list, lookups fail at once with the API's error, and succeed once it answers", async () => {
    const { api, cache, clock } = setup();
    api.putObject("configmaps", cm("app", { a: "1" }));
    api.failNext("listObjects", new ApiError("Unreachable", 0, "GET", "/api/v1/namespaces/ns/configmaps", "connection refused"));
    cache.registerPod(pod("u1", [{ name: "v", configMap: { name: "app" } }]));
    let error: unknown;
    await cache.configMap("ns", "app").catch((e) => (error = e));
    expect(String(error)).toContain("connection refused");
    clock.advance(1000);
    await tick();
    expect((await cache.configMap("ns", "app"))?.data).toEqual({ a: "1" });
    await cache[Symbol.asyncDispose]();
  });

  test("an unregistered object is one GET; an API failure is a PodObjectError, not 'absent'", async () => {
    const { api, cache } = setup();
    api.putObject("configmaps", cm("loose", { a: "1" }));
    expect((await cache.configMap("ns", "loose"))?.data).toEqual({ a: "1" });
    expect(await cache.configMap("ns", "none")).toBeUndefined();
    api.failNext("listObjects", new ApiError("Forbidden", 403, "GET", "/api/v1/namespaces/ns/configmaps", "no"));
    let error: unknown;
    await cache.configMap("ns", "loose").catch((e) => (error = e));
    expect(String(error)).toContain("reading ConfigMap ns/loose");
  });
});
