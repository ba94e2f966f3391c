/**
 * Upstream's CSINode initialisation as a readiness gate: from the start of
 * a cluster-mode agent the node reports "CSINode is not yet initialized"
 * (Ready False) until its CSINode exists; a failed attempt reports
 * "failed to initialize CSINode: <why>" and is tried again with upstream's
 * back-off (15 ms growing sixfold, six steps over about 140 s). Where
 * upstream then exits for its supervisor to restart it, this agent keeps
 * trying every 140 s: the node stays NotReady with the reason meanwhile.
 */
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { StorageHealth } from "../node/controller.ts";
import type { RequestSink } from "../util/requests.ts";
import type { CsiDrivers } from "./drivers.ts";

const STEPS_MS = [15, 90, 540, 3_240, 19_440, 116_640];
const NOT_YET = "CSINode is not yet initialized";

export class CsiNodeInitializer implements StorageHealth, AsyncDisposable {
  private error: string | undefined = NOT_YET;
  private readonly stopping = new AbortController();
  private readonly attempted = Promise.withResolvers<void>();

  constructor(
    private readonly opts: {
      /** Creates the CSINode (or annotates it): the CSI drivers (drivers.ts). */
      drivers: Pick<CsiDrivers, "initializeCsiNode">;
      /** Asked for a node status update when the CSINode is done: it goes out at once instead of at the next period. */
      nodeStatus: RequestSink<void>;
      clock: Clock;
      logger: Logger;
    },
  ) {}

  storageError(): string | undefined {
    return this.error;
  }

  /** Resolves once the first try ended, either way: a restarted agent's first status need not flip Ready for a CSINode that exists. */
  firstAttempt(): Promise<void> {
    return this.attempted.promise;
  }

  /** Tries until the CSINode is initialised or the initializer is disposed. */
  async run(): Promise<void> {
    for (let attempt = 0; !this.stopping.signal.aborted; attempt++) {
      try {
        await this.opts.drivers.initializeCsiNode();
        this.error = undefined;
        this.opts.nodeStatus.request();
        return;
      } catch (err) {
        this.error = `failed to initialize CSINode: ${errorMessage(err)}`;
        this.opts.logger.error("failed to initialize CSINode", { err: errorMessage(err), attempt: attempt + 1 });
      } finally {
        this.attempted.resolve();
      }
      const stepMs = STEPS_MS[Math.min(attempt, STEPS_MS.length - 1)]!;
      if (
        !(await this.opts.clock.sleep(stepMs, this.stopping.signal).then(
          () => true,
          () => false,
        ))
      )
        return;
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stopping.abort();
  }
}
