/** The builders of src/agent/ are the wiring of agent.ts, one per subsystem or group; each takes a Wiring and what it needs built before it. */
import type { AgentConfig } from "../config/index.ts";
import type { Clock } from "../util/clock.ts";
import type { DisposalStack } from "../util/disposal.ts";
import type { Logger } from "../util/log.ts";

/**
 * What every builder of the agent is given: the config, the stack that disposes what it builds (in reverse order, each
 * part by name and within a bound), the clock and the logger.
 */
export interface Wiring {
  config: AgentConfig;
  stack: DisposalStack;
  clock: Clock;
  logger: Logger;
}
