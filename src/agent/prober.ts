/** The prober and what it tells the pod path: restarts after liveness failures, readiness, sync requests. */
import type { CriService } from "../cri/index.ts";
import type { EventRecorder } from "../events/recorder.ts";
import { createProbeManager } from "../prober/index.ts";
import type { ProbeMetrics } from "../metrics/probes.ts";
import { LivenessRestarts, ProbeVerdicts } from "../prober/verdicts.ts";
import { Requests } from "../util/requests.ts";
import type { MirrorPods } from "../mirror/index.ts";
import { LastReported } from "../status/api.ts";
import type { Wiring } from "./wiring.ts";

/**
 * The prober: liveness and startup failures restart that container, readiness
 * feeds the statuses. It is built before the pod workers: the syncs it asks
 * for go through `syncRequests`, which the workers serve.
 */
export function buildProber(w: Wiring, o: { cri: CriService; recorder: EventRecorder; probeMetrics: ProbeMetrics; mirrors: MirrorPods | undefined; random: () => number }) {
  const { stack, clock, logger } = w;
  const { cri, recorder, probeMetrics, mirrors, random } = o;
  const syncRequests = new Requests<string>();
  const restarts = new LivenessRestarts(syncRequests);
  const prober = stack.use(
    "prober",
    createProbeManager({
      cri,
      clock,
      random,
      logger,
      recorder,
      restarts,
      syncRequests,
      metrics: probeMetrics,
      // What the kubelet before this one (upstream, or this agent before a restart) reported: a ready pod stays Ready.
      reported: new LastReported(mirrors),
    }),
  );
  const verdicts = new ProbeVerdicts(prober, restarts);
  return { syncRequests, verdicts };
}
