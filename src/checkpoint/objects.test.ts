import { describe, expect, test } from "bun:test";
import { FakePodObjects, PodObjectError, type PodObjects, type IssuedToken, type TokenRequestSpec } from "../api/objects.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { FakeCheckpointStore } from "./fake.ts";
import { checkpointedPodObjects, checkpointedTokenRequest, pruneObjectCheckpoints, SECRET_CHECKPOINT_KIND, TOKEN_CHECKPOINT_KIND } from "./objects.ts";

const HOUR = 3_600_000;

/** PodObjects whose API can be switched off: lookups then fail as the real cache does. */
class SwitchableObjects implements PodObjects {
  readonly inner = new FakePodObjects();
  reachable = true;
  configMap(ns: string, name: string) {
    if (!this.reachable) return Promise.reject(new PodObjectError("ConfigMap", ns, name, new Error("ECONNREFUSED")));
    return this.inner.configMap(ns, name);
  }
  secret(ns: string, name: string) {
    if (!this.reachable) return Promise.reject(new PodObjectError("Secret", ns, name, new Error("ECONNREFUSED")));
    return this.inner.secret(ns, name);
  }
}

function setup() {
  const clock = new FakeClock();
  const store = new FakeCheckpointStore(clock);
  const api = new SwitchableObjects();
  const { logger, lines } = memoryLogger();
  const objects = checkpointedPodObjects(api, { store, clock, logger, maxAgeMs: 24 * HOUR });
  return { clock, store, api, objects, lines };
}

describe("checkpointed configMaps and secrets", () => {
  test("answers are kept (secrets encrypted), unchanged ones not rewritten; with the API down the copy serves", async () => {
    const s = setup();
    s.api.inner.configMaps.set("default/settings", { data: { color: "blue" }, binaryData: {} });
    s.api.inner.secrets.set("default/creds", { data: { password: "czNjcmV0" } });
    expect(await s.objects.configMap("default", "settings")).toEqual({ data: { color: "blue" }, binaryData: {} });
    expect(await s.objects.secret("default", "creds")).toEqual({ data: { password: "czNjcmV0" } });
    await s.objects.configMap("default", "settings");
    expect(s.store.writes).toEqual(["configmaps/default_settings", "secrets/default_creds"]);
    expect(s.store.isSensitive(SECRET_CHECKPOINT_KIND, "default_creds")).toBe(true);
    s.api.reachable = false;
    expect(await s.objects.configMap("default", "settings")).toEqual({ data: { color: "blue" }, binaryData: {} });
    expect(await s.objects.secret("default", "creds")).toEqual({ data: { password: "czNjcmV0" } });
    expect(s.lines.filter((l) => l.includes("using the checkpointed copy")).length).toBe(2);
  });

  test("a copy older than maxAge is not used; an unchanged object is rewritten now and then so its age stays honest", async () => {
    const s = setup();
    s.api.inner.configMaps.set("default/settings", { data: { a: "1" }, binaryData: {} });
    await s.objects.configMap("default", "settings");
    s.clock.advance(7 * HOUR);
    await s.objects.configMap("default", "settings"); // more than maxAge/4 since the write: written again
    expect(s.store.writes.length).toBe(2);
    s.api.reachable = false;
    s.clock.advance(23 * HOUR);
    expect(await s.objects.configMap("default", "settings")).toEqual({ data: { a: "1" }, binaryData: {} });
    s.clock.advance(2 * HOUR);
    let error: unknown;
    try {
      await s.objects.configMap("default", "settings");
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(PodObjectError);
  });

  test("an object the API says is gone loses its copy: offline it is not found either", async () => {
    const s = setup();
    s.api.inner.configMaps.set("default/x", { data: {}, binaryData: {} });
    await s.objects.configMap("default", "x");
    s.api.inner.configMaps.delete("default/x");
    expect(await s.objects.configMap("default", "x")).toBeUndefined();
    s.api.reachable = false;
    let error: unknown;
    try {
      await s.objects.configMap("default", "x");
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(PodObjectError);
  });
});

describe("checkpointed tokens", () => {
  const spec: TokenRequestSpec = { namespace: "default", serviceAccount: "default", audiences: [], expirationSeconds: 3607, pod: { name: "p", uid: "u1" } };

  test("an issued token is kept encrypted and serves while the API cannot issue one, until it expires; pruning drops expired ones", async () => {
    const clock = new FakeClock();
    const store = new FakeCheckpointStore(clock);
    const { logger } = memoryLogger();
    let up = true;
    const request = checkpointedTokenRequest(
      async (): Promise<IssuedToken> => {
        if (!up) throw new Error("ECONNREFUSED");
        return { token: "t1", expiresAt: clock.now() + HOUR };
      },
      { store, clock, logger },
    );
    expect((await request(spec)).token).toBe("t1");
    const [key] = store.keys(TOKEN_CHECKPOINT_KIND);
    expect(store.isSensitive(TOKEN_CHECKPOINT_KIND, key!)).toBe(true);
    up = false;
    clock.advance(HOUR / 2);
    expect((await request(spec)).token).toBe("t1");
    clock.advance(HOUR);
    let error: unknown;
    try {
      await request(spec);
    } catch (err) {
      error = err;
    }
    expect(String(error)).toContain("ECONNREFUSED");
    pruneObjectCheckpoints({ store, clock, logger, maxAgeMs: 24 * HOUR });
    expect(store.keys(TOKEN_CHECKPOINT_KIND)).toEqual([]);
  });
});
