/** The prober's public surface: the manager the agent wires in, the probe kinds, the Probe schema. */
export { createProbeManager, type ProbeManager, type ProbeManagerOptions, type RunningContainer } from "./manager.ts";
export { execProbe, grpcProbe, httpProbe, resolvePort, runProbe, tcpProbe, type ProbeTarget } from "./probes.ts";
export { ResultsCache, type ResultUpdate } from "./results.ts";
export { parseProbe, Probe, type ProbeSpec, type ProbeType } from "./schema.ts";
export { MAX_PROBE_OUTPUT, probeUserAgent, type ProbeOutcome, type ProbeResult } from "./types.ts";
