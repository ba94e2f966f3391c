/**
 * A CRI runtime's options for tests: the agent passes every source and
 * policy (agent.ts); a test names the CRI, the host side and the node
 * settings, and what it looks at, and gets the standalone node's "none"
 * for the rest (no API objects, services, runtime classes or devices, no
 * resize, no probe verdicts), real backoffs on the test's clock, a pull
 * queue of one, container resources from cgroups/ on a 4 GiB node, events
 * and metrics to the logger and nowhere.
 */
import { noPodObjects } from "../api/objects.ts";
import { containerLinuxResources } from "../cgroups/index.ts";
import { LogEventRecorder } from "../events/recorder.ts";
import { defaultRuntimeClasses } from "../runtimeclass/index.ts";
import { noServiceEnv } from "../services/index.ts";
import { Backoff } from "./backoff.ts";
import type { NodeSettings } from "./cri-config.ts";
import type { CriPodRuntimeOptions } from "./manager.ts";
import type { ContainerConfigSources, ContainerDevices, StartPolicy } from "./options.ts";
import { PullQueue } from "./pull-queue.ts";
import { PodUserNamespaces } from "../userns/index.ts";

export const noDevices: ContainerDevices = {
  runOptions: async () => ({ envs: [], mounts: [], devices: [], annotations: {}, cdiDevices: [] }),
};

type Named = Pick<CriPodRuntimeOptions, "cri" | "clock" | "logger" | "host">;

/** A node's settings for tests: node "test-node", no resolver, no cluster DNS or domain, unless the test says otherwise. */
export function testNode(o: Partial<NodeSettings> & Pick<NodeSettings, "podLogsDir">): NodeSettings {
  return { nodeName: "test-node", podsCgroupParent: "", hostDns: { servers: [], searches: [], options: [] }, clusterDns: [], clusterDomain: "", ...o };
}

export function testRuntimeOptions(
  o: Named &
    Partial<Pick<CriPodRuntimeOptions, "recorder" | "metrics">> & {
      node: ContainerConfigSources["node"];
      config?: Partial<Omit<ContainerConfigSources, "node">>;
      start?: Partial<StartPolicy>;
    },
): CriPodRuntimeOptions {
  return {
    cri: o.cri,
    clock: o.clock,
    logger: o.logger,
    host: o.host,
    recorder: o.recorder ?? new LogEventRecorder(o.logger),
    metrics: o.metrics ?? { containerStarted: () => {} },
    config: {
      node: o.node,
      hostIP: undefined,
      resources: {
        resourcesOf: (pod, container) =>
          containerLinuxResources(pod, container, { memoryCapacityBytes: 4 * 1024 ** 3, cpuCFSQuota: true, cpuCFSQuotaPeriodUs: 100_000, oomGroup: false, hugePageSizes: [] }),
      },
      podObjects: noPodObjects,
      nodeAllocatable: { cpuMilli: 0, memoryBytes: 0, ephemeralStorageBytes: 0 },
      serviceEnv: noServiceEnv,
      runtimeClasses: defaultRuntimeClasses,
      devices: noDevices,
      // The UserNamespacesSupport gate off: nothing sent, hostUsers refused (a test passes its own PodUserNamespaces).
      userNamespaces: new PodUserNamespaces(undefined, o.cri),
      ...o.config,
    },
    start: {
      crashLoop: Backoff.crashLoop(o.clock),
      imagePulls: Backoff.crashLoop(o.clock),
      pullQueue: new PullQueue(1),
      probes: { unhealthy: () => new Map(), isStarted: () => true },
      resize: undefined,
      ...o.start,
    },
  };
}
