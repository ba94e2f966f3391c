// One benchmark pod straight through the CRI, as the runtime floor and the
// pacing measurement start it: a sandbox under the harness's cgroup parent,
// then one busybox `sleep 3600` container created and started in it.
import { ContainerConfig, PodSandboxConfig, type CriService } from "../../src/cri/index.ts";
import type { ContainerdHandle } from "../../test/harness/containerd.ts";

export interface BenchSandbox {
  id: string;
  config: PodSandboxConfig;
}

/** RunPodSandbox for pod `name` (also its UID) of `namespace`; its logs go under the instance's directory. */
export async function runBenchSandbox(cri: CriService, ctd: ContainerdHandle, namespace: string, name: string): Promise<BenchSandbox> {
  const config = PodSandboxConfig.create({
    metadata: { name, namespace, uid: name, attempt: 0 },
    linux: { cgroupParent: `${ctd.cgroupParent}/${namespace}` },
    logDirectory: `${ctd.dir}/${namespace}-logs/${name}`,
  });
  return { id: await cri.runPodSandbox(config), config };
}

/** CreateContainer + StartContainer of the pod's one container. */
export async function startBenchContainer(cri: CriService, ctd: ContainerdHandle, sandbox: BenchSandbox): Promise<void> {
  const container = ContainerConfig.create({ metadata: { name: "c", attempt: 0 }, image: { image: ctd.busyboxImage }, command: ["sleep", "3600"], logPath: "c.log" });
  await cri.startContainer(await cri.createContainer(sandbox.id, container, sandbox.config));
}
