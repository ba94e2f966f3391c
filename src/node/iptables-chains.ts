/**
 * makeIPTablesUtilChains, as upstream 1.34's kubelet (initNetworkUtil and
 * syncIPTablesRules), through the iptables and ip6tables binaries:
 * - for each family whose iptables works (`-S POSTROUTING -t nat` succeeds):
 *   the empty KUBE-IPTABLES-HINT chain in the mangle table, by which other
 *   components tell iptables-legacy from iptables-nft;
 * - IPv4 only: the KUBE-FIREWALL chain in the filter table, jumped to first
 *   from INPUT and OUTPUT, with the martian packet rule that drops
 *   connections to 127.0.0.0/8 from elsewhere (kubernetes#90259; kube-proxy
 *   writes the same rule);
 * - KUBE-KUBELET-CANARY in the mangle, nat and filter tables, checked every
 *   minute: when a flush removed it, everything above is written again.
 * A failure to write is logged and the agent goes on, as upstream. A host
 * without a working iptables it logs "no iptables support" and goes on, as upstream.
 */
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";

export type IptablesBinary = "iptables" | "ip6tables";

export interface IptablesRunner {
  /** Runs the binary with `args`; its exit code and combined output. */
  run(binary: IptablesBinary, args: string[]): Promise<{ code: number; output: string }>;
}

export const HINT_CHAIN = "KUBE-IPTABLES-HINT";
export const FIREWALL_CHAIN = "KUBE-FIREWALL";
export const CANARY_CHAIN = "KUBE-KUBELET-CANARY";
const CANARY_TABLES = ["mangle", "nat", "filter"] as const;
/** Upstream: wait up to 5 s for the xtables lock, polling every 100 ms. */
const WAIT = ["-w", "5", "-W", "100000"];
const MARTIAN_RULE = [
  "-m",
  "comment",
  "--comment",
  "block incoming localnet connections",
  "--dst",
  "127.0.0.0/8",
  "!",
  "--src",
  "127.0.0.0/8",
  "-m",
  "conntrack",
  "!",
  "--ctstate",
  "RELATED,ESTABLISHED,DNAT",
  "-j",
  "DROP",
];

export class IptablesError extends Error {
  override readonly name = "IptablesError";
}

/** One family's iptables, with upstream's EnsureChain / EnsureRule / ChainExists semantics. */
class Family {
  constructor(
    readonly binary: IptablesBinary,
    private readonly runner: IptablesRunner,
  ) {}

  private run(args: string[]) {
    return this.runner.run(this.binary, [...WAIT, ...args]);
  }

  async present(): Promise<boolean> {
    return this.chainExists("nat", "POSTROUTING");
  }

  async chainExists(table: string, chain: string): Promise<boolean> {
    return (await this.run(["-S", chain, "-t", table])).code === 0;
  }

  /** Creates the chain; exit status 1 is "already exists", as upstream. */
  async ensureChain(table: string, chain: string): Promise<void> {
    const r = await this.run(["-N", chain, "-t", table]);
    if (r.code !== 0 && r.code !== 1)
      throw new IptablesError(`${this.binary}: error creating chain ${JSON.stringify(chain)} in table ${table}: exit ${r.code}: ${r.output.trim()}`);
  }

  /** Adds the rule (-I first, -A last) unless `-C` finds it. */
  async ensureRule(position: "-I" | "-A", table: string, chain: string, rule: string[]): Promise<void> {
    if ((await this.run(["-C", chain, "-t", table, ...rule])).code === 0) return;
    const r = await this.run([position, chain, "-t", table, ...rule]);
    if (r.code !== 0) throw new IptablesError(`${this.binary}: error adding rule to ${chain} in table ${table}: exit ${r.code}: ${r.output.trim()}`);
  }
}

export interface UtilChainsOptions {
  runner: IptablesRunner;
  clock: Clock;
  logger: Logger;
  /** How often the canary is checked; upstream 1 minute. */
  monitorIntervalMs?: number;
}

export class IptablesUtilChains {
  private readonly families: Family[];
  constructor(private readonly opts: UtilChainsOptions) {
    this.families = (["iptables", "ip6tables"] as const).map((b) => new Family(b, opts.runner));
  }

  /** Upstream syncIPTablesRules for one family; throws what failed. */
  async sync(family: Family): Promise<void> {
    await family.ensureChain("mangle", HINT_CHAIN);
    if (family.binary === "ip6tables") return; // IPv6 has no martian packet issue
    await family.ensureChain("filter", FIREWALL_CHAIN);
    await family.ensureRule("-I", "filter", "OUTPUT", ["-j", FIREWALL_CHAIN]);
    await family.ensureRule("-I", "filter", "INPUT", ["-j", FIREWALL_CHAIN]);
    await family.ensureRule("-A", "filter", FIREWALL_CHAIN, MARTIAN_RULE);
  }

  private async syncLogged(family: Family): Promise<boolean> {
    try {
      await this.sync(family);
      return true;
    } catch (err) {
      this.opts.logger.error("failed to initialize iptables rules; some functionality may be missing", { protocol: family.binary, err: (err as Error).message });
      return false;
    }
  }

  /**
   * Writes the chains for every family whose iptables works, then watches
   * the canary until `signal` aborts (the chains stay, as upstream's, whose
   * monitor never stops). Resolves once the first sync is done.
   */
  async start(signal: AbortSignal): Promise<{ families: IptablesBinary[] }> {
    const { logger, clock } = this.opts;
    const present: Family[] = [];
    for (const f of this.families) if (await f.present()) present.push(f);
    if (!present.length) {
      logger.info("no iptables support on this system; not creating the KUBE-IPTABLES-HINT chain");
      return { families: [] };
    }
    const synced: Family[] = [];
    for (const f of present) {
      if (await this.syncLogged(f)) {
        logger.info("initialized iptables rules", { protocol: f.binary });
        synced.push(f);
      }
    }
    for (const f of synced) void this.monitor(f, signal, clock);
    return { families: synced.map((f) => f.binary) };
  }

  /** Upstream runner.Monitor: the canary in every table; when the first is gone, wait for the flush to finish, then sync again. */
  private async monitor(f: Family, signal: AbortSignal, clock: Clock): Promise<void> {
    const interval = this.opts.monitorIntervalMs ?? 60_000;
    const wait = async (ms: number) => {
      try {
        await clock.sleep(ms, signal);
        return true;
      } catch {
        return false;
      }
    };
    for (;;) {
      // Set the canaries up, retrying each interval until it works.
      for (;;) {
        try {
          for (const table of CANARY_TABLES) await f.ensureChain(table, CANARY_CHAIN);
          break;
        } catch (err) {
          this.opts.logger.error("could not set up iptables canary", { protocol: f.binary, err: (err as Error).message });
          if (!(await wait(interval))) return;
        }
      }
      // Poll until the canary in the first table is gone.
      for (;;) {
        if (!(await wait(interval))) return;
        if (!(await f.chainExists(CANARY_TABLES[0], CANARY_CHAIN))) break;
      }
      this.opts.logger.v(2).info("iptables canary deleted; reloading after iptables flush", { protocol: f.binary });
      // Let the other tables' flush finish (upstream: up to 2 s, polled every 100 ms).
      for (let i = 0; i < 20; i++) {
        let rest = false;
        for (const table of CANARY_TABLES.slice(1)) if (await f.chainExists(table, CANARY_CHAIN)) rest = true;
        if (!rest || !(await wait(100))) break;
      }
      if (signal.aborted) return;
      await this.syncLogged(f);
    }
  }
}

/** The binaries through Bun.spawn; a missing binary is exit 127 with the spawn error as output. */
export const spawnIptables: IptablesRunner = {
  async run(binary, args) {
    try {
      const proc = Bun.spawn([binary, ...args], { stdout: "pipe", stderr: "pipe" });
      const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      return { code, output: out + err };
    } catch (err) {
      return { code: 127, output: (err as Error).message };
    }
  },
};
