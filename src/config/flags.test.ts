import { describe, expect, test } from "bun:test";
import * as v from "valibot";
import { FLAGS } from "./flag-table.ts";
import { defaultAgentFlags, parseArgs, parseInt, type FlagTarget } from "./flags.ts";
import { KubeletConfigurationSchema } from "./kubelet-config.ts";

const HEAD = { apiVersion: "kubelet.config.k8s.io/v1beta1", kind: "KubeletConfiguration" };
/** Parses argv and applies it on top of a config file document. */
function run(argv: string[], file: Record<string, unknown> = {}): FlagTarget {
  const t: FlagTarget = { kubelet: v.parse(KubeletConfigurationSchema, { ...HEAD, ...file }), agent: defaultAgentFlags(), warnings: [], seen: new Set() };
  for (const o of parseArgs(argv, FLAGS).occurrences) o.apply(t);
  return t;
}
const refusal = (argv: string[]): string => {
  try {
    parseArgs(argv, FLAGS);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error("expected the arguments to be refused");
};

describe("pflag syntax", () => {
  test("--flag=value and --flag value", () => {
    expect(run(["--max-pods=50"]).kubelet.maxPods).toBe(50);
    expect(run(["--max-pods", "60"]).kubelet.maxPods).toBe(60);
    expect(run(["--hostname-override", "-odd-"]).agent.hostnameOverride).toBe("-odd-");
  });
  test("booleans: --flag, --flag=false, Go's spellings", () => {
    expect(run(["--fail-swap-on=false"]).kubelet.failSwapOn).toBe(false);
    expect(run(["--fail-swap-on=false", "--fail-swap-on"]).kubelet.failSwapOn).toBe(true);
    for (const f of ["0", "f", "F", "FALSE", "False"]) expect(run([`--register-node=${f}`]).kubelet.registerNode).toBe(false);
  });
  test("verbosity: -v=4, -v 4, -v4, --v=4", () => {
    for (const argv of [["-v=4"], ["-v", "4"], ["-v4"], ["--v=4"], ["--v", "4"]]) expect(run(argv).kubelet.logging.verbosity).toBe(4);
  });
  test("the last occurrence of a scalar flag wins", () => {
    expect(run(["--port=1", "--port=2"]).kubelet.port).toBe(2);
  });
  test("integers are read like Go's strconv.ParseInt(s, 0, n)", () => {
    expect([parseInt("-5", 32), parseInt("+7", 32), parseInt("0x1f", 32), parseInt("010", 32), parseInt("0b11", 32), parseInt("0", 32)]).toEqual([-5, 7, 31, 8, 3, 0]);
  });
  test("help and version", () => {
    expect(parseArgs(["--help"], FLAGS).help).toBe(true);
    expect(parseArgs(["-h"], FLAGS).help).toBe(true);
    expect(parseArgs(["--version"], FLAGS).version).toBe(true);
    expect(parseArgs(["--version=raw"], FLAGS).version).toBe(true);
    expect(parseArgs(["--version=false"], FLAGS).version).toBe(false);
    // Like pflag, help stops parsing: a bad flag after it does not matter.
    expect(parseArgs(["--help", "--bogus"], FLAGS).help).toBe(true);
  });
});

describe("lists and maps", () => {
  test("the first occurrence replaces the file's list, later ones append", () => {
    expect(run(["--cluster-dns=10.0.0.10"], { clusterDNS: ["10.96.0.10"] }).kubelet.clusterDNS).toEqual(["10.0.0.10"]);
    expect(run(["--cluster-dns=10.0.0.10,10.0.0.11", "--cluster-dns=10.0.0.12"]).kubelet.clusterDNS).toEqual(["10.0.0.10", "10.0.0.11", "10.0.0.12"]);
  });
  test("map flags replace the file's map, then merge", () => {
    const t = run(["--eviction-hard=memory.available<1Gi", "--eviction-hard=nodefs.available<5%"], { evictionHard: { "imagefs.available": "15%" } });
    expect(t.kubelet.evictionHard).toEqual({ "memory.available": "1Gi", "nodefs.available": "5%" });
    expect(run(["--system-reserved=cpu=100m,memory=1Gi"]).kubelet.systemReserved).toEqual({ cpu: "100m", memory: "1Gi" });
    // Feature gates are the exception: the file's gates stay unless the flag names them, as upstream.
    expect(run(["--feature-gates=A=true,C=false"], { featureGates: { B: true, C: true } }).kubelet.featureGates).toEqual({ A: true, B: true, C: false });
    expect(run(["--eviction-soft-grace-period=memory.available=1m30s"]).kubelet.evictionSoftGracePeriod).toEqual({ "memory.available": 90_000 });
  });
  test("--node-labels merges across occurrences", () => {
    expect(run(["--node-labels=a=1,b=2", "--node-labels", "node.kubernetes.io/role=edge"]).agent.nodeLabels).toEqual({ a: "1", b: "2", "node.kubernetes.io/role": "edge" });
  });
  test("--node-ip takes one IP or a dual-stack pair", () => {
    expect(run(["--node-ip=10.1.2.3"]).agent.nodeIPs).toEqual(["10.1.2.3"]);
    expect(run(["--node-ip=10.1.2.3,fd00::3"]).agent.nodeIPs).toEqual(["10.1.2.3", "fd00::3"]);
  });
  test("--register-with-taints", () => {
    expect(run(["--register-with-taints=dedicated=edge:NoSchedule,gpu:NoExecute"]).kubelet.registerWithTaints).toEqual([
      { key: "dedicated", value: "edge", effect: "NoSchedule" },
      { key: "gpu", effect: "NoExecute" },
    ]);
  });
  test("--reserved-memory appends one NUMA node per occurrence", () => {
    expect(run(["--reserved-memory=0:memory=1Gi", "--reserved-memory", "1:memory=2Gi,hugepages-1Gi=1Gi"]).kubelet.reservedMemory).toEqual([
      { numaNode: 0, limits: { memory: "1Gi" } },
      { numaNode: 1, limits: { memory: "2Gi", "hugepages-1Gi": "1Gi" } },
    ]);
  });
});

describe("flags set the config fields they correspond to", () => {
  test.each([
    [["--sync-frequency=30s"], (t: FlagTarget) => t.kubelet.syncFrequency, 30_000],
    [["--file-check-frequency=5s"], (t: FlagTarget) => t.kubelet.fileCheckFrequency, 5000],
    [["--runtime-request-timeout=1m"], (t: FlagTarget) => t.kubelet.runtimeRequestTimeout, 60_000],
    [["--pod-manifest-path=/etc/pods"], (t: FlagTarget) => t.kubelet.staticPodPath, "/etc/pods"],
    [["--container-runtime-endpoint=unix:///x.sock"], (t: FlagTarget) => t.kubelet.containerRuntimeEndpoint, "unix:///x.sock"],
    [["--image-service-endpoint=unix:///i.sock"], (t: FlagTarget) => t.kubelet.imageServiceEndpoint, "unix:///i.sock"],
    [["--cgroup-root=/kubelet"], (t: FlagTarget) => t.kubelet.cgroupRoot, "/kubelet"],
    [["--cgroup-driver=systemd"], (t: FlagTarget) => t.kubelet.cgroupDriver, "systemd"],
    [["--read-only-port=10255"], (t: FlagTarget) => t.kubelet.readOnlyPort, 10255],
    [["--healthz-bind-address=0.0.0.0"], (t: FlagTarget) => t.kubelet.healthzBindAddress, "0.0.0.0"],
    [["--anonymous-auth=false"], (t: FlagTarget) => t.kubelet.authentication.anonymous.enabled, false],
    [["--authorization-mode=AlwaysAllow"], (t: FlagTarget) => t.kubelet.authorization.mode, "AlwaysAllow"],
    [["--client-ca-file=/ca.crt"], (t: FlagTarget) => t.kubelet.authentication.x509.clientCAFile, "/ca.crt"],
    [["--tls-cert-file=/c.crt"], (t: FlagTarget) => t.kubelet.tlsCertFile, "/c.crt"],
    [["--tls-private-key-file=/c.key"], (t: FlagTarget) => t.kubelet.tlsPrivateKeyFile, "/c.key"],
    [["--provider-id=aws:///i-1"], (t: FlagTarget) => t.kubelet.providerID, "aws:///i-1"],
    [["--cluster-domain=cluster.local"], (t: FlagTarget) => t.kubelet.clusterDomain, "cluster.local"],
    [["--runonce"], (t: FlagTarget) => t.kubelet.runOnce, true],
    [["--pod-max-pids=4096"], (t: FlagTarget) => t.kubelet.podPidsLimit, 4096],
    [["--root-dir=/data/kubelet"], (t: FlagTarget) => t.agent.rootDir, "/data/kubelet"],
    [["--cert-dir=/data/pki"], (t: FlagTarget) => t.agent.certDir, "/data/pki"],
    [["--kubeconfig=/etc/kubelet.conf"], (t: FlagTarget) => t.agent.kubeconfig, "/etc/kubelet.conf"],
    [["--bootstrap-kubeconfig=/etc/bootstrap.conf"], (t: FlagTarget) => t.agent.bootstrapKubeconfig, "/etc/bootstrap.conf"],
    [["--log-flush-frequency=1s"], (t: FlagTarget) => t.kubelet.logging.flushFrequency, 1000],
    [["--event-qps=0"], (t: FlagTarget) => t.kubelet.eventRecordQPS, 0],
  ] as [string[], (t: FlagTarget) => unknown, unknown][])("%p", (argv, get, value) => {
    expect(get(run(argv))).toEqual(value);
  });

  test("--pod-infra-container-image is refused unless empty, --maximum-dead-containers unless -1", () => {
    expect(() => run(["--pod-infra-container-image=registry.k8s.io/pause:3.10"])).toThrow("flag --pod-infra-container-image: not acted on by this agent");
    expect(run(["--pod-infra-container-image="]).warnings).toEqual([]);
    expect(() => run(["--maximum-dead-containers=5"])).toThrow("flag --maximum-dead-containers: not acted on by this agent");
    expect(run(["--maximum-dead-containers=-1"]).warnings).toEqual([]);
  });

  test("every flag of the upstream 1.34 kubelet reference is known", () => {
    const upstream = `address allowed-unsafe-sysctls anonymous-auth authentication-token-webhook authentication-token-webhook-cache-ttl
      authorization-mode authorization-webhook-cache-authorized-ttl authorization-webhook-cache-unauthorized-ttl bootstrap-kubeconfig
      cert-dir cgroup-driver cgroup-root cgroups-per-qos client-ca-file cloud-provider cluster-dns cluster-domain config config-dir
      container-log-max-files container-log-max-size container-runtime-endpoint contention-profiling cpu-cfs-quota cpu-cfs-quota-period
      cpu-manager-policy cpu-manager-policy-options cpu-manager-reconcile-period enable-controller-attach-detach enable-debugging-handlers
      enable-server enforce-node-allocatable event-burst event-qps eviction-hard eviction-max-pod-grace-period eviction-minimum-reclaim
      eviction-pressure-transition-period eviction-soft eviction-soft-grace-period exit-on-lock-contention
      experimental-allocatable-ignore-eviction experimental-mounter-path fail-cgroupv1 fail-swap-on feature-gates file-check-frequency
      hairpin-mode healthz-bind-address healthz-port help hostname-override http-check-frequency image-credential-provider-bin-dir
      image-credential-provider-config image-gc-high-threshold image-gc-low-threshold image-service-endpoint kernel-memcg-notification
      kube-api-burst kube-api-content-type kube-api-qps kube-reserved kube-reserved-cgroup kubeconfig kubelet-cgroups
      local-storage-capacity-isolation lock-file log-flush-frequency log-text-info-buffer-size log-text-split-stream logging-format
      make-iptables-util-chains manifest-url manifest-url-header max-open-files max-pods maximum-dead-containers
      maximum-dead-containers-per-container memory-manager-policy minimum-container-ttl-duration minimum-image-ttl-duration node-ip
      node-labels node-status-max-images node-status-update-frequency oom-score-adj pod-cidr pod-infra-container-image
      pod-manifest-path pod-max-pids pods-per-core port protect-kernel-defaults provider-id qos-reserved read-only-port register-node
      register-with-taints registry-burst registry-qps reserved-cpus reserved-memory resolv-conf root-dir rotate-certificates
      rotate-server-certificates runonce runtime-cgroups runtime-request-timeout seccomp-default serialize-image-pulls
      streaming-connection-idle-timeout sync-frequency system-cgroups system-reserved system-reserved-cgroup tls-cert-file
      tls-cipher-suites tls-min-version tls-private-key-file topology-manager-policy topology-manager-policy-options
      topology-manager-scope v version vmodule volume-plugin-dir volume-stats-agg-period`.split(/\s+/);
    const known = new Set(FLAGS.map((f) => f.name));
    expect(upstream.filter((name) => !known.has(name))).toEqual([]);
  });

  test("every flag has a unique name and help", () => {
    const names = FLAGS.map((f) => f.name);
    expect(new Set(names).size).toBe(names.length);
    for (const f of FLAGS) expect(f.help.length).toBeGreaterThan(10);
  });
});

describe("bad command lines name the flag and what it expected", () => {
  test.each([
    [["--bogus"], "unknown flag --bogus"],
    [["--max-pod=5"], "unknown flag --max-pod (did you mean --max-pods?)"],
    [["-x"], "unknown shorthand flag 'x' in -x"],
    [["-config=/etc/k.yaml"], "unknown shorthand flag 'c' in -config=/etc/k.yaml"],
    [["---port=1"], "bad flag syntax: ---port=1"],
    [["--config"], "flag --config needs a value (string)"],
    [["-v"], "flag -v (--v) needs a value (Level)"],
    [["--max-pods=many"], 'flag --max-pods: expected an integer (int32), got "many"'],
    [["--max-pods=99999999999"], 'flag --max-pods: expected an integer (int32), got "99999999999": out of range'],
    [["--fail-swap-on=yes"], 'flag --fail-swap-on: expected true or false, got "yes"'],
    [["--sync-frequency=10"], 'flag --sync-frequency: missing unit in duration "10"'],
    [["--sync-frequency=1d"], 'flag --sync-frequency: unknown unit "d" in duration "1d"'],
    [["--node-ip=10.0.0"], 'flag --node-ip: expected an IP address, got "10.0.0"'],
    [["--node-ip=10.0.0.1,10.0.0.2"], "flag --node-ip: expected a single IP or a dual-stack pair"],
    [["--address=localhost"], 'flag --address: expected an IP address, got "localhost"'],
    [["--cluster-dns=10.0.0.10,dns"], 'flag --cluster-dns: expected an IP address, got "dns"'],
    [["--node-labels=role"], 'flag --node-labels: malformed pair "role", expected key=value'],
    [["--node-labels=bad key=x"], 'flag --node-labels: key "bad key": name part must consist of alphanumerics'],
    [["--node-labels=a=-x-"], 'flag --node-labels: value "-x-" must consist of alphanumerics'],
    [["--node-labels=kubernetes.io/role=master"], "flag --node-labels: label \"kubernetes.io/role\" is in the 'kubernetes.io' or 'k8s.io' namespace"],
    [["--register-with-taints=a=b:Sometimes"], 'flag --register-with-taints: invalid taint "a=b:Sometimes": taint effect "Sometimes" must be one of'],
    [["--register-with-taints=a=b"], 'flag --register-with-taints: invalid taint "a=b": expected <key>=<value>:<effect>'],
    [["--eviction-hard=memory.available<lots"], 'flag --eviction-hard: "lots" is not a quantity'],
    [["--eviction-hard=memory.free<1Gi"], 'flag --eviction-hard: unknown eviction signal "memory.free"'],
    [["--system-reserved=memory=1GB"], 'flag --system-reserved: memory: expected a quantity like "500Mi", got "1GB"'],
    [["--container-log-max-size=big"], 'flag --container-log-max-size: expected a quantity like "10Mi", got "big"'],
    [["--feature-gates=A=maybe"], 'flag --feature-gates: expected true or false, got "maybe"'],
    [["--config-dir=/etc/kubelet.conf.d"], "flag --config-dir: drop-in config directories are not supported yet"],
    [["--version=v1.2.3"], 'flag --version: expected true, false or raw, got "v1.2.3"'],
    [["--maximum-dead-containers=x"], 'flag --maximum-dead-containers: expected an integer (int32), got "x"'],
    [["run"], 'unexpected argument "run": the kubelet takes flags, and the subcommands install and uninstall as its first argument (kubelet --help)'],
    [["--v=2", "install"], 'unexpected argument "install": the kubelet takes flags, and the subcommands install and uninstall as its first argument'],
    [["--", "--port=1"], 'unexpected argument "--port=1"'],
  ])("%p", (argv, message) => {
    expect(refusal(argv)).toContain(message);
  });
});
