// The upstream kubelet (built from Go modules by scripts/controlplane/build.sh
// --with-kubelet) as a real process against a harness containerd, for
// side-by-side benchmarks and for switching a node between it and this agent.
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ContainerdHandle } from "./containerd.ts";

/**
 * Kernel settings the upstream kubelet insists on (setupKernelTunables: it
 * writes them when they differ, and fails when it cannot). This machine is
 * shared, so instead of changing the host's panic and overcommit behaviour
 * the kubelet runs in its own mount namespace with these files bind-mounted
 * over /proc/sys: it reads the values it wants and writes nothing.
 */
const KERNEL_TUNABLES: Record<string, string> = {
  "vm/overcommit_memory": "1",
  "vm/panic_on_oom": "0",
  "kernel/panic": "10",
  "kernel/panic_on_oops": "1",
  "kernel/keys/root_maxkeys": "1000000",
  "kernel/keys/root_maxbytes": "25000000",
};

export interface UpstreamKubeletHandle {
  pid: number;
  binary: string;
  logFile: string;
  log(): string;
  /** SIGTERM, then SIGKILL after 15 s; resolves once it exited. */
  stop(): Promise<void>;
  describe(lines?: number): string;
}

export interface UpstreamKubeletOptions {
  /** Where the kubelet binary is (the control plane's bin directory). */
  binDir: string;
  /** Everything of this kubelet that is not shared lives here (config, log, pki, fake /proc/sys files). */
  dir: string;
  nodeName: string;
  /** Its root directory: pass another agent's to switch a node between them. */
  rootDir: string;
  podLogsDir: string;
  /** Cluster mode; standalone without it. */
  kubeconfig?: string;
  /** The cluster CA for x509 client authentication (cluster mode). */
  clientCAFile?: string;
  /** More KubeletConfiguration fields (staticPodPath, syncFrequency, ...). */
  extraConfig?: Record<string, unknown>;
  healthzPort: number;
  port: number;
  /**
   * --node-ip (default 127.0.0.1, which upstream's node status setter refuses: its Node then has no
   * addresses, so nothing the API server proxies to it works). The kubelet API is served on `address`
   * (127.0.0.1 unless extraConfig sets it): give it this IP too when the API server must reach it.
   */
  nodeIP?: string;
}

export function upstreamKubeletBinary(binDir: string): string {
  const binary = join(binDir, "kubelet");
  if (!existsSync(binary)) throw new Error(`${binary} not found: run \`bash scripts/controlplane/build.sh --with-kubelet\``);
  return binary;
}

export function startUpstreamKubelet(ctd: ContainerdHandle, opts: UpstreamKubeletOptions): UpstreamKubeletHandle {
  const binary = upstreamKubeletBinary(opts.binDir);
  const varLog = join(opts.dir, "var-log");
  const fakes = join(opts.dir, "sysctl");
  for (const d of [opts.rootDir, opts.podLogsDir, varLog, fakes]) mkdirSync(d, { recursive: true });
  // The cgroup root must exist in every hierarchy (the kubelet checks; runc would create it for the pods).
  for (const h of readdirSync("/sys/fs/cgroup")) {
    const base = join("/sys/fs/cgroup", h);
    if (statSync(base).isDirectory() && existsSync(join(base, "cgroup.procs"))) mkdirSync(join(base, ctd.cgroupParent), { recursive: true });
  }
  const cluster = opts.kubeconfig !== undefined;
  const config = {
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    cgroupDriver: "cgroupfs",
    cgroupRoot: ctd.cgroupParent,
    failSwapOn: false,
    failCgroupV1: false,
    containerRuntimeEndpoint: ctd.endpoint,
    podLogsDir: opts.podLogsDir,
    readOnlyPort: 0,
    healthzPort: opts.healthzPort,
    healthzBindAddress: "127.0.0.1",
    port: opts.port,
    address: "127.0.0.1",
    authentication: cluster
      ? { x509: { clientCAFile: opts.clientCAFile }, webhook: { enabled: true }, anonymous: { enabled: false } }
      : { webhook: { enabled: false }, anonymous: { enabled: true } },
    authorization: { mode: cluster ? "Webhook" : "AlwaysAllow" },
    // No iptables chains in the shared host's tables (the kubelet's own canary chains).
    makeIPTablesUtilChains: false,
    ...opts.extraConfig,
  };
  mkdirSync(opts.dir, { recursive: true });
  const configFile = join(opts.dir, "kubelet.yaml");
  writeFileSync(configFile, JSON.stringify(config, null, 2));
  const logFile = join(opts.dir, "kubelet.log");
  const binds: string[] = [];
  for (const [key, want] of Object.entries(KERNEL_TUNABLES)) {
    const path = `/proc/sys/${key}`;
    if (readFileSync(path, "utf8").trim() === want) continue;
    const fake = join(fakes, key.replaceAll("/", "."));
    writeFileSync(fake, `${want}\n`);
    binds.push(`mount --bind ${fake} ${path}`);
  }
  // The kubelet makes its root directory rshared and mounts volumes (tmpfs) below it, which containerd,
  // in the host's mount namespace, must see: a shared bind mount made here is a peer of the namespace's copy.
  const mounted = Bun.spawnSync(["findmnt", "-n", opts.rootDir]).stdout.toString().trim() !== "";
  if (!mounted) {
    const host = Bun.spawnSync(["bash", "-c", `mount --bind ${opts.rootDir} ${opts.rootDir} && mount --make-shared ${opts.rootDir}`], { stderr: "pipe" });
    if (host.exitCode !== 0) throw new Error(`shared mount of ${opts.rootDir}: ${host.stderr.toString()}`);
  }
  const args = [
    binary,
    `--config=${configFile}`,
    ...(opts.kubeconfig ? [`--kubeconfig=${opts.kubeconfig}`] : []),
    `--root-dir=${opts.rootDir}`,
    `--cert-dir=${join(opts.dir, "pki")}`,
    `--hostname-override=${opts.nodeName}`,
    `--node-ip=${opts.nodeIP ?? "127.0.0.1"}`,
    "--v=2",
  ];
  // /var/log too: the kubelet links every container's log into /var/log/containers.
  const script = [...binds, `mount --bind ${varLog} /var/log`, `exec ${args.join(" ")} >>${logFile} 2>&1`].join(" && ");
  const proc = Bun.spawn(["unshare", "--mount", "--propagation", "unchanged", "--", "bash", "-c", script], { stdin: "ignore", stdout: "ignore", stderr: "ignore" });
  process.once("exit", () => proc.kill("SIGKILL"));
  const log = () => (existsSync(logFile) ? readFileSync(logFile, "utf8") : "");
  return {
    pid: proc.pid,
    binary,
    logFile,
    log,
    stop: async () => {
      proc.kill("SIGTERM");
      const killer = setTimeout(() => proc.kill("SIGKILL"), 15_000);
      await proc.exited;
      clearTimeout(killer);
    },
    describe(lines = 15) {
      const state = proc.exitCode === null && proc.signalCode === null ? `running (pid ${proc.pid})` : `exited (code ${proc.exitCode}, signal ${proc.signalCode})`;
      const problems = log()
        .split("\n")
        .filter((l) => /^[WE]\d{4} /.test(l))
        .slice(-lines)
        .map((l) => l.slice(0, 400));
      return `upstream kubelet ${opts.dir}: ${state}; its last ${problems.length} warnings and errors:\n${problems.join("\n")}`;
    },
  };
}
