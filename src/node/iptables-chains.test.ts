import { describe, expect, test } from "bun:test";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { CANARY_CHAIN, FIREWALL_CHAIN, HINT_CHAIN, IptablesUtilChains, type IptablesBinary, type IptablesRunner } from "./iptables-chains.ts";

/** An in-memory iptables per family: tables of chains of rules, with the exit codes of the real binary. */
class FakeIptables implements IptablesRunner {
  readonly tables = new Map<string, Map<string, string[][]>>();
  readonly calls: string[] = [];
  constructor(readonly missing: IptablesBinary[] = []) {
    for (const b of ["iptables", "ip6tables"] as const) {
      this.tables.set(`${b}/nat`, new Map([["POSTROUTING", []]]));
      this.tables.set(
        `${b}/filter`,
        new Map([
          ["INPUT", []],
          ["OUTPUT", []],
          ["FORWARD", []],
        ]),
      );
      this.tables.set(`${b}/mangle`, new Map([["PREROUTING", []]]));
    }
  }
  chains(binary: IptablesBinary, table: string) {
    return this.tables.get(`${binary}/${table}`)!;
  }
  /** What `iptables -F; iptables -X` in every table does to non-built-in chains. */
  flush(binary: IptablesBinary) {
    for (const table of ["nat", "filter", "mangle"]) {
      const chains = this.chains(binary, table);
      for (const [name] of chains) if (name.startsWith("KUBE-")) chains.delete(name);
      for (const rules of chains.values()) rules.length = 0;
    }
  }
  async run(binary: IptablesBinary, args: string[]) {
    if (this.missing.includes(binary)) return { code: 127, output: "not found" };
    expect(args.slice(0, 4)).toEqual(["-w", "5", "-W", "100000"]);
    const [op, chain, t, table, ...rule] = args.slice(4) as [string, string, string, string, ...string[]];
    expect(t).toBe("-t");
    this.calls.push(`${binary} ${op} ${chain} ${table}`);
    const chains = this.chains(binary, table);
    const rules = chains.get(chain);
    const same = (r: string[]) => r.join(" ") === rule.join(" ");
    switch (op) {
      case "-S":
        return { code: rules ? 0 : 1, output: "" };
      case "-N":
        if (rules) return { code: 1, output: "Chain already exists." };
        chains.set(chain, []);
        return { code: 0, output: "" };
      case "-C":
        return { code: rules?.some(same) ? 0 : 1, output: "" };
      case "-I":
      case "-A":
        if (!rules) return { code: 1, output: "No chain/target/match by that name." };
        if (op === "-I") rules.unshift(rule);
        else rules.push(rule);
        return { code: 0, output: "" };
    }
    return { code: 2, output: `unexpected ${op}` };
  }
}

const flush = async () => {
  for (let i = 0; i < 50; i++) await Bun.sleep(0);
};

describe("makeIPTablesUtilChains", () => {
  test("IPv4: hint chain, KUBE-FIREWALL first in INPUT and OUTPUT with the martian rule; IPv6: the hint only; canaries in mangle, nat, filter", async () => {
    const ipt = new FakeIptables();
    const chains = new IptablesUtilChains({ runner: ipt, clock: new FakeClock(), logger: memoryLogger().logger });
    const ac = new AbortController();
    expect(await chains.start(ac.signal)).toEqual({ families: ["iptables", "ip6tables"] });
    await flush();
    expect(ipt.chains("iptables", "mangle").has(HINT_CHAIN)).toBe(true);
    expect(ipt.chains("ip6tables", "mangle").has(HINT_CHAIN)).toBe(true);
    expect(ipt.chains("iptables", "filter").get("INPUT")).toEqual([["-j", FIREWALL_CHAIN]]);
    expect(ipt.chains("iptables", "filter").get("OUTPUT")).toEqual([["-j", FIREWALL_CHAIN]]);
    expect(
      ipt
        .chains("iptables", "filter")
        .get(FIREWALL_CHAIN)!
        .map((r) => r.join(" ")),
    ).toEqual(["-m comment --comment block incoming localnet connections --dst 127.0.0.0/8 ! --src 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP"]);
    expect(ipt.chains("ip6tables", "filter").has(FIREWALL_CHAIN)).toBe(false);
    for (const b of ["iptables", "ip6tables"] as const) for (const table of ["mangle", "nat", "filter"]) expect(ipt.chains(b, table).has(CANARY_CHAIN)).toBe(true);
    ac.abort();
  });

  test("idempotent: a second start adds no rule twice", async () => {
    const ipt = new FakeIptables();
    const make = () => new IptablesUtilChains({ runner: ipt, clock: new FakeClock(), logger: memoryLogger().logger });
    const ac = new AbortController();
    await make().start(ac.signal);
    await make().start(ac.signal);
    expect(ipt.chains("iptables", "filter").get("INPUT")).toHaveLength(1);
    expect(ipt.chains("iptables", "filter").get(FIREWALL_CHAIN)).toHaveLength(1);
    ac.abort();
  });

  test("a flush that removes the canary is noticed at the next check and everything is written again", async () => {
    const ipt = new FakeIptables();
    const clock = new FakeClock();
    const chains = new IptablesUtilChains({ runner: ipt, clock, logger: memoryLogger().logger, monitorIntervalMs: 60_000 });
    const ac = new AbortController();
    await chains.start(ac.signal);
    await flush();
    ipt.flush("iptables");
    expect(ipt.chains("iptables", "mangle").has(HINT_CHAIN)).toBe(false);
    clock.advance(30_000);
    await flush();
    expect(ipt.chains("iptables", "mangle").has(HINT_CHAIN)).toBe(false);
    clock.advance(30_000);
    await flush();
    expect(ipt.chains("iptables", "mangle").has(HINT_CHAIN)).toBe(true);
    expect(ipt.chains("iptables", "filter").get("INPUT")).toEqual([["-j", FIREWALL_CHAIN]]);
    expect(ipt.chains("iptables", "filter").get(FIREWALL_CHAIN)).toHaveLength(1);
    await flush();
    expect(ipt.chains("iptables", "nat").has(CANARY_CHAIN)).toBe(true);
    ac.abort();
  });

  test("only the families whose iptables works; none: logged, nothing written", async () => {
    const v4only = new FakeIptables(["ip6tables"]);
    const ac = new AbortController();
    expect(await new IptablesUtilChains({ runner: v4only, clock: new FakeClock(), logger: memoryLogger().logger }).start(ac.signal)).toEqual({ families: ["iptables"] });
    const none = new FakeIptables(["iptables", "ip6tables"]);
    const log = memoryLogger();
    expect(await new IptablesUtilChains({ runner: none, clock: new FakeClock(), logger: log.logger }).start(ac.signal)).toEqual({ families: [] });
    expect(log.lines.join("\n")).toContain("no iptables support on this system");
    ac.abort();
  });

  test("a rule iptables refuses: logged as upstream, that family not monitored, the agent goes on", async () => {
    const ipt = new FakeIptables();
    const failing: IptablesRunner = { run: async (b, args) => (b === "iptables" && args[4] === "-I" ? { code: 4, output: "Permission denied" } : ipt.run(b, args)) };
    const log = memoryLogger();
    const ac = new AbortController();
    expect(await new IptablesUtilChains({ runner: failing, clock: new FakeClock(), logger: log.logger }).start(ac.signal)).toEqual({ families: ["ip6tables"] });
    expect(log.lines.join("\n")).toContain("failed to initialize iptables rules");
    expect(log.lines.join("\n")).toContain("Permission denied");
    ac.abort();
  });
});
