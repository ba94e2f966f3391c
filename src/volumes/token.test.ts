import { describe, expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import { requiresRefresh, TokenManager } from "./token.ts";
import type { TokenRequestSpec } from "../api/objects.ts";

const spec = (over: Partial<TokenRequestSpec> = {}): TokenRequestSpec => ({
  namespace: "default",
  serviceAccount: "default",
  audiences: [],
  expirationSeconds: 3600,
  pod: { name: "p", uid: "u1" },
  ...over,
});

function manager(clock: FakeClock) {
  const requests: TokenRequestSpec[] = [];
  let fail: Error | undefined;
  const tokens = new TokenManager({
    clock,
    random: () => 0,
    request: async (s) => {
      if (fail) throw fail;
      requests.push(s);
      return { token: `t${requests.length}`, expiresAt: clock.now() + s.expirationSeconds * 1000 };
    },
  });
  return { tokens, requests, failWith: (e: Error | undefined) => (fail = e) };
}

describe("TokenManager", () => {
  test("caches a token until 80% of its lifetime has passed, then asks again", async () => {
    const clock = new FakeClock();
    const { tokens, requests } = manager(clock);
    expect(await tokens.token(spec())).toBe("t1");
    clock.advance(2879_000); // just under 80% of 3600 s
    expect(await tokens.token(spec())).toBe("t1");
    clock.advance(2_000);
    expect(await tokens.token(spec())).toBe("t2");
    expect(requests.length).toBe(2);
    expect(requests[0]).toEqual(spec());
  });

  test("distinct audiences, lifetimes and pods are distinct tokens; forgetPod drops a pod's", async () => {
    const clock = new FakeClock();
    const { tokens, requests } = manager(clock);
    await tokens.token(spec());
    await tokens.token(spec({ audiences: ["vault"] }));
    await tokens.token(spec({ pod: { name: "q", uid: "u2" } }));
    expect(requests.length).toBe(3);
    tokens.forgetPod("u1");
    await tokens.token(spec());
    await tokens.token(spec({ pod: { name: "q", uid: "u2" } }));
    expect(requests.length).toBe(4);
  });

  test("a failed refresh keeps serving the cached token while it is still valid, and fails once it expired", async () => {
    const clock = new FakeClock();
    const { tokens, failWith } = manager(clock);
    await tokens.token(spec());
    clock.advance(3000_000);
    failWith(new Error("apiserver down"));
    expect(await tokens.token(spec())).toBe("t1");
    clock.advance(700_000);
    let error: unknown;
    try {
      await tokens.token(spec());
    } catch (err) {
      error = err;
    }
    expect(String(error)).toContain("apiserver down");
  });

  test("the lifetime the API server granted counts, not the one asked for: a 2-day request capped to 1 h is kept until 80% of the hour", async () => {
    const clock = new FakeClock();
    const requests: TokenRequestSpec[] = [];
    const tokens = new TokenManager({
      clock,
      random: () => 0,
      request: async (s) => {
        requests.push(s);
        // --service-account-max-token-expiration=1h: the answer's spec.expirationSeconds is the cap.
        return { token: `t${requests.length}`, expiresAt: clock.now() + 3600_000, lifetimeSeconds: 3600 };
      },
    });
    const twoDays = spec({ expirationSeconds: 2 * 86_400 });
    expect(await tokens.token(twoDays)).toBe("t1");
    clock.advance(60_000);
    expect(await tokens.token(twoDays)).toBe("t1"); // counted from the 2 days asked for, it was 47 h old: asked again on every call
    clock.advance(2879_000 - 60_000);
    expect(await tokens.token(twoDays)).toBe("t1");
    clock.advance(2_000);
    expect(await tokens.token(twoDays)).toBe("t2");
    expect(requests.length).toBe(2);
  });

  test("the 20% and the jitter are whole seconds, as upstream's (integer division; a jitter of rand*10 s truncated)", async () => {
    const now = Date.UTC(2026, 0, 1);
    // 20% of 3607 s is 721 s in upstream's integer arithmetic, not 721.4 s.
    expect(requiresRefresh(now, { token: "x", expiresAt: now + 721_200, lifetimeSeconds: 3607 }, 3607, 0)).toBe(false);
    expect(requiresRefresh(now, { token: "x", expiresAt: now + 720_900, lifetimeSeconds: 3607 }, 3607, 0)).toBe(true);
    const clock = new FakeClock();
    let asked = 0;
    const counting = new TokenManager({
      clock,
      random: () => 0.59, // 5 s of jitter, not 5.9 s
      request: async (s) => {
        asked++;
        return { token: `t${asked}`, expiresAt: clock.now() + s.expirationSeconds * 1000 };
      },
    });
    await counting.token(spec());
    clock.advance(2880_000 - 5_500); // 5.5 s before 80%: inside a 5.9 s jitter, outside a 5 s one
    await counting.token(spec());
    expect(asked).toBe(1);
    clock.advance(1_000);
    await counting.token(spec());
    expect(asked).toBe(2);
  });

  test("requiresRefresh: a token issued more than 24 hours ago is refreshed even when 80% of its lifetime is not over", () => {
    const now = Date.UTC(2026, 0, 1);
    const twoDays = 2 * 86_400;
    expect(requiresRefresh(now, { token: "x", expiresAt: now + 23 * 3600_000 }, twoDays, 0)).toBe(true); // issued 25 h ago
    expect(requiresRefresh(now, { token: "x", expiresAt: now + 25 * 3600_000 }, twoDays, 0)).toBe(false); // issued 23 h ago
    expect(requiresRefresh(now, { token: "x", expiresAt: now + 3600_000 }, 3600, 0)).toBe(false);
    expect(requiresRefresh(now, { token: "x", expiresAt: now + 700_000 }, 3600, 0)).toBe(true);
  });
});
