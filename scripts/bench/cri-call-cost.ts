// The CPU and the allocations of one PLEG relist (ListPodSandbox +
// ListContainers at once, as runtime/observe.ts relistPods makes them)
// through each configuration of the CRI client, against a private
// containerd (BUNLET_RUNTIME, 1.6 by default), with 0 pods and then with
// CRI_BENCH_PODS (10) pods of one running container each.
//
//   bun run bench:cri-calls        (root; CRI_BENCH_PAIRS=300 CRI_BENCH_ROUNDS=6)
//
// The calls run in a child process started as the agent runs
// (BUN_JSC_useJIT=0: JavaScriptCore's interpreter only, memory/jit.ts), all
// configurations in the one process, interleaved: each round runs every
// configuration's block of CRI_BENCH_PAIRS pairs, in an order rotated per
// round, so the machine's other load falls on all of them alike. CPU is
// process.cpuUsage() over a block (all of the child's threads: the
// collector and mimalloc's scavenger follow the allocations). Allocations
// come from JavaScriptCore's own GC log (BUN_JSC_logGC=1, to a file): the
// collections in a block, and the heap bytes allocated between them (the
// heap's size at a collection's start less its size after the previous
// one; a full collection closes each block so that its tail is counted).
// The table prints medians over the rounds and each configuration's ratio
// to the first one's ("transport": protobuf-ts's generated client on its
// GrpcTransport over grpc-js with the agent's channel options, which
// createCriClient used before unary-call.ts). "shipped" is createCriClient
// as it is in the tree, its wrapper included (watchdog, cancellation,
// error mapping).
import { Channel, ChannelCredentials, Client, Metadata, type ChannelOptions, type ServiceError } from "@grpc/grpc-js";
import { GrpcTransport } from "@protobuf-ts/grpc-transport";
import type { BinaryReadOptions, IMessageType } from "@protobuf-ts/runtime";
import { closeSync, openSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { channelOptions, createCriClient, DEFAULT_MAX_MESSAGE_BYTES } from "../../src/cri/client.ts";
import { RuntimeServiceClient } from "../../src/cri/gen/api.client.ts";
import { RUNTIME, type Rpc } from "../../src/cri/rpc.ts";
import { startUnaryCall } from "../../src/cri/unary-call.ts";
import { ListContainersRequest, ListContainersResponse, ListPodSandboxRequest, ListPodSandboxResponse } from "../../src/cri/gen/api.ts";
import { memoryLogger } from "../../src/util/log.ts";

const WORKER_FLAG = "--worker";
const MARK = "CRI-BENCH-MARK";

/** One relist pair; resolves to the number of sandboxes and containers listed. */
type Pair = () => Promise<number>;
interface Configuration {
  name: string;
  /** What it changes against "transport". */
  what: string;
  pair: Pair;
  close(): void;
}

const TIMEOUT_MS = 2 * 60 * 1000;

function transportConfiguration(name: string, what: string, target: string, options: ChannelOptions): Configuration {
  const credentials = ChannelCredentials.createInsecure();
  const channel = new Channel(target, credentials, options);
  const transport = new GrpcTransport({ host: target, channelCredentials: credentials, clientOptions: { channelOverride: channel } });
  const rt = new RuntimeServiceClient(transport);
  const pair: Pair = async () => {
    const [s, c] = await Promise.all([
      rt.listPodSandbox(ListPodSandboxRequest.create({}), { timeout: TIMEOUT_MS }).response,
      rt.listContainers(ListContainersRequest.create({}), { timeout: TIMEOUT_MS }).response,
    ]);
    return s.items.length + c.containers.length;
  };
  return { name, what, pair, close: () => transport.close() };
}

/** grpc-js's Client.makeUnaryRequest with the generated types' binary read and write, no GrpcTransport. */
function directConfiguration(name: string, what: string, target: string, options: ChannelOptions, readOptions?: Partial<BinaryReadOptions>): Configuration {
  const credentials = ChannelCredentials.createInsecure();
  const channel = new Channel(target, credentials, options);
  const client = new Client(target, credentials, { channelOverride: channel });
  function unary<I extends object, O extends object>(path: string, I: IMessageType<I>, O: IMessageType<O>, input: I): Promise<O> {
    return new Promise((resolve, reject) => {
      client.makeUnaryRequest(
        path,
        (value: I) => {
          const bytes = I.toBinary(value);
          return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        },
        (bytes: Buffer) => O.fromBinary(bytes, readOptions),
        input,
        new Metadata(),
        { deadline: Date.now() + TIMEOUT_MS },
        (err: ServiceError | null, value?: O) => (err || value === undefined ? reject(err) : resolve(value)),
      );
    });
  }
  const pair: Pair = async () => {
    const [s, c] = await Promise.all([
      unary("/runtime.v1.RuntimeService/ListPodSandbox", ListPodSandboxRequest, ListPodSandboxResponse, ListPodSandboxRequest.create({})),
      unary("/runtime.v1.RuntimeService/ListContainers", ListContainersRequest, ListContainersResponse, ListContainersRequest.create({})),
    ]);
    return s.items.length + c.containers.length;
  };
  return { name, what, pair, close: () => client.close() };
}

/** Below grpc-js's Client: Channel.createCall as unary-call.ts makes it, without createCriClient's wrapper. */
function channelCallConfiguration(name: string, what: string, target: string, options: ChannelOptions): Configuration {
  const channel = new Channel(target, ChannelCredentials.createInsecure(), options);
  const unary = <I extends object, O extends object>(rpc: Rpc<I, O>, input: I) =>
    new Promise<O>((resolve, reject) => startUnaryCall(channel, rpc, input, Date.now() + TIMEOUT_MS, (err, answer) => (err ? reject(err) : resolve(answer as O))));
  const pair: Pair = async () => {
    const [s, c] = await Promise.all([unary(RUNTIME.listPodSandbox, ListPodSandboxRequest.create({})), unary(RUNTIME.listContainers, ListContainersRequest.create({}))]);
    return s.items.length + c.containers.length;
  };
  return { name, what, pair, close: () => channel.close() };
}

/** The client as the agent ships it (createCriClient: its deadlines, watchdog, cancellation and error mapping). */
function shippedConfiguration(endpoint: string): Configuration {
  // --v=2, the harness's: at 10 every call would be logged.
  const cri = createCriClient({ endpoint, logger: memoryLogger(2).logger });
  const pair: Pair = async () => {
    const [s, c] = await Promise.all([cri.listPodSandbox(), cri.listContainers()]);
    return s.length + c.length;
  };
  return { name: "shipped", what: "createCriClient as it is in this tree", pair, close: () => cri.close() };
}

function configurations(endpoint: string): Configuration[] {
  const target = endpoint.replace(/^unix:\/\//, "unix:");
  const agent = channelOptions(DEFAULT_MAX_MESSAGE_BYTES);
  const noRetries = { ...agent, "grpc.enable_retries": 0 };
  const noChannelz = { ...agent, "grpc.enable_channelz": 0 };
  return [
    transportConfiguration("transport", "GrpcTransport, the agent's channel options (the baseline)", target, agent),
    transportConfiguration("no-retries", "GrpcTransport, grpc.enable_retries 0", target, noRetries),
    transportConfiguration("no-channelz", "GrpcTransport, grpc.enable_channelz 0", target, noChannelz),
    directConfiguration("direct", "Client.makeUnaryRequest, generated binary read/write", target, agent),
    directConfiguration("direct-no-channelz", "direct, grpc.enable_channelz 0", target, noChannelz),
    directConfiguration("direct-no-unknown", "direct, readUnknownField false", target, agent, { readUnknownField: false }),
    channelCallConfiguration("channel-call", "Channel.createCall (src/cri/unary-call.ts), no Client", target, agent),
    shippedConfiguration(endpoint),
  ];
}

interface Block {
  config: string;
  round: number;
  cpuUs: number;
  wallMs: number;
  collections: number;
  allocatedKiB: number;
  listed: number;
}

/** The child: runs the rounds and prints one JSON line of blocks. Its stderr is JavaScriptCore's GC log. */
async function worker(endpoint: string, pairs: number, rounds: number): Promise<void> {
  // CRI_BENCH_ONLY=name,name: those configurations alone (e.g. to profile one).
  const only = process.env.CRI_BENCH_ONLY?.split(",");
  const configs = configurations(endpoint).filter((c) => !only || only.includes(c.name));
  // Warm up: connect every channel and reach the steady state of each path.
  for (const c of configs) for (let i = 0; i < 50; i++) await c.pair();
  const blocks: Omit<Block, "collections" | "allocatedKiB">[] = [];
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < configs.length; k++) {
      const c = configs[(k + round) % configs.length]!;
      Bun.gc(true);
      writeSync(2, `${MARK} start ${blocks.length}\n`);
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      let listed = 0;
      for (let i = 0; i < pairs; i++) listed = await c.pair();
      const cpu = process.cpuUsage(cpu0);
      const wallMs = performance.now() - t0;
      Bun.gc(true);
      writeSync(2, `${MARK} end ${blocks.length}\n`);
      blocks.push({ config: c.name, round, cpuUs: cpu.user + cpu.system, wallMs, listed });
    }
  }
  for (const c of configs) c.close();
  console.log(JSON.stringify({ configs: configs.map((c) => ({ name: c.name, what: c.what })), blocks }));
}

/**
 * Collections and allocated heap bytes per block, from JavaScriptCore's GC
 * log: each collection's line `START <kind> <size>kb => ...` and its
 * epilogue `sweep: <before>kb => <after>kb`.
 */
export function allocationsByBlock(log: string): Map<number, { collections: number; allocatedKiB: number }> {
  const out = new Map<number, { collections: number; allocatedKiB: number }>();
  let block: number | undefined;
  let afterPrevious: number | undefined;
  for (const line of log.split("\n")) {
    const mark = new RegExp(`^${MARK} (start|end) (\\d+)`).exec(line);
    if (mark) {
      block = mark[1] === "start" ? Number(mark[2]) : undefined;
      if (block !== undefined) out.set(block, { collections: 0, allocatedKiB: 0 });
      continue;
    }
    const start = /: START \w+ (\d+)kb/.exec(line);
    if (start) {
      const b = block === undefined ? undefined : out.get(block);
      if (b && afterPrevious !== undefined) {
        b.collections++;
        b.allocatedKiB += Math.max(0, Number(start[1]) - afterPrevious);
      }
      continue;
    }
    const sweep = /sweep: \d+kb => (\d+)kb/.exec(line);
    if (sweep) afterPrevious = Number(sweep[1]);
  }
  return out;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function runWorker(endpoint: string, pairs: number, rounds: number, logFile: string): Promise<{ configs: { name: string; what: string }[]; blocks: Block[] }> {
  const fd = openSync(logFile, "w");
  const child = Bun.spawn([process.execPath, import.meta.path, WORKER_FLAG, endpoint, String(pairs), String(rounds)], {
    env: { ...process.env, BUN_JSC_useJIT: "0", BUN_JSC_logGC: "1" },
    stdout: "pipe",
    stderr: fd,
  });
  const out = await new Response(child.stdout).text();
  const code = await child.exited;
  closeSync(fd);
  if (code !== 0) throw new Error(`worker exited ${code}; its log: ${logFile}\n${out}`);
  const result = JSON.parse(out.trim().split("\n").at(-1)!) as { configs: { name: string; what: string }[]; blocks: Omit<Block, "collections" | "allocatedKiB">[] };
  const alloc = allocationsByBlock(readFileSync(logFile, "utf8"));
  return { configs: result.configs, blocks: result.blocks.map((b, i) => ({ ...b, ...(alloc.get(i) ?? { collections: NaN, allocatedKiB: NaN }) })) };
}

function table(label: string, pairs: number, r: { configs: { name: string; what: string }[]; blocks: Block[] }): void {
  console.log(`\n${label}: medians over ${Math.max(...r.blocks.map((b) => b.round)) + 1} rounds of ${pairs} pairs; listed ${r.blocks[0]?.listed} objects per pair`);
  console.log("| configuration | CPU µs per pair | vs transport | heap KiB per pair | vs transport | collections per 1000 pairs | wall ms per pair |");
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
  const per = (name: string, f: (b: Block) => number) => median(r.blocks.filter((b) => b.config === name).map(f));
  const baseCpu = per("transport", (b) => b.cpuUs / pairs);
  const baseHeap = per("transport", (b) => b.allocatedKiB / pairs);
  for (const c of r.configs) {
    const cpu = per(c.name, (b) => b.cpuUs / pairs);
    const heap = per(c.name, (b) => b.allocatedKiB / pairs);
    const gcs = per(c.name, (b) => (b.collections / pairs) * 1000);
    const wall = per(c.name, (b) => b.wallMs / pairs);
    console.log(
      `| ${c.name} (${c.what}) | ${cpu.toFixed(0)} | ${(cpu / baseCpu).toFixed(2)}x | ${heap.toFixed(1)} | ${(heap / baseHeap).toFixed(2)}x | ${gcs.toFixed(1)} | ${wall.toFixed(2)} |`,
    );
  }
}

if (process.argv[2] === WORKER_FLAG) {
  await worker(process.argv[3]!, Number(process.argv[4]), Number(process.argv[5]));
  process.exit(0);
} else if (import.meta.main) {
  const { requireRoot, runtimeUnderTest, startContainerd } = await import("../../test/harness/containerd.ts");
  const { runBenchSandbox, startBenchContainer } = await import("./cri-pod.ts");
  const pairs = Number(process.env.CRI_BENCH_PAIRS ?? 300);
  const rounds = Number(process.env.CRI_BENCH_ROUNDS ?? 6);
  const pods = Number(process.env.CRI_BENCH_PODS ?? 10);
  requireRoot();
  const ctd = await startContainerd({ name: "cri-calls" });
  try {
    console.log(`runtime ${runtimeUnderTest()}, bun ${Bun.version}, interpreter only (BUN_JSC_useJIT=0), ${new Date().toISOString()}`);
    table("0 pods", pairs, await runWorker(ctd.endpoint, pairs, rounds, join(ctd.dir, "worker-0.log")));
    if (pods > 0) {
      const cri = createCriClient({ endpoint: ctd.endpoint, logger: memoryLogger().logger });
      try {
        for (let i = 0; i < pods; i++) await startBenchContainer(cri, ctd, await runBenchSandbox(cri, ctd, "bench", `p${i}`));
      } finally {
        cri.close();
      }
      table(`${pods} pods (${pods} sandboxes, ${pods} running containers)`, pairs, await runWorker(ctd.endpoint, pairs, rounds, join(ctd.dir, `worker-${pods}.log`)));
    }
  } finally {
    await ctd.stop();
  }
}
