import type { Logger } from "./util/log.ts";
import type { AgentConfig } from "./config/index.ts";

/** Builds every subsystem from config and runs until `signal` aborts. */
export async function runAgent(config: AgentConfig, deps: { logger: Logger; signal: AbortSignal }): Promise<void> {
  deps.logger.info("agent wiring not yet implemented", { node: config.nodeName });
  await new Promise<void>((resolve) => deps.signal.addEventListener("abort", () => resolve(), { once: true }));
}
