import { describe, expect, test } from "bun:test";
import { ApiError } from "../api/errors.ts";
import { FakeKubeApi } from "../api/fake.ts";
import type { Pod } from "../pods/schema.ts";
import { containerEnv, EnvError } from "../runtime/env.ts";
import { FakePodObjects } from "../api/objects.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { FakeServices, fromServices, serviceEnvFrom, serviceEnvVars, WatchedServices, type Service } from "./index.ts";

const svc = (namespace: string, name: string, clusterIP: string, ports: Service["spec"]["ports"]): Service => ({ metadata: { namespace, name }, spec: { clusterIP, ports } });
const kubernetes = svc("default", "kubernetes", "10.0.0.1", [{ name: "https", port: 443, protocol: "TCP" }]);
const redis = svc("shop", "redis-primary", "10.0.0.11", [{ port: 6379 }, { name: "metrics", port: 9121, protocol: "UDP" }]);
const headless = svc("shop", "db", "None", [{ port: 5432 }]);
const tick = () => new Promise((r) => setTimeout(r, 5));

describe("service environment variables", () => {
  test("fromServices gives upstream's names and values: host, port, named ports, Docker links", () => {
    expect(Object.fromEntries(fromServices([redis]).map((e) => [e.name, e.value]))).toEqual({
      REDIS_PRIMARY_SERVICE_HOST: "10.0.0.11",
      REDIS_PRIMARY_SERVICE_PORT: "6379",
      REDIS_PRIMARY_SERVICE_PORT_METRICS: "9121",
      REDIS_PRIMARY_PORT: "tcp://10.0.0.11:6379",
      REDIS_PRIMARY_PORT_6379_TCP: "tcp://10.0.0.11:6379",
      REDIS_PRIMARY_PORT_6379_TCP_PROTO: "tcp",
      REDIS_PRIMARY_PORT_6379_TCP_PORT: "6379",
      REDIS_PRIMARY_PORT_6379_TCP_ADDR: "10.0.0.11",
      REDIS_PRIMARY_PORT_9121_UDP: "udp://10.0.0.11:9121",
      REDIS_PRIMARY_PORT_9121_UDP_PROTO: "udp",
      REDIS_PRIMARY_PORT_9121_UDP_PORT: "9121",
      REDIS_PRIMARY_PORT_9121_UDP_ADDR: "10.0.0.11",
    });
  });

  test("an IPv6 cluster IP is bracketed in the link URLs", () => {
    const env = new Map(fromServices([svc("a", "v6", "fd00::1", [{ port: 80 }])]).map((e) => [e.name, e.value]));
    expect(env.get("V6_PORT")).toBe("tcp://[fd00::1]:80");
    expect(env.get("V6_PORT_80_TCP_ADDR")).toBe("fd00::1");
  });

  test("the namespace's services with service links; only the kubernetes service without; headless and other namespaces never", () => {
    const all = [kubernetes, redis, headless, svc("other", "web", "10.0.0.20", [{ port: 80 }]), svc("other", "kubernetes", "10.0.0.30", [{ port: 1 }])];
    const linked = serviceEnvVars(all, "shop", true);
    expect(linked.get("KUBERNETES_SERVICE_HOST")).toBe("10.0.0.1");
    expect(linked.get("KUBERNETES_SERVICE_PORT")).toBe("443");
    expect(linked.get("KUBERNETES_SERVICE_PORT_HTTPS")).toBe("443");
    expect(linked.get("KUBERNETES_PORT_443_TCP")).toBe("tcp://10.0.0.1:443");
    expect(linked.get("REDIS_PRIMARY_SERVICE_HOST")).toBe("10.0.0.11");
    expect([...linked.keys()].some((k) => k.startsWith("DB_") || k.startsWith("WEB_"))).toBe(false);
    const unlinked = serviceEnvVars(all, "shop", false);
    expect(unlinked.get("KUBERNETES_SERVICE_HOST")).toBe("10.0.0.1");
    expect([...unlinked.keys()].every((k) => k.startsWith("KUBERNETES_"))).toBe(true);
    // A namespace's own "kubernetes" service wins over the master one with links (upstream's map, in either list order), not without.
    expect(serviceEnvVars(all, "other", true).get("KUBERNETES_SERVICE_HOST")).toBe("10.0.0.30");
    expect(serviceEnvVars([...all].reverse(), "other", true).get("KUBERNETES_SERVICE_HOST")).toBe("10.0.0.30");
    expect(serviceEnvVars(all, "other", false).get("KUBERNETES_SERVICE_HOST")).toBe("10.0.0.1");
  });

  test("containerEnv: services under the container's env, usable in $(VAR), overridden by env; before the first list an EnvError", async () => {
    const services = new FakeServices([kubernetes, redis]);
    const pod = (extra: Partial<Pod["spec"]> = {}): Pod => ({
      metadata: { name: "p", namespace: "shop", uid: "u" },
      spec: {
        containers: [
          {
            name: "c",
            image: "i",
            env: [
              { name: "URL", value: "redis://$(REDIS_PRIMARY_SERVICE_HOST)" },
              { name: "KUBERNETES_SERVICE_PORT", value: "1" },
            ],
          },
        ],
        ...extra,
      },
    });
    const ctx = { values: {}, objects: new FakePodObjects(), allocatable: { cpuMilli: 0, memoryBytes: 0, ephemeralStorageBytes: 0 }, services: serviceEnvFrom(services) };
    const env = await containerEnv(pod(), pod().spec.containers[0]!, ctx);
    const map = new Map(env.map((e) => [e.key, e.value]));
    expect(map.get("URL")).toBe("redis://10.0.0.11");
    expect(map.get("KUBERNETES_SERVICE_PORT")).toBe("1");
    expect(env.filter((e) => e.key === "KUBERNETES_SERVICE_PORT")).toHaveLength(1);
    expect(env.at(-1)).toEqual({ key: "KUBERNETES_SERVICE_PORT", value: "1" });
    expect(env[0]!.key).toBe("KUBERNETES_SERVICE_HOST"); // service variables come first, sorted by service

    const unlinked = pod({ enableServiceLinks: false } as never);
    const noLinks = new Map((await containerEnv(unlinked, unlinked.spec.containers[0]!, ctx)).map((e) => [e.key, e.value]));
    expect(noLinks.get("URL")).toBe("redis://$(REDIS_PRIMARY_SERVICE_HOST)");
    expect(noLinks.get("KUBERNETES_SERVICE_HOST")).toBe("10.0.0.1");

    services.synced = false;
    let error: unknown;
    try {
      await containerEnv(pod(), pod().spec.containers[0]!, ctx);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(EnvError);
    expect((error as Error).message).toBe("services have not yet been read at least once, cannot construct envvars");
    // A static pod does not wait (upstream), nor does any pod while the API server cannot be reached (offline autonomy).
    const staticPod = { ...pod(), metadata: { ...pod().metadata, annotations: { "kubernetes.io/config.source": "file" } } };
    expect((await containerEnv(staticPod, staticPod.spec.containers[0]!, ctx)).some((e) => e.key === "KUBERNETES_SERVICE_HOST")).toBe(true);
    services.unreachable = true;
    expect((await containerEnv(pod(), pod().spec.containers[0]!, ctx)).some((e) => e.key === "URL")).toBe(true);
  });
});

describe("WatchedServices", () => {
  test("lists, follows the watch, skips what does not parse, and relists after the watch ends or fails", async () => {
    const api = new FakeKubeApi();
    const clock = new FakeClock();
    api.putService({ metadata: { namespace: "default", name: "kubernetes" }, spec: { clusterIP: "10.0.0.1", ports: [{ port: 443 }] } });
    api.failNext("listServices", new ApiError("Unreachable", 0, "GET", "/api/v1/services", "refused"));
    await using cache = new WatchedServices({ api, clock, logger: memoryLogger().logger, retryMs: 1000 }).start();
    await tick();
    expect(cache.hasSynced()).toBe(false);
    expect(cache.apiUnreachable()).toBe(true);
    clock.advance(1000);
    await tick();
    expect(cache.hasSynced()).toBe(true);
    expect(cache.apiUnreachable()).toBe(false);
    expect(cache.list().map((s) => s.metadata.name)).toEqual(["kubernetes"]);

    api.putService({ metadata: { namespace: "shop", name: "redis" }, spec: { clusterIP: "10.0.0.11", ports: [{ port: 6379 }] } });
    api.putService({ metadata: { namespace: "shop", name: "broken" }, spec: { ports: "not a list" } });
    await tick();
    expect(
      cache
        .list()
        .map((s) => s.metadata.name)
        .sort(),
    ).toEqual(["kubernetes", "redis"]);
    api.deleteService("shop", "redis");
    await tick();
    expect(cache.list().map((s) => s.metadata.name)).toEqual(["kubernetes"]);

    const lists = () => api.calls.filter((c) => c.method === "listServices").length;
    const before = lists();
    api.closeServiceWatches();
    await tick();
    expect(lists()).toBe(before); // the watch resumes from its version without a relist
    api.putService({ metadata: { namespace: "shop", name: "late" }, spec: { clusterIP: "10.0.0.12", ports: [{ port: 1 }] } });
    await tick();
    expect(
      cache
        .list()
        .map((s) => s.metadata.name)
        .sort(),
    ).toEqual(["kubernetes", "late"]);
  });
});
