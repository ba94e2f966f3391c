// Runs upstream's node conformance suite against a one-node cluster whose
// node is this agent (or, with --kubelet=upstream, the upstream kubelet on the
// same setup), and writes a summary. scripts/conformance.sh is the entry point
// (`bun run conformance`); see docs/conformance.md.
//
// The cluster is the integration tests' harness: a private containerd
// (test/harness/containerd.ts, CNI bridge, no kube-proxy or DNS), a private
// control plane (test/harness/controlplane.ts) and the node. The suite's
// images are built offline (scripts/conformance/images.sh) and imported under
// the names e2e.test expects; ginkgo runs e2e.test in parallel processes.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { eventually, freePort, startAgent, type AgentHandle } from "../../test/harness/agent.ts";
import { requireRoot, startContainerd, type ContainerdHandle } from "../../test/harness/containerd.ts";
import { startControlPlane, type ControlPlaneHandle } from "../../test/harness/controlplane.ts";
import { issueCertificate } from "../../test/harness/pki.ts";
import { startUpstreamKubelet, type UpstreamKubeletHandle } from "../../test/harness/upstream-kubelet.ts";
import { hostNodeIP } from "./node-ip.ts";

const repo = resolve(import.meta.dir, "../..");
export const FOCUS = "\\[NodeConformance\\]";
export const SKIP = "\\[Serial\\]|\\[Slow\\]|\\[Disruptive\\]|\\[Flaky\\]|\\[Feature:|\\[NodeFeature:|\\[Alpha\\]|\\[Beta\\]|pull";
const NODE = "conformance-node";

interface Options {
  kubelet: "bunlet" | "upstream";
  procs: number;
  focus: string;
  skip: string;
  out: string;
  timeout: string;
  /** Run only part `index` (1-based) of `count` of the selected specs. */
  shard?: { index: number; count: number };
  /** Merge these runs' reports into one summary; runs nothing. */
  merge?: string[];
  /** Compare two runs (each a run's or a merge's directory), spec by spec; runs nothing. */
  compare?: [string, string];
  /** The node IP; default the source address of the default route (node-ip.ts). */
  nodeIP?: string;
}

function parseArgs(argv: string[]): Options {
  const stamp = new Date().toISOString().replace(/[:.]/g, "-").slice(0, 19);
  const o: Options = { kubelet: "bunlet", procs: 2, focus: FOCUS, skip: SKIP, out: "", timeout: "3h" };
  for (const a of argv) {
    const [k, v] = a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, ""];
    if (k === "--kubelet" && (v === "bunlet" || v === "upstream")) o.kubelet = v;
    else if (k === "--procs" && /^[1-9]\d*$/.test(v)) o.procs = Number(v);
    else if (k === "--focus" && v) o.focus = v;
    else if (k === "--skip" && v) o.skip = v;
    else if (k === "--out" && v) o.out = resolve(v);
    else if (k === "--timeout" && v) o.timeout = v;
    else if (k === "--shard" && /^[1-9]\d*\/[1-9]\d*$/.test(v) && Number(v.split("/")[0]) <= Number(v.split("/")[1]))
      o.shard = { index: Number(v.split("/")[0]), count: Number(v.split("/")[1]) };
    else if (k === "--merge" && v) o.merge = v.split(",").map((d) => resolve(d));
    else if (k === "--node-ip" && v) o.nodeIP = v;
    else if (k === "--compare" && v.split(",").length === 2) o.compare = v.split(",").map((d) => resolve(d)) as [string, string];
    else {
      console.error(
        `conformance: unknown or invalid argument ${JSON.stringify(a)}\n` +
          "usage: scripts/conformance.sh [--kubelet=bunlet|upstream] [--procs=N] [--focus=RE] [--skip=RE] [--shard=I/N] [--node-ip=IP] [--out=DIR] [--timeout=3h]\n" +
          "       scripts/conformance.sh --merge=DIR,DIR,... [--out=DIR]\n" +
          "       scripts/conformance.sh --compare=DIR,DIR [--out=DIR]",
      );
      process.exit(2);
    }
  }
  o.out ||= join(
    repo,
    ".cache/conformance",
    o.compare ? `compare-${stamp}` : o.merge ? `merged-${stamp}` : `${o.kubelet}-${stamp}${o.shard ? `-shard${o.shard.index}of${o.shard.count}` : ""}`,
  );
  return o;
}

function sh(argv: string[], what: string): string {
  const r = Bun.spawnSync(argv, { stdout: "pipe", stderr: "inherit" });
  if (r.exitCode !== 0) throw new Error(`${what}: ${argv.join(" ")} exited ${r.exitCode}`);
  return r.stdout.toString().trim().split("\n").at(-1) ?? "";
}

const log = (msg: string) => console.error(`conformance: ${msg}`);

/** A spec's full text, what ginkgo's --focus and --skip match. */
const fullText = (spec: SpecReport) => [...(spec.ContainerHierarchyTexts ?? []), spec.LeafNodeText].join(" ");

/** Go regexp syntax for a literal string. */
const quoteRegexp = (text: string) => text.replace(/[\\.+*?()|[\]{}^$]/g, "\\$&");

/** The specs e2e.test selects with this focus and skip (a dry run: nothing runs, well under a second). */
export function selectedSpecs(e2e: string, focus: string, skip: string, dir: string): string[] {
  const file = join(dir, "dry-run.json");
  const argv = [e2e, "--ginkgo.dry-run", `--ginkgo.focus=${focus}`, `--ginkgo.skip=${skip}`, `--ginkgo.json-report=${file}`, "--provider=skeleton", "--kubeconfig=/dev/null"];
  Bun.spawnSync(argv, { stdout: "ignore", stderr: "ignore" });
  if (!existsSync(file)) throw new Error(`${argv.join(" ")} wrote no report`);
  const report = JSON.parse(readFileSync(file, "utf8")) as { SpecReports?: SpecReport[] | null }[];
  return report.flatMap((r) => (r.SpecReports ?? []).filter((s) => s.LeafNodeType === "It" && s.State === "passed").map(fullText));
}

/**
 * Shard `index` of `count`: every count-th spec of the selection sorted by name, as one
 * --focus of anchored full names (one shard holds a shared machine for minutes, not the whole run).
 */
export function shardFocus(names: string[], index: number, count: number): { focus: string; names: string[] } {
  const mine = [...names].sort().filter((_, i) => i % count === index - 1);
  // Anchored at the end only: ginkgo's text of a spec has more before the report's container texts.
  return { focus: `(?:^| )(?:${mine.map(quoteRegexp).join("|")})$`, names: mine };
}

/** One spec of ginkgo's JSON report (the fields used here). */
interface SpecReport {
  ContainerHierarchyTexts?: string[] | null;
  LeafNodeText: string;
  LeafNodeType: string;
  State: string;
  NumAttempts: number;
  RunTime: number;
  Failure?: { Message?: string; Location?: { FileName?: string; LineNumber?: number } };
}

export interface Summary {
  passed: number;
  failed: { name: string; message: string }[];
  skipped: number;
  wallSeconds: number;
}

/** Counts of the specs that ran (ginkgo reports the ones the focus filtered out too, never attempted). */
export function summarize(report: { SpecReports?: SpecReport[] | null; RunTime?: number }[]): Summary {
  const s: Summary = { passed: 0, failed: [], skipped: 0, wallSeconds: 0 };
  for (const suite of report) {
    s.wallSeconds += Math.round((suite.RunTime ?? 0) / 1e9);
    for (const spec of suite.SpecReports ?? []) {
      if (spec.LeafNodeType !== "It" || spec.NumAttempts === 0) continue;
      const name = fullText(spec);
      if (spec.State === "passed") s.passed++;
      else if (spec.State === "skipped") s.skipped++;
      else {
        const first = (spec.Failure?.Message ?? spec.State).split("\n").find((l) => l.trim() !== "") ?? spec.State;
        s.failed.push({ name, message: `${spec.State}: ${first.trim().slice(0, 300)}` });
      }
    }
  }
  s.failed.sort((a, b) => a.name.localeCompare(b.name));
  return s;
}

export function renderSummary(
  s: Summary,
  o: { kubelet: string; version: string; focus: string; skip: string; procs: number; missingImages: string[]; shard?: Options["shard"]; merged?: string[] },
): string {
  const lines = [
    `# Node conformance run: ${o.kubelet}, ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC`,
    "",
    `- Suite: e2e.test ${o.version}, ginkgo --procs=${o.procs}`,
    o.shard ? `- Shard ${o.shard.index} of ${o.shard.count} of focus \`${FOCUS}\`` : `- Focus: \`${o.focus}\``,
    `- Skip: \`${o.skip}\``,
    ...(o.merged ? [`- Merged from: ${o.merged.join(", ")}`] : []),
    `- Passed ${s.passed}, failed ${s.failed.length}, skipped ${s.skipped} (of ${s.passed + s.failed.length + s.skipped} selected); wall time ${Math.floor(s.wallSeconds / 60)} min ${s.wallSeconds % 60} s`,
  ];
  if (o.missingImages.length > 0)
    lines.push(`- ${o.missingImages.length} images of e2e.test --list-images are not built offline (tests using them fail on the pull; .cache/conformance/images/missing.txt)`);
  lines.push("", "## Failed", "");
  for (const f of s.failed) lines.push(`- ${f.name}`, `  - ${f.message.replaceAll("\n", " ")}`);
  if (s.failed.length === 0) lines.push("(none)");
  return `${lines.join("\n")}\n`;
}

/** One summary of several runs (shards): their reports side by side. */
function merge(o: Options, dirs: string[]): number {
  const reports = dirs.flatMap((d) => JSON.parse(readFileSync(join(d, "report.json"), "utf8")));
  const summary = summarize(reports);
  const meta = JSON.parse(readFileSync(join(dirs[0]!, "run.json"), "utf8")) as { kubelet: string; version: string; procs: number; skip: string; missingImages: string[] };
  const text = renderSummary(summary, { ...meta, focus: FOCUS, merged: dirs });
  writeFileSync(join(o.out, "summary.md"), text);
  // The merged report is a run's report too: --compare reads it.
  writeFileSync(join(o.out, "report.json"), JSON.stringify(reports));
  writeFileSync(join(o.out, "run.json"), JSON.stringify({ ...meta, merged: dirs }));
  console.log(text);
  return summary.failed.length === 0 ? 0 : 1;
}

/** Each spec that ran, by full name: its state and its failure's first line. */
export function specStates(report: { SpecReports?: SpecReport[] | null }[]): Map<string, { state: string; message: string }> {
  const states = new Map<string, { state: string; message: string }>();
  for (const suite of report)
    for (const spec of suite.SpecReports ?? []) {
      if (spec.LeafNodeType !== "It" || spec.NumAttempts === 0) continue;
      const message = spec.State === "passed" ? "" : ((spec.Failure?.Message ?? "").split("\n").find((l) => l.trim() !== "") ?? "").trim().slice(0, 300);
      states.set(fullText(spec), { state: spec.State, message });
    }
  return states;
}

export interface Difference {
  name: string;
  a: { state: string; message: string } | undefined;
  b: { state: string; message: string } | undefined;
}

/** The specs whose state differs between two runs (a spec only one of them ran counts), by name. */
export function differences(a: ReturnType<typeof specStates>, b: ReturnType<typeof specStates>): Difference[] {
  const names = [...new Set([...a.keys(), ...b.keys()])].sort();
  return names.filter((n) => a.get(n)?.state !== b.get(n)?.state).map((name) => ({ name, a: a.get(name), b: b.get(name) }));
}

/** Two runs side by side: their counts and every spec whose state differs. */
function compare(o: Options, dirs: [string, string]): number {
  const runs = dirs.map((d) => {
    const report = JSON.parse(readFileSync(join(d, "report.json"), "utf8"));
    const meta = JSON.parse(readFileSync(join(d, "run.json"), "utf8")) as { kubelet: string };
    return { dir: d, kubelet: meta.kubelet, summary: summarize(report), states: specStates(report) };
  });
  const [a, b] = runs as [(typeof runs)[0], (typeof runs)[0]];
  const diff = differences(a.states, b.states);
  const show = (s: Difference["a"]) => (s === undefined ? "not run" : s.message ? `${s.state}: ${s.message.replaceAll("\n", " ").replaceAll("|", "\\|")}` : s.state);
  const lines = [
    `# Node conformance: ${a.kubelet} and ${b.kubelet} side by side`,
    "",
    "| run | passed | failed | wall |",
    "| --- | --- | --- | --- |",
    ...runs.map(
      (r) => `| ${r.kubelet} (${r.dir}) | ${r.summary.passed} | ${r.summary.failed.length} | ${Math.floor(r.summary.wallSeconds / 60)} min ${r.summary.wallSeconds % 60} s |`,
    ),
    "",
    `## ${diff.length} specs whose result differs`,
    "",
    ...diff.flatMap((d) => [`- ${d.name}`, `  - ${a.kubelet}: ${show(d.a)}`, `  - ${b.kubelet}: ${show(d.b)}`]),
  ];
  const text = `${lines.join("\n")}\n`;
  writeFileSync(join(o.out, "compare.md"), text);
  console.log(text);
  return diff.length === 0 ? 0 : 1;
}

async function main(): Promise<number> {
  const o = parseArgs(process.argv.slice(2));
  mkdirSync(o.out, { recursive: true });
  if (o.merge) return merge(o, o.merge);
  if (o.compare) return compare(o, o.compare);
  requireRoot();
  // Not loopback: the upstream kubelet refuses it (node-ip.ts); both kubelets get the same address.
  const nodeIP = hostNodeIP(o.nodeIP);
  log(`results in ${o.out}; node IP ${nodeIP}`);
  const suiteBin = sh(["bash", join(repo, "scripts/conformance/build.sh")], "building the suite");
  const cpBin = sh(["bash", join(repo, "scripts/controlplane/build.sh"), ...(o.kubelet === "upstream" ? ["--with-kubelet"] : [])], "building the control plane");
  const e2e = join(suiteBin, "e2e.test");
  const imagesDir = join(repo, ".cache/conformance/images");
  sh(["bash", join(repo, "scripts/conformance/images.sh"), e2e, join(suiteBin, "agnhost"), imagesDir], "building the suite's images");
  if (o.shard) {
    const all = selectedSpecs(e2e, o.focus, o.skip, o.out);
    const shard = shardFocus(all, o.shard.index, o.shard.count);
    const check = selectedSpecs(e2e, shard.focus, o.skip, o.out);
    if (check.length !== shard.names.length) throw new Error(`shard focus selects ${check.length} specs, not the shard's ${shard.names.length}`);
    log(`shard ${o.shard.index}/${o.shard.count}: ${shard.names.length} of ${all.length} specs`);
    o.focus = shard.focus;
  }

  let ctd: ContainerdHandle | undefined;
  let cp: ControlPlaneHandle | undefined;
  let agent: AgentHandle | undefined;
  let upstream: UpstreamKubeletHandle | undefined;
  try {
    [ctd, cp] = await Promise.all([startContainerd({ name: "conformance" }), startControlPlane({ name: "conformance" })]);
    const sock = ctd.socket;
    for (const image of readFileSync(join(imagesDir, "built.txt"), "utf8").split("\n").filter(Boolean)) {
      const file = join(imagesDir, `${image.replace(/[/:@]/g, "_")}.tar`);
      sh(["ctr", "-a", sock, "-n", "k8s.io", "images", "import", file], `importing ${image}`);
    }
    log(`containerd ${ctd.dir}, control plane ${cp.dir}`);

    const kubeconfig = await cp.nodeKubeconfig(NODE);
    // A serving certificate the API server trusts: logs, exec, attach and port-forward go through it,
    // to the node's InternalIP (--kubelet-preferred-address-types=InternalIP,Hostname), where the kubelet API listens.
    const pki = join(cp.dir, "pki");
    issueCertificate({ caDir: pki, outDir: pki, name: "node-serving", subject: `/CN=${NODE}`, usage: "serverAuth", altNames: `IP:${nodeIP},DNS:${NODE}` });
    const serving = { tlsCertFile: join(pki, "node-serving.crt"), tlsPrivateKeyFile: join(pki, "node-serving.key"), address: nodeIP };
    if (o.kubelet === "bunlet") {
      agent = await startAgent(ctd, {
        nodeName: NODE,
        extraArgs: [`--kubeconfig=${kubeconfig}`, `--node-ip=${nodeIP}`],
        extraConfig: {
          port: await freePort(),
          // Not served on the node IP (as the upstream kubelet's run: readOnlyPort 0); nothing here reads it.
          readOnlyPort: 0,
          ...serving,
          authentication: { x509: { clientCAFile: join(pki, "ca.crt") }, webhook: { enabled: true }, anonymous: { enabled: false } },
          authorization: { mode: "Webhook" },
        },
      });
      log(`agent log: ${agent.logFile}`);
    } else {
      const dir = join(ctd.dir, "upstream-kubelet");
      upstream = startUpstreamKubelet(ctd, {
        binDir: cpBin,
        dir,
        nodeName: NODE,
        nodeIP,
        rootDir: join(dir, "root"),
        podLogsDir: join(dir, "pod-logs"),
        kubeconfig,
        clientCAFile: join(pki, "ca.crt"),
        extraConfig: serving,
        healthzPort: await freePort(),
        port: await freePort(),
      });
      log(`upstream kubelet log: ${upstream.logFile}`);
    }
    const c = cp;
    await eventually(
      "the node Ready",
      async () => {
        const r = await c.kubectl(["get", "node", NODE, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}"]);
        return r.stdout === "True";
      },
      120_000,
      1000,
    );
    log("node Ready; running the suite");

    const ginkgo = Bun.spawn(
      [
        join(suiteBin, "ginkgo"),
        `--procs=${o.procs}`,
        `--focus=${o.focus}`,
        `--skip=${o.skip}`,
        `--timeout=${o.timeout}`,
        "--no-color",
        "--succinct",
        `--output-dir=${o.out}`,
        "--json-report=report.json",
        "--junit-report=junit.xml",
        e2e,
        "--",
        `--kubeconfig=${cp.adminKubeconfig}`,
        "--provider=skeleton",
        `--report-dir=${o.out}`,
        `--container-runtime-endpoint=${ctd.endpoint}`,
        "--allowed-not-ready-nodes=0",
      ],
      { stdout: Bun.file(join(o.out, "ginkgo.log")), stderr: "inherit", env: { ...process.env, PATH: `${cpBin}:${process.env.PATH}` } },
    );
    const code = await ginkgo.exited;
    log(`ginkgo exited ${code}`);
    const reportFile = join(o.out, "report.json");
    if (!existsSync(reportFile)) throw new Error(`no ${reportFile}; see ${join(o.out, "ginkgo.log")}`);
    const summary = summarize(JSON.parse(readFileSync(reportFile, "utf8")));
    const missing = existsSync(join(imagesDir, "missing.txt")) ? readFileSync(join(imagesDir, "missing.txt"), "utf8").split("\n").filter(Boolean) : [];
    const text = renderSummary(summary, {
      kubelet: o.kubelet,
      version: cp.kubernetesVersion,
      focus: o.focus,
      skip: o.skip,
      procs: o.procs,
      missingImages: missing,
      shard: o.shard,
    });
    writeFileSync(join(o.out, "summary.md"), text);
    writeFileSync(join(o.out, "run.json"), JSON.stringify({ kubelet: o.kubelet, version: cp.kubernetesVersion, procs: o.procs, skip: o.skip, missingImages: missing, nodeIP }));
    console.log(text);
    return summary.failed.length === 0 ? 0 : 1;
  } finally {
    // The node's log stays with the results; everything else goes.
    if (agent) {
      await agent.kill("SIGTERM");
      writeFileSync(join(o.out, "kubelet.log"), agent.log());
    }
    if (upstream) {
      await upstream.stop();
      writeFileSync(join(o.out, "kubelet.log"), upstream.log());
    }
    await Promise.all([ctd?.stop(), cp?.stop()]);
  }
}

if (import.meta.main) process.exit(await main());
