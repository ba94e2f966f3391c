import { describe, expect, test } from "bun:test";
import { applyDefaults } from "../config/defaults.ts";
import type { AgentConfig } from "../config/index.ts";
import { apiClientLimits } from "./cluster.ts";

const kubelet = (over: Record<string, number>) =>
  applyDefaults({ apiVersion: "kubelet.config.k8s.io/v1beta1", kind: "KubeletConfiguration", ...over } as never) as AgentConfig["kubelet"];

describe("apiClientLimits: upstream's three API clients", () => {
  test("defaults: main 50/100, events 50/100, the heartbeat (node status, lease) unlimited", () => {
    expect(apiClientLimits(kubelet({}))).toEqual({ main: { qps: 50, burst: 100 }, events: { qps: 50, burst: 100 }, heartbeat: { qps: -1, burst: 0, timeoutMs: 10_000 } });
  });

  test("the heartbeat's requests time out after nodeStatusUpdateFrequency, at most the lease's duration (upstream's heartbeat client)", () => {
    expect(apiClientLimits(kubelet({})).heartbeat.timeoutMs).toBe(10_000);
    expect(apiClientLimits(kubelet({ nodeStatusUpdateFrequency: 60_000, nodeLeaseDurationSeconds: 40 })).heartbeat.timeoutMs).toBe(40_000);
    expect(apiClientLimits(kubelet({ nodeStatusUpdateFrequency: 4_000 })).heartbeat.timeoutMs).toBe(4_000);
  });

  test("kubeAPIQPS 0 and eventRecordQPS 0 are client-go's 5 QPS, not unlimited", () => {
    const limits = apiClientLimits(kubelet({ kubeAPIQPS: 0, eventRecordQPS: 0, eventBurst: 0 }));
    expect(limits.main).toEqual({ qps: 5, burst: 100 });
    expect(limits.events).toEqual({ qps: 5, burst: 100 }); // a burst of 0 is defaulted to 100 first, as upstream
  });
});
