/**
 * `kubelet install` / `kubelet uninstall`: what a node needs around the
 * binary (the binary in /usr/bin, a systemd unit, a default config file,
 * the directories), as a plan of steps computed from what is on disk, then
 * carried out or (with --dry-run) only printed. Running it again changes
 * nothing; a config file the operator edited is never overwritten or removed.
 */
import { posix } from "node:path";

export type Step =
  | { kind: "mkdir"; path: string; mode: number }
  | { kind: "write"; path: string; content: string | Uint8Array; mode: number; why: string }
  | { kind: "remove"; path: string; why: string }
  | { kind: "keep"; path: string; why: string }
  | { kind: "run"; argv: string[]; why: string };

/** What the planner may look at on disk (relative to the prefix). */
export interface DiskView {
  read(path: string): Uint8Array | undefined;
  isDir(path: string): boolean;
}

export interface InstallOptions {
  /** Root of the file system to install into; "/" normally, a directory in tests and image builds. */
  prefix: string;
  /** The running executable's bytes (the binary to install). */
  binary: Uint8Array;
  /** Run systemctl daemon-reload afterwards (only for prefix "/" with systemd present). */
  systemd: boolean;
}

export const PATHS = {
  binary: "/usr/bin/kubelet",
  unit: "/etc/systemd/system/kubelet.service",
  defaults: "/etc/default/kubelet",
  config: "/etc/kubernetes/kubelet.yaml",
  manifests: "/etc/kubernetes/manifests",
  rootDir: "/var/lib/kubelet",
  certDir: "/var/lib/kubelet/pki",
  podLogs: "/var/log/pods",
} as const;

export const UNIT = `[Unit]
Description=kubelet: the Kubernetes node agent (bunlet)
Documentation=https://kubernetes.io/docs/reference/command-line-tools-reference/kubelet/
Wants=network-online.target containerd.service
After=network-online.target containerd.service

[Service]
# Flags for this node (e.g. --kubeconfig, --bootstrap-kubeconfig, --node-ip) go in /etc/default/kubelet.
EnvironmentFile=-/etc/default/kubelet
ExecStart=/usr/bin/kubelet --config=/etc/kubernetes/kubelet.yaml $KUBELET_ARGS
Restart=always
StartLimitInterval=0
RestartSec=10
# Stopping the agent must not stop the pods: containers belong to containerd's shims.
KillMode=process

[Install]
WantedBy=multi-user.target
`;

export const DEFAULTS = `# Extra flags for the kubelet, read by kubelet.service. For a cluster, for example:
# KUBELET_ARGS="--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf --rotate-certificates"
KUBELET_ARGS=""
`;

/** Secure by default (CIS): no anonymous access, webhook authn/authz, no read-only port. */
export const CONFIG = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /etc/kubernetes/manifests
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
podLogsDir: /var/log/pods
readOnlyPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
authorization:
  mode: Webhook
rotateCertificates: true
`;

const same = (a: Uint8Array | undefined, b: string | Uint8Array) => a !== undefined && Buffer.compare(Buffer.from(a), Buffer.from(b)) === 0;

export function planInstall(disk: DiskView, opts: InstallOptions): Step[] {
  const steps: Step[] = [];
  for (const [path, mode] of [
    [PATHS.manifests, 0o755],
    [PATHS.rootDir, 0o700],
    [PATHS.certDir, 0o700],
    [PATHS.podLogs, 0o755],
    [posix.dirname(PATHS.unit), 0o755],
  ] as const) {
    if (!disk.isDir(path)) steps.push({ kind: "mkdir", path, mode });
  }
  const file = (path: string, content: string | Uint8Array, mode: number, what: string, overwrite: boolean) => {
    const existing = disk.read(path);
    if (same(existing, content)) steps.push({ kind: "keep", path, why: `${what}: unchanged` });
    else if (existing !== undefined && !overwrite) steps.push({ kind: "keep", path, why: `${what}: exists and was edited; left as it is` });
    else steps.push({ kind: "write", path, content, mode, why: existing === undefined ? what : `${what}: updated` });
  };
  file(PATHS.binary, opts.binary, 0o755, "the kubelet binary", true);
  file(PATHS.unit, UNIT, 0o644, "the systemd unit", true);
  file(PATHS.defaults, DEFAULTS, 0o644, "extra flags for the unit", false);
  file(PATHS.config, CONFIG, 0o644, "the default config file", false);
  if (opts.systemd && steps.some((s) => s.kind === "write" && s.path === PATHS.unit)) {
    steps.push({ kind: "run", argv: ["systemctl", "daemon-reload"], why: "systemd reads the new unit" });
  }
  return steps;
}

/** Removes what install wrote; a config or flags file the operator edited, and data under /var, stay. */
export function planUninstall(disk: DiskView, opts: { systemd: boolean }): Step[] {
  const steps: Step[] = [];
  const ours = (path: string, content: string, what: string) => {
    const existing = disk.read(path);
    if (existing === undefined) return;
    if (same(existing, content)) steps.push({ kind: "remove", path, why: what });
    else steps.push({ kind: "keep", path, why: `${what}: edited since install; left as it is` });
  };
  if (opts.systemd && disk.read(PATHS.unit) !== undefined)
    steps.push({ kind: "run", argv: ["systemctl", "disable", "--now", "kubelet.service"], why: "stop the agent (pods keep running)" });
  if (disk.read(PATHS.binary) !== undefined) steps.push({ kind: "remove", path: PATHS.binary, why: "the kubelet binary" });
  if (disk.read(PATHS.unit) !== undefined) steps.push({ kind: "remove", path: PATHS.unit, why: "the systemd unit" });
  ours(PATHS.defaults, DEFAULTS, "extra flags for the unit");
  ours(PATHS.config, CONFIG, "the default config file");
  if (opts.systemd && steps.some((s) => s.kind === "remove" && s.path === PATHS.unit))
    steps.push({ kind: "run", argv: ["systemctl", "daemon-reload"], why: "systemd forgets the unit" });
  for (const path of [PATHS.rootDir, PATHS.podLogs, PATHS.manifests])
    if (disk.isDir(path)) steps.push({ kind: "keep", path, why: "node data (pods, certificates, logs, manifests)" });
  return steps;
}

/** One line per step; `at` maps a planned path to the one on disk (below --prefix). */
export function describeStep(step: Step, dryRun: boolean, at: (path: string) => string = (p) => p): string {
  const would = dryRun ? "would " : "";
  switch (step.kind) {
    case "mkdir":
      return `${would}create directory ${at(step.path)} (${step.mode.toString(8)})`;
    case "write":
      return `${would}write ${at(step.path)} (${step.why})`;
    case "remove":
      return `${would}remove ${at(step.path)} (${step.why})`;
    case "keep":
      return `keep ${at(step.path)} (${step.why})`;
    case "run":
      return `${would}run ${step.argv.join(" ")} (${step.why})`;
  }
}
