/** The pod sources (static files, URL, the API server) and their merge. */
import type { CriService } from "../cri/index.ts";
import type { MirrorPods } from "../mirror/index.ts";
import { ApiServerSource } from "../sources/apiserver.ts";
import type { offlineCheckpoint } from "../sources/pod-checkpoint.ts";
import { FileSource } from "../sources/file.ts";
import { UrlSource } from "../sources/url.ts";
import { PodConfig } from "../sources/podconfig.ts";
import type { PodSource } from "../sources/types.ts";
import type { ApiStatusManager } from "../status/api.ts";
import type { Wiring } from "./wiring.ts";
import type { Cluster } from "./cluster.ts";

/** The pod sources (static files, URL, the API server's pods for this node) and their merge, each source disposed with the stack. */
export async function buildPodSources(
  w: Wiring,
  o: {
    cri: CriService;
    cluster: Cluster | undefined;
    mirrors: MirrorPods | undefined;
    apiStatus: ApiStatusManager | undefined;
    autonomy: ReturnType<typeof offlineCheckpoint>;
  },
): Promise<{ sources: PodSource[]; podConfig: PodConfig }> {
  const { config, stack, clock, logger } = w;
  const { cri, cluster, mirrors, apiStatus, autonomy } = o;
  const k = config.kubelet;
  const sources: PodSource[] = [];
  // The pods the runtime has at startup: a static pod running under the UID this agent computed before it
  // computed the upstream kubelet's keeps it (sources/defaults.ts staticPodUid), so an upgrade restarts nothing.
  const runtimePodUids: ReadonlySet<string> | undefined =
    k.staticPodPath || k.staticPodURL
      ? await cri.listPodSandbox().then(
          (sandboxes) => new Set(sandboxes.map((s) => s.metadata?.uid ?? "").filter((uid) => uid !== "")),
          (err: unknown) => {
            logger.warn("could not list the runtime's pods; static pods get the upstream kubelet's UIDs", { err });
            return undefined;
          },
        )
      : undefined;
  if (k.staticPodPath) {
    sources.push(
      stack.use("static pod files", new FileSource({ path: k.staticPodPath, nodeName: config.nodeName, checkFrequencyMs: k.fileCheckFrequency, clock, logger, runtimePodUids })),
    );
  }
  if (k.staticPodURL) {
    sources.push(
      stack.use(
        "static pod URL",
        new UrlSource({ url: k.staticPodURL, headers: k.staticPodURLHeader, nodeName: config.nodeName, checkFrequencyMs: k.httpCheckFrequency, clock, logger, runtimePodUids }),
      ),
    );
  }
  if (cluster) {
    sources.push(
      stack.use(
        "API server pod source",
        new ApiServerSource({
          api: cluster.api,
          nodeName: config.nodeName,
          clock,
          logger,
          mirrorPods: [...(mirrors ? [mirrors] : []), ...(apiStatus ? [apiStatus] : [])],
          ...(autonomy ? { checkpoint: autonomy } : {}),
        }),
      ),
    );
  }
  const podConfig = new PodConfig(sources.map((s) => s.name));
  return { sources, podConfig };
}
