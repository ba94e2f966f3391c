/** The CRI client the agent talks through, timed for the metrics, once the runtime answers. */
import type { CriService } from "../cri/index.ts";
import { containerdImageStore } from "../images/containerd/client.ts";
import { awaitImagesListed, preloadImages } from "../images/preload.ts";
import { instrumentCri, KubeletMetrics } from "../metrics/kubelet.ts";
import { ProbeMetrics } from "../metrics/probes.ts";
import { RuntimePodsView } from "../pleg/view.ts";
import { waitForRuntime } from "../cri/runtime-info.ts";
import type { Wiring } from "./wiring.ts";

/**
 * The CRI client (deps.cri in tests), wrapped to time every call for the
 * kubelet metrics, once the runtime answers; undefined when the agent was
 * stopped meanwhile. The metrics' running pods and containers are the
 * PLEG's, which serves `runtimePods` once built. On air-gapped nodes, image
 * tarballs go into the runtime, and the CRI lists them, before any pod can
 * ask for them.
 */
export async function connectRuntime(w: Wiring, o: { cri: CriService | undefined; signal: AbortSignal }) {
  const { config, stack, clock, logger } = w;
  const { signal } = o;
  const k = config.kubelet;
  const rawCri =
    o.cri ??
    (await import("../cri/client.ts")).createCriClient({
      endpoint: k.containerRuntimeEndpoint,
      ...(k.imageServiceEndpoint ? { imageEndpoint: k.imageServiceEndpoint } : {}),
      requestTimeoutMs: k.runtimeRequestTimeout,
      logger,
    });
  stack.defer("CRI connection", () => rawCri.close());
  const runtimePods = new RuntimePodsView();
  const metrics = new KubeletMetrics({ nodeName: config.nodeName, processStartMs: clock.now(), runtime: runtimePods });
  const probeMetrics = new ProbeMetrics();
  const cri = instrumentCri(rawCri, metrics, clock);
  await waitForRuntime(cri, { clock, logger, signal });
  if (signal.aborted) return undefined;
  if (k.imagePreloadDir) {
    const store = containerdImageStore(k.imageServiceEndpoint || k.containerRuntimeEndpoint, { logger });
    let preloaded: string[];
    try {
      preloaded = (await preloadImages(k.imagePreloadDir, store, logger)).flatMap((r) => [...r.imported, ...r.unchanged]);
    } finally {
      store.close();
    }
    const isListed = async (image: string) => (await cri.imageStatus({ image })) !== undefined;
    await awaitImagesListed(preloaded, isListed, { clock, logger, signal });
    if (signal.aborted) return undefined;
  }
  return { cri, metrics, probeMetrics, runtimePods };
}
