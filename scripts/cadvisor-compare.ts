// /metrics/cadvisor of the upstream kubelet v1.34 and of this agent, on the
// same containerd and control plane, one after the other (two kubelets on one
// runtime would remove each other's pods), each with the same pod (a
// CPU-limited busy loop) running for 20 s: lists the metric families
// upstream has that this agent lacks, and differences in type, HELP and
// label names of the families both have, for the container, pod, sandbox
// and machine ("/") series.
//
// Run as root (heavy: take the shared lock):
//   bash scripts/controlplane/build.sh --with-kubelet
//   flock /tmp/bunlet-heavy.lock bun scripts/cadvisor-compare.ts [OUT_DIR]
// With OUT_DIR, both scrapes are also written there (upstream.prom,
// bunlet.prom), to compare values and series, not only families.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { eventually, freePort, startAgent } from "../test/harness/agent.ts";
import { requireRoot, startContainerd } from "../test/harness/containerd.ts";
import { startControlPlane, type ControlPlaneHandle } from "../test/harness/controlplane.ts";
import { startUpstreamKubelet } from "../test/harness/upstream-kubelet.ts";

interface Family {
  type: string;
  help: string;
  /** Label names of its series, by the kind of cgroup they describe. */
  labels: Map<string, Set<string>>;
}

/** Which cgroup a series describes, from its labels (upstream's containerPrometheusLabelsFunc). */
function kindOf(labels: Record<string, string>): string {
  if (labels["id"] === "/") return "machine";
  if (labels["container"]) return "container";
  if (labels["pod"] && labels["image"]) return "sandbox";
  if (labels["pod"]) return "pod";
  if (labels["id"] !== undefined) return "other cgroup";
  return "no id";
}

export function parseFamilies(text: string): Map<string, Family> {
  const out = new Map<string, Family>();
  const family = (name: string) => {
    let f = out.get(name);
    if (!f) out.set(name, (f = { type: "", help: "", labels: new Map() }));
    return f;
  };
  for (const line of text.split("\n")) {
    if (line.startsWith("# HELP ")) {
      const [name, ...help] = line.slice(7).split(" ");
      family(name!).help = help.join(" ");
    } else if (line.startsWith("# TYPE ")) {
      const [name, type] = line.slice(7).split(" ");
      family(name!).type = type!;
    } else if (line && !line.startsWith("#")) {
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? /.exec(line);
      if (!m) continue;
      const labels: Record<string, string> = {};
      for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
      const f = family(m[1]!);
      const kind = kindOf(labels);
      const set = f.labels.get(kind) ?? new Set<string>();
      for (const k of Object.keys(labels)) set.add(k);
      f.labels.set(kind, set);
    }
  }
  return out;
}

const burner = (node: string) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: `burner-${node}`, namespace: "default" },
  spec: {
    nodeName: node,
    terminationGracePeriodSeconds: 1,
    containers: [
      { name: "burn", image: "", imagePullPolicy: "IfNotPresent", command: ["sh", "-c", "while :; do :; done"], resources: { limits: { cpu: "100m", memory: "32Mi" } } },
    ],
  },
});

async function scrape(cp: ControlPlaneHandle, port: number): Promise<string> {
  const pki = join(cp.dir, "pki");
  const tls = { rejectUnauthorized: false, cert: readFileSync(join(pki, "admin.crt"), "utf8"), key: readFileSync(join(pki, "admin.key"), "utf8") };
  const res = await fetch(`https://127.0.0.1:${port}/metrics/cadvisor`, { tls } as RequestInit);
  if (res.status !== 200) throw new Error(`/metrics/cadvisor: ${res.status} ${await res.text()}`);
  return res.text();
}

async function withPod(cp: ControlPlaneHandle, image: string, node: string, port: number): Promise<string> {
  const pod = burner(node);
  pod.spec.containers[0]!.image = image;
  const r = await cp.kubectl(["apply", "-f", "-"], { stdin: JSON.stringify(pod) });
  if (r.code !== 0) throw new Error(r.stderr);
  await eventually(
    `${pod.metadata.name} Running`,
    async () => (await cp.kubectl(["get", "pod", pod.metadata.name, "-o", "jsonpath={.status.phase}"])).stdout === "Running",
    120_000,
    500,
  );
  // cAdvisor's housekeeping picks new containers up within seconds; give both time for two readings.
  await Bun.sleep(20_000);
  const text = await scrape(cp, port);
  await cp.kubectl(["delete", "pod", pod.metadata.name, "--wait=true", "--timeout=60s"]);
  return text;
}

if (import.meta.main) {
  requireRoot();
  const ctd = await startContainerd({ name: "cadv-cmp" });
  const cp = await startControlPlane({ name: "cadv-cmp" });
  try {
    const upstreamNode = "cmp-upstream";
    const upstreamPort = await freePort();
    const upstreamDir = join(ctd.dir, "upstream-kubelet");
    const upstream = startUpstreamKubelet(ctd, {
      binDir: cp.binDir,
      dir: upstreamDir,
      nodeName: upstreamNode,
      rootDir: join(upstreamDir, "root"),
      podLogsDir: join(upstreamDir, "pod-logs"),
      kubeconfig: await cp.nodeKubeconfig(upstreamNode),
      clientCAFile: cp.caFile,
      healthzPort: await freePort(),
      port: upstreamPort,
    });
    let upstreamText: string;
    try {
      await eventually(
        "upstream node Ready",
        async () => (await cp.kubectl(["get", "node", upstreamNode, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}"])).stdout === "True",
        120_000,
        1000,
      ).catch((e) => {
        throw new Error(`${(e as Error).message}\n${upstream.describe()}`);
      });
      upstreamText = await withPod(cp, ctd.busyboxImage, upstreamNode, upstreamPort);
    } finally {
      await upstream.stop();
    }

    const oursNode = "cmp-bunlet";
    const port = await freePort();
    const agent = await startAgent(ctd, {
      nodeName: oursNode,
      extraArgs: [`--kubeconfig=${await cp.nodeKubeconfig(oursNode)}`, "--node-ip=127.0.0.1"],
      extraConfig: { port, authentication: { x509: { clientCAFile: cp.caFile }, webhook: { enabled: true }, anonymous: { enabled: false } }, authorization: { mode: "Webhook" } },
    });
    let oursText: string;
    try {
      await eventually(
        "bunlet node Ready",
        async () => (await cp.kubectl(["get", "node", oursNode, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}"])).stdout === "True",
        120_000,
        1000,
      );
      oursText = await withPod(cp, ctd.busyboxImage, oursNode, port);
    } finally {
      await agent.kill("SIGTERM");
    }

    const outDir = process.argv[2];
    if (outDir) {
      mkdirSync(outDir, { recursive: true });
      writeFileSync(join(outDir, "upstream.prom"), upstreamText);
      writeFileSync(join(outDir, "bunlet.prom"), oursText);
    }
    const up = parseFamilies(upstreamText);
    const ours = parseFamilies(oursText);
    const missing = [...up.keys()].filter((n) => !ours.has(n)).sort();
    const extra = [...ours.keys()].filter((n) => !up.has(n)).sort();
    console.log(`\n/metrics/cadvisor: upstream kubelet ${cp.kubernetesVersion} has ${up.size} families, bunlet ${ours.size}\n`);
    console.log(`## Families upstream has that bunlet lacks (${missing.length})\n`);
    for (const n of missing) console.log(`- ${n} (${up.get(n)!.type}; ${[...up.get(n)!.labels.keys()].join(", ")})`);
    console.log(`\n## Families bunlet has that upstream lacks (${extra.length})\n`);
    for (const n of extra) console.log(`- ${n}`);
    console.log("\n## Differences in families both have\n");
    let differences = 0;
    for (const [name, u] of [...up].sort(([a], [b]) => a.localeCompare(b))) {
      const o = ours.get(name);
      if (!o) continue;
      const notes: string[] = [];
      if (u.type !== o.type) notes.push(`type ${u.type} upstream, ${o.type} here`);
      if (u.help !== o.help) notes.push(`HELP ${JSON.stringify(u.help)} upstream, ${JSON.stringify(o.help)} here`);
      for (const [kind, labels] of u.labels) {
        const mine = o.labels.get(kind);
        if (!mine) notes.push(`no ${kind} series here`);
        else {
          const lacking = [...labels].filter((l) => !mine.has(l));
          const more = [...mine].filter((l) => !labels.has(l));
          if (lacking.length || more.length) notes.push(`${kind} labels: ${lacking.length ? `lacks ${lacking.join(",")}` : ""}${more.length ? ` has ${more.join(",")} more` : ""}`);
        }
      }
      for (const kind of o.labels.keys()) if (!u.labels.has(kind)) notes.push(`${kind} series here, none upstream`);
      if (notes.length) {
        differences++;
        console.log(`- ${name}: ${notes.join("; ")}`);
      }
    }
    if (!differences) console.log("(none)");
  } finally {
    await Promise.all([ctd.stop(), cp.stop()]);
  }
}
