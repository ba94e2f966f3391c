import { describe, expect, test } from "bun:test";
import { loadConfig, type AgentConfig, type ConfigDeps } from "./index.ts";

const HEAD = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
function deps(files: Record<string, string> = {}, host = "Node-1.Example.com"): ConfigDeps & { reads: string[] } {
  const reads: string[] = [];
  return {
    reads,
    hostname: () => host,
    cwd: () => "/work",
    readFile: (path) => {
      reads.push(path);
      const c = files[path];
      if (c === undefined) throw Object.assign(new Error("ENOENT"), { code: "ENOENT" });
      return c;
    },
  };
}
function run(argv: string[], d = deps()): { config: AgentConfig; warnings: string[] } {
  const r = loadConfig(argv, d);
  if (r.kind !== "run") throw new Error(`expected run, got ${JSON.stringify(r)}`);
  return r;
}
function error(argv: string[], d = deps()): string {
  const r = loadConfig(argv, d);
  if (r.kind !== "error") throw new Error(`expected an error, got ${r.kind}`);
  return r.message;
}

describe("loadConfig", () => {
  test("standalone, no flags: the host name, lowercased, and upstream's flag defaults", () => {
    const { config, warnings } = run([]);
    expect(config.nodeName).toBe("node-1.example.com");
    expect(config.kubeconfig).toBeUndefined();
    expect(config).toMatchObject({ rootDir: "/var/lib/kubelet", certDir: "/var/lib/kubelet/pki", runOnce: false, verbosity: 0, registerNode: true, nodeIPs: [], nodeLabels: {} });
    // cmd/kubelet/app/options applyLegacyDefaults: without --config the old, open flag defaults apply.
    expect(config.kubelet.authentication.anonymous.enabled).toBe(true);
    expect(config.kubelet.authentication.webhook.enabled).toBe(false);
    expect(config.kubelet.authorization.mode).toBe("AlwaysAllow");
    // Deliberately unlike upstream: the unauthenticated read-only port stays off.
    expect(config.kubelet.readOnlyPort).toBe(0);
    expect(warnings).toEqual([expect.stringContaining("no --config given")]);
  });

  test("with --config the config file's secure defaults apply", () => {
    const { config, warnings } = run(["--config=/etc/kubelet.yaml"], deps({ "/etc/kubelet.yaml": HEAD }));
    expect(config.kubelet.authentication.anonymous.enabled).toBe(false);
    expect(config.kubelet.authorization.mode).toBe("Webhook");
    expect(config.kubelet.readOnlyPort).toBe(0);
    expect(config.configFile).toBe("/etc/kubelet.yaml");
    expect(warnings).toEqual([]);
  });

  test("flags override the file; the file overrides defaults; flags not given change nothing", () => {
    const d = deps({ "/etc/kubelet.yaml": `${HEAD}maxPods: 50\nsyncFrequency: 30s\nstaticPodPath: /etc/pods\nlogging:\n  verbosity: 3\n` });
    const { config } = run(["--config", "/etc/kubelet.yaml", "--max-pods=20", "-v=5"], d);
    expect(config.kubelet.maxPods).toBe(20);
    expect(config.verbosity).toBe(5);
    expect(config.kubelet.syncFrequency).toBe(30_000);
    expect(config.kubelet.staticPodPath).toBe("/etc/pods");
    expect(config.kubelet.fileCheckFrequency).toBe(20_000);
  });

  test("flags override the file regardless of their position relative to --config", () => {
    const d = deps({ "/etc/kubelet.yaml": `${HEAD}maxPods: 50\n` });
    expect(run(["--max-pods=20", "--config=/etc/kubelet.yaml"], d).config.kubelet.maxPods).toBe(20);
  });

  test("relative paths in the file resolve against its directory; a relative --config against the working directory", () => {
    const d = deps({ "conf/kubelet.yaml": `${HEAD}staticPodPath: manifests\n` });
    expect(run(["--config=conf/kubelet.yaml"], d).config.kubelet.staticPodPath).toBe("/work/conf/manifests");
  });

  test("agent settings from flags", () => {
    const { config } = run([
      "--kubeconfig=/etc/kubernetes/kubelet.conf",
      "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
      "--hostname-override=  Worker-7 ",
      "--node-ip=192.168.1.7",
      "--node-labels=tier=edge",
      "--root-dir=/data/kubelet",
      "--runonce",
      "--register-node=false",
      "--cloud-provider=",
    ]);
    expect(config).toMatchObject({
      nodeName: "worker-7",
      kubeconfig: "/etc/kubernetes/kubelet.conf",
      bootstrapKubeconfig: "/etc/kubernetes/bootstrap-kubelet.conf",
      nodeIPs: ["192.168.1.7"],
      nodeLabels: { tier: "edge" },
      rootDir: "/data/kubelet",
      runOnce: true,
      registerNode: false,
      cloudProvider: "",
    });
  });

  test("mergeDefaultEvictionSettings fills in the signals the config leaves out, after flags", () => {
    const d = deps({ "/k.yaml": `${HEAD}mergeDefaultEvictionSettings: true\nevictionHard:\n  memory.available: 500Mi\n` });
    expect(run(["--config=/k.yaml"], d).config.kubelet.evictionHard).toMatchObject({ "memory.available": "500Mi", "nodefs.available": "10%" });
    const plain = deps({ "/k.yaml": `${HEAD}evictionHard:\n  memory.available: 500Mi\n` });
    expect(run(["--config=/k.yaml"], plain).config.kubelet.evictionHard).toEqual({ "memory.available": "500Mi" });
  });

  test("help and version; version is answered before the config file is read", () => {
    const help = loadConfig(["--help"], deps());
    expect(help.kind).toBe("help");
    if (help.kind === "help") {
      expect(help.text).toContain("Usage:\n  kubelet [flags]");
      expect(help.text).toContain("--read-only-port int32");
      // (wrapped at 100 columns)
      expect(help.text.replace(/\s+/g, " ")).toContain("Port of the unauthenticated read-only API; 0 disables it. (config: readOnlyPort)");
      expect(help.text).toMatch(/-v, --v Level\s+Log verbosity level/);
    }
    const d = deps();
    expect(loadConfig(["--config=/missing.yaml", "--version"], d)).toEqual({ kind: "version" });
    expect(d.reads).toEqual([]);
  });

  test("flags this agent does not act on exit 2 unless given their default", () => {
    const r = loadConfig(["--config=/k.yaml", "--pod-infra-container-image=pause:3.10"], deps({ "/k.yaml": HEAD }));
    expect(r).toEqual({
      kind: "error",
      message: expect.stringContaining("flag --pod-infra-container-image: not acted on by this agent: the container runtime's own configuration chooses the sandbox image"),
    });
    expect(run(["--config=/k.yaml", "--pod-infra-container-image="], deps({ "/k.yaml": HEAD })).warnings).toEqual([]);
  });
});

describe("errors", () => {
  test.each([
    [["--bogus"], {}, "unknown flag --bogus"],
    [["--config=/nope.yaml"], {}, "config file /nope.yaml: no such file"],
    [["--config=/k.yaml"], { "/k.yaml": `${HEAD}maxPods: lots\n` }, 'config file /k.yaml: field "maxPods": expected an integer (int32), got "lots"'],
    [["--port=0"], {}, 'invalid configuration: field "port" (--port): must be between 1 and 65535, got 0'],
    [
      ["--image-gc-low-threshold=90"],
      {},
      'invalid configuration: field "imageGCLowThresholdPercent" (--image-gc-low-threshold): must be less than imageGCHighThresholdPercent (85), got 90',
    ],
    [["--cgroup-driver=cgroupv2"], {}, 'field "cgroupDriver" (--cgroup-driver): must be one of "cgroupfs", "systemd", got "cgroupv2"'],
    [
      ["--kube-api-content-type=application/yaml"],
      {},
      'field "contentType" (--kube-api-content-type): must be one of "application/vnd.kubernetes.protobuf", "application/json", got "application/yaml"',
    ],
    [["--authorization-mode=RBAC"], {}, 'field "authorization.mode" (--authorization-mode): must be one of "AlwaysAllow", "Webhook", got "RBAC"'],
    [["--sync-frequency=-1s"], {}, 'field "syncFrequency" (--sync-frequency): must be greater than 0, got -1000'],
    [["--config=/k.yaml"], { "/k.yaml": `${HEAD}clusterDNS: [dns.local]\n` }, 'field "clusterDNS[0]" (--cluster-dns): expected an IP address, got "dns.local"'],
    [["--config=/k.yaml"], { "/k.yaml": `${HEAD}cgroupsPerQOS: false\n` }, 'field "enforceNodeAllocatable" (--enforce-node-allocatable): must be empty unless cgroupsPerQOS'],
    [["--config=/k.yaml"], { "/k.yaml": `${HEAD}offlineAutonomy: {maxAge: 0s}\n` }, 'invalid configuration: field "offlineAutonomy.maxAge": must be greater than 0, got 0'],
    [
      ["--allowed-unsafe-sysctls=kernel.msg*,vm.swappiness"],
      {},
      'field "allowedUnsafeSysctls[1]" (--allowed-unsafe-sysctls): the sysctls "vm.swappiness" are not known to be namespaced',
    ],
    [["--tls-min-version=VersionTLS14"], {}, 'field "tlsMinVersion" (--tls-min-version): unknown TLS version "VersionTLS14"'],
    [
      ["--config=/k.yaml"],
      { "/k.yaml": `${HEAD}tlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ECDHE-RSA-AES128-GCM-SHA256]\n` },
      'field "tlsCipherSuites[1]" (--tls-cipher-suites): unknown cipher suite "ECDHE-RSA-AES128-GCM-SHA256"',
    ],
    [["--config=/k.yaml"], { "/k.yaml": `${HEAD}userNamespaces: {idsPerPod: 1000}\n` }, 'field "userNamespaces.idsPerPod": must not be less than 65536'],
    [["--config=/k.yaml"], { "/k.yaml": `${HEAD}userNamespaces: {idsPerPod: 100000}\n` }, 'field "userNamespaces.idsPerPod": must be a multiple of 65536'],
    [["--config=/k.yaml"], { "/k.yaml": `${HEAD}userNamespaces: {idsPerPod: 4295032832}\n` }, 'field "userNamespaces.idsPerPod": must not be more than 4294967295'],
    [["--bootstrap-kubeconfig=/b.conf"], {}, "flag --bootstrap-kubeconfig needs --kubeconfig"],
    [["--hostname-override=node_1"], {}, 'node name from --hostname-override: "node_1" must be a lowercase RFC 1123 subdomain'],
    [["--config=/k.yaml"], { "/k.yaml": `${HEAD}enableSystemLogQuery: true\n` }, 'field "enableSystemLogQuery": needs the NodeLogQuery feature gate'],
    [
      ["--config=/k.yaml", "--feature-gates=NodeLogQuery=true"],
      { "/k.yaml": `${HEAD}enableSystemLogQuery: true\nenableSystemLogHandler: false\n` },
      'field "enableSystemLogQuery": needs enableSystemLogHandler',
    ],
  ] as [string[], Record<string, string>, string][])("%p", (argv, files, message) => {
    expect(error(argv, deps(files))).toContain(message);
  });

  test("a bad host name is reported as such", () => {
    expect(error([], deps({}, "   "))).toBe("node name from the host name is empty");
    expect(error([], deps({}, "a".repeat(254)))).toContain("must be no more than 253 characters");
  });

  test("several problems are all reported", () => {
    expect(error(["--port=0", "--max-pods=-1"]).split("\n")).toHaveLength(2);
  });
});

describe("cgroupDriverSet: chosen, not defaulted (a runtime reporting another driver is then an error)", () => {
  test("defaulted without a file, and with a file that does not set it", () => {
    expect(run([]).config.cgroupDriverSet).toBe(false);
    expect(run(["--config=/c.yaml"], deps({ "/c.yaml": HEAD })).config.cgroupDriverSet).toBe(false);
    expect(run(["--config=/c.yaml"], deps({ "/c.yaml": HEAD })).config.kubelet.cgroupDriver).toBe("cgroupfs");
  });

  test("set in the file, or by --cgroup-driver", () => {
    expect(run(["--config=/c.yaml"], deps({ "/c.yaml": HEAD + "cgroupDriver: systemd\n" })).config).toMatchObject({ cgroupDriverSet: true, kubelet: { cgroupDriver: "systemd" } });
    expect(run(["--config=/c.yaml"], deps({ "/c.yaml": HEAD + "cgroupDriver: cgroupfs\n" })).config.cgroupDriverSet).toBe(true);
    expect(run(["--cgroup-driver=systemd"]).config).toMatchObject({ cgroupDriverSet: true, kubelet: { cgroupDriver: "systemd" } });
  });
});
