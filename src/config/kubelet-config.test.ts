import { describe, expect, test } from "bun:test";
import * as v from "valibot";
import { readFileSync } from "node:fs";
import { formatIssues } from "./errors.ts";
import { KubeletConfigurationSchema, type KubeletConfiguration } from "./kubelet-config.ts";
import { loadKubeletConfigFile } from "./load-file.ts";

const HEAD = { apiVersion: "kubelet.config.k8s.io/v1beta1", kind: "KubeletConfiguration" };
const parse = (doc: Record<string, unknown>): KubeletConfiguration => v.parse(KubeletConfigurationSchema, { ...HEAD, ...doc });
const errorsOf = (doc: Record<string, unknown>): string[] => {
  const r = v.safeParse(KubeletConfigurationSchema, { ...HEAD, ...doc });
  if (r.success) throw new Error("expected the document to be refused");
  return formatIssues(r.issues, KubeletConfigurationSchema);
};
const fixture = (name: string) => readFileSync(new URL(`./testdata/${name}`, import.meta.url), "utf8");

describe("defaults (pkg/kubelet/apis/config/v1beta1/defaults.go)", () => {
  const d = parse({});
  test.each([
    ["syncFrequency", 60_000],
    ["fileCheckFrequency", 20_000],
    ["httpCheckFrequency", 20_000],
    ["address", "0.0.0.0"],
    ["port", 10250],
    ["readOnlyPort", 0],
    ["healthzPort", 10248],
    ["healthzBindAddress", "127.0.0.1"],
    ["staticPodPath", ""],
    ["containerRuntimeEndpoint", "unix:///run/containerd/containerd.sock"],
    ["imageServiceEndpoint", ""],
    ["runtimeRequestTimeout", 120_000],
    ["cgroupRoot", ""],
    ["cgroupDriver", "cgroupfs"],
    ["cgroupsPerQOS", true],
    ["maxPods", 110],
    ["podPidsLimit", -1],
    ["imageGCHighThresholdPercent", 85],
    ["imageGCLowThresholdPercent", 80],
    ["imageMinimumGCAge", 120_000],
    ["nodeStatusUpdateFrequency", 10_000],
    ["nodeStatusReportFrequency", 300_000],
    ["nodeLeaseDurationSeconds", 40],
    ["serializeImagePulls", true],
    ["registryPullQPS", 5],
    ["registryBurst", 10],
    ["eventRecordQPS", 50],
    ["eventBurst", 100],
    ["kubeAPIQPS", 50],
    ["kubeAPIBurst", 100],
    ["containerLogMaxSize", "10Mi"],
    ["containerLogMaxFiles", 5],
    ["containerLogMaxWorkers", 1],
    ["containerLogMonitorInterval", 10_000],
    ["podLogsDir", "/var/log/pods"],
    ["hairpinMode", "promiscuous-bridge"],
    ["failSwapOn", true],
    ["failCgroupV1", false],
    ["enforceNodeAllocatable", ["pods"]],
    ["resolvConf", "/etc/resolv.conf"],
    ["oomScoreAdj", -999],
    ["cpuManagerPolicy", "none"],
    ["memoryManagerPolicy", "None"],
    ["topologyManagerPolicy", "none"],
    ["topologyManagerScope", "container"],
    ["cpuCFSQuotaPeriod", 100],
    ["evictionPressureTransitionPeriod", 300_000],
    ["streamingConnectionIdleTimeout", 14_400_000],
    ["volumePluginDir", "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"],
    ["contentType", "application/vnd.kubernetes.protobuf"],
    ["maxOpenFiles", 1_000_000],
    ["registerNode", true],
    ["enableServer", true],
    ["configMapAndSecretChangeDetectionStrategy", "Watch"],
    ["memoryThrottlingFactor", 0.9],
    ["iptablesMasqueradeBit", 14],
    ["iptablesDropBit", 15],
  ] as [keyof KubeletConfiguration, unknown][])("%s defaults to %p", (field, value) => {
    expect(d[field]).toEqual(value as never);
  });

  test("authentication and authorization default to the secure settings", () => {
    expect(d.authentication).toEqual({ x509: { clientCAFile: "" }, webhook: { enabled: true, cacheTTL: 120_000 }, anonymous: { enabled: false } });
    expect(d.authorization).toEqual({ mode: "Webhook", webhook: { cacheAuthorizedTTL: 300_000, cacheUnauthorizedTTL: 30_000 } });
  });

  test("evictionHard defaults to the Linux thresholds", () => {
    expect(d.evictionHard).toEqual({
      "memory.available": "100Mi",
      "nodefs.available": "10%",
      "nodefs.inodesFree": "5%",
      "imagefs.available": "15%",
      "imagefs.inodesFree": "5%",
    });
  });

  test("logging defaults", () => {
    expect(d.logging).toEqual({ format: "text", flushFrequency: 5000, verbosity: 0, vmodule: [], options: {} });
  });
});

describe("Go zero values", () => {
  test("zero durations, ports and empty strings mean the default, as kubeadm's config relies on", () => {
    const k = loadKubeletConfigFile("/var/lib/kubelet/config.yaml", { readFile: () => fixture("kubeadm.yaml") });
    expect(k.syncFrequency).toBe(60_000);
    expect(k.runtimeRequestTimeout).toBe(120_000);
    expect(k.containerRuntimeEndpoint).toBe("unix:///run/containerd/containerd.sock");
    expect(k.authentication.webhook.cacheTTL).toBe(120_000);
    expect(k.authorization.webhook.cacheUnauthorizedTTL).toBe(30_000);
    expect(k.logging.flushFrequency).toBe(5000);
    expect(k.cgroupDriver).toBe("systemd");
    expect(k.staticPodPath).toBe("/etc/kubernetes/manifests");
    expect(k.clusterDNS).toEqual(["10.96.0.10"]);
  });

  test("pointer fields keep an explicit zero", () => {
    const k = parse({ healthzPort: 0, readOnlyPort: 0, registryPullQPS: 0, eventRecordQPS: 0, imageGCLowThresholdPercent: 0, enableServer: false, registerNode: false });
    expect([k.healthzPort, k.readOnlyPort, k.registryPullQPS, k.eventRecordQPS, k.imageGCLowThresholdPercent]).toEqual([0, 0, 0, 0, 0]);
    expect([k.enableServer, k.registerNode]).toEqual([false, false]);
  });

  test("derived defaults", () => {
    expect(parse({ nodeStatusUpdateFrequency: "20s" }).nodeStatusReportFrequency).toBe(20_000);
    expect(parse({ maxParallelImagePulls: 3 }).serializeImagePulls).toBe(false);
    expect(parse({ maxParallelImagePulls: 1 }).serializeImagePulls).toBe(true);
    expect(parse({ podPidsLimit: -5 }).podPidsLimit).toBe(-1);
    expect(parse({ evictionHard: {} }).evictionHard).toEqual({});
    expect(parse({ enforceNodeAllocatable: [] }).enforceNodeAllocatable).toEqual([]);
    expect(parse({ featureGates: { KubeletCrashLoopBackOffMax: true } }).crashLoopBackOff.maxContainerRestartPeriod).toBe(300_000);
    expect(parse({}).crashLoopBackOff.maxContainerRestartPeriod).toBeUndefined();
  });

  test("durations come out in milliseconds", () => {
    const k = parse({ syncFrequency: "1h30m", fileCheckFrequency: "500ms", evictionSoftGracePeriod: { "memory.available": "1m30s" } });
    expect([k.syncFrequency, k.fileCheckFrequency, k.evictionSoftGracePeriod["memory.available"]]).toEqual([5_400_000, 500, 90_000]);
  });
});

describe("bad documents name the field and the expectation", () => {
  test.each([
    [{ syncFrequncy: "1m" }, 'field "syncFrequncy": unknown field (did you mean "syncFrequency"?)'],
    [{ authentication: { x509: { clientCaFile: "x" } } }, 'field "authentication.x509.clientCaFile": unknown field (did you mean "clientCAFile"?)'],
    [{ port: "10250" }, 'field "port": expected an integer (int32), got "10250"'],
    [{ maxPods: 1.5 }, 'field "maxPods": expected an integer (int32), got 1.5'],
    [{ port: 2 ** 31 }, 'field "port": expected an integer (int32), got 2147483648'],
    [{ failSwapOn: "no" }, 'field "failSwapOn": expected true or false, got "no"'],
    [{ staticPodPath: 5 }, 'field "staticPodPath": expected a string, got 5'],
    [{ clusterDNS: "10.0.0.10" }, 'field "clusterDNS": expected a list of strings, got "10.0.0.10"'],
    [{ syncFrequency: "10" }, 'field "syncFrequency": expected a duration like "1m0s" or "500ms", got "10"'],
    [{ syncFrequency: 60 }, 'field "syncFrequency": expected a duration string like "1m0s" or "500ms", got 60'],
    [{ evictionHard: { "memory.available": "lots" } }, 'field "evictionHard.memory.available": expected a quantity like "100Mi" or a percentage like "10%", got "lots"'],
    [{ evictionHard: { "memory.free": "1Gi" } }, 'field "evictionHard.memory.free": unknown eviction signal "memory.free"'],
    [{ containerLogMaxSize: "big" }, 'field "containerLogMaxSize": expected a quantity like "100Mi", got "big"'],
    [{ systemReserved: { memory: "1GB" } }, 'field "systemReserved.memory": expected a quantity like "100Mi", got "1GB"'],
    [{ registerWithTaints: [{ key: "a", effect: "Never" }] }, 'field "registerWithTaints[0].effect": taint effect "Never" must be one of NoSchedule, PreferNoSchedule, NoExecute'],
    [{ registerWithTaints: [{ effect: "NoSchedule" }] }, 'field "registerWithTaints[0].key": is required'],
    [{ authentication: "yes" }, 'field "authentication": expected an object, got "yes"'],
    [{ logging: { verbosity: -1 } }, 'field "logging.verbosity": expected a non-negative integer, got -1'],
    [{ featureGates: { Foo: "on" } }, 'field "featureGates.Foo": expected true or false, got "on"'],
    [{ apiVersion: "kubelet.config.k8s.io/v1" }, 'field "apiVersion": expected "kubelet.config.k8s.io/v1beta1", got "kubelet.config.k8s.io/v1"'],
    [{ kind: "Pod" }, 'field "kind": expected "KubeletConfiguration", got "Pod"'],
    [{ offlineAutonomy: { maxAge: "a week" } }, 'field "offlineAutonomy.maxAge": expected a duration like "1m0s" or "500ms", got "a week"'],
    [{ offlineAutonomy: { enable: true } }, 'field "offlineAutonomy.enable": unknown field (did you mean "enabled"?)'],
  ] as [Record<string, unknown>, string][])("%j", (doc, message) => {
    expect(errorsOf(doc).join("\n")).toContain(message);
  });

  test("every problem is reported, not only the first", () => {
    expect(errorsOf({ port: "x", maxPods: "y", bogus: 1 })).toHaveLength(3);
  });
});

test("a complete upstream config file, with every field, is accepted", () => {
  const k = loadKubeletConfigFile("/etc/kubernetes/kubelet.yaml", { readFile: () => fixture("full.yaml") });
  expect(k.tlsMinVersion).toBe("VersionTLS12");
  expect(k.logging).toMatchObject({ verbosity: 2, vmodule: [{ filePattern: "kuberuntime_*", verbosity: 4 }] });
  expect(k.crashLoopBackOff.maxContainerRestartPeriod).toBe(60_000);
  expect(k.registerWithTaints).toEqual([{ key: "node-role.kubernetes.io/control-plane", effect: "NoSchedule" }]);
  expect(k.reservedMemory).toEqual([{ numaNode: 0, limits: { memory: "612Mi" } }]);
  expect(k.shutdownGracePeriod).toBe(30_000);
  expect(k.tracing).toEqual({ endpoint: "localhost:4317", samplingRatePerMillion: 100 });
});

describe("offlineAutonomy (bunlet extension)", () => {
  test("on by default with a maximum checkpoint age of 168h", () => {
    expect(parse({}).offlineAutonomy).toEqual({ enabled: true, maxAge: 168 * 3_600_000 });
  });
  test("can be turned off and bounded", () => {
    expect(parse({ offlineAutonomy: { enabled: false, maxAge: "36h" } }).offlineAutonomy).toEqual({ enabled: false, maxAge: 36 * 3_600_000 });
  });
});
