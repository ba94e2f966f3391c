// What the CPU and memory manager integration tests share: static pods with
// one sleeping container (Guaranteed when given resources) and the cpuset a
// running container's cgroup really has, read through its process.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { detectCgroupLayout, nodeCgroupFs } from "../../src/cgroups/index.ts";
import type { CriService } from "../../src/cri/index.ts";

/** Where the cpuset controller is mounted: v1's cpuset hierarchy, or v2's unified one. */
export function cpusetMount(): string {
  const layout = detectCgroupLayout("/", nodeCgroupFs);
  return layout.version === "v1" ? (layout.hierarchies.find((h) => h.controllers.includes("cpuset"))?.mountPoint ?? "") : (layout.unified?.mountPoint ?? "");
}

/** A static pod in `manifests` whose container "main" sleeps; Guaranteed (limits = requests) when `resources` are given. */
export function putSleepingPod(o: { manifests: string; image: string }, name: string, resources?: Record<string, string>): void {
  const manifest = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default" },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: "main",
          image: o.image,
          imagePullPolicy: "IfNotPresent",
          command: ["sleep", "3600"],
          ...(resources ? { resources: { limits: resources, requests: resources } } : {}),
        },
      ],
    },
  };
  writeFileSync(join(o.manifests, `${name}.json`), JSON.stringify(manifest));
}

/**
 * The running container "main" of the pod whose name starts with `podName`:
 * its ID, containerd's verbose info (pid, the OCI spec runc got) and its
 * cgroup's `cpuset.<file>` (v1: in the cpuset hierarchy; v2: the kernel's
 * effective set), from its process's /proc/<pid>/cgroup.
 */
export async function runningMain(
  cri: CriService,
  podName: string,
  file: "cpus" | "mems",
): Promise<{ id: string; info: { pid: number; runtimeSpec?: { linux?: { resources?: { cpu?: { mems?: string } } } } }; cpuset: string } | undefined> {
  const all = await cri.listContainers({ state: { state: 1 } });
  const c = all.find((x) => x.labels["io.kubernetes.pod.name"]?.startsWith(podName) && x.labels["io.kubernetes.container.name"] === "main");
  if (!c) return undefined;
  const status = await cri.containerStatus(c.id, true);
  const info = JSON.parse(status.info["info"] ?? "{}");
  const lines = readFileSync(`/proc/${info.pid}/cgroup`, "utf8")
    .trim()
    .split("\n")
    .map((l) => l.split(":"));
  const v1 = lines.find(([, controllers]) => controllers!.split(",").includes("cpuset"));
  const path = v1
    ? join(cpusetMount(), v1.slice(2).join(":"), `cpuset.${file}`)
    : join(
        cpusetMount(),
        lines
          .find(([h]) => h === "0")!
          .slice(2)
          .join(":"),
        `cpuset.${file}.effective`,
      );
  return { id: c.id, info, cpuset: readFileSync(path, "utf8").trim() };
}
