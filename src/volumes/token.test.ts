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

  test("requiresRefresh: a token issued more than 24 hours ago is refreshed even when 80% of its lifetime is not over", () => {
    const now = Date.UTC(2026, 0, 1);
    const twoDays = 2 * 86_400;
    expect(requiresRefresh(now, { token: "x", expiresAt: now + 23 * 3600_000 }, twoDays, 0)).toBe(true); // issued 25 h ago
    expect(requiresRefresh(now, { token: "x", expiresAt: now + 25 * 3600_000 }, twoDays, 0)).toBe(false); // issued 23 h ago
    expect(requiresRefresh(now, { token: "x", expiresAt: now + 3600_000 }, 3600, 0)).toBe(false);
    expect(requiresRefresh(now, { token: "x", expiresAt: now + 700_000 }, 3600, 0)).toBe(true);
  });
});
