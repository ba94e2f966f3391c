/**
 * The pod CIDR handed to the runtime (upstream updatePodCIDR): the runtime's
 * network plugin may need it (containerd writes its CNI config template with
 * it). Sent over CRI UpdateRuntimeConfig once per change, one call at a time:
 * at start with the podCIDR setting (standalone), then whenever the Node the
 * agent reads back has other spec.podCIDRs (cluster mode: the node IPAM
 * controller assigns them), joined with "," as upstream.
 */
import type { CriService } from "../cri/index.ts";
import type { ApiObject } from "../api/index.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";

export class PodCidrUpdateError extends Error {
  constructor(
    readonly cidr: string,
    cause: unknown,
  ) {
    super(`failed to update pod CIDR to ${JSON.stringify(cidr)}: ${errorMessage(cause)}`);
    this.name = "PodCidrUpdateError";
  }
}

/** spec.podCIDRs of a Node, joined with "," (empty when it has none). */
export function nodePodCidrs(node: ApiObject | undefined): string {
  const cidrs = (node?.spec as { podCIDRs?: unknown } | undefined)?.podCIDRs;
  return Array.isArray(cidrs) ? cidrs.filter((c): c is string => typeof c === "string").join(",") : "";
}

export class PodCidr {
  private current = "";
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: { cri: Pick<CriService, "updateRuntimeConfig">; logger: Logger }) {}

  /** The CIDR last accepted by the runtime ("" before any). */
  cidr(): string {
    return this.current;
  }

  /** Hands `cidr` to the runtime when it differs from the last one it took; true when it did. */
  update(cidr: string): Promise<boolean> {
    const run = this.queue.then(async () => {
      if (cidr === this.current) return false;
      try {
        await this.opts.cri.updateRuntimeConfig(cidr);
      } catch (err) {
        throw new PodCidrUpdateError(cidr, err);
      }
      this.opts.logger.info("updating pod CIDR", { originalPodCIDR: this.current, newPodCIDR: cidr });
      this.current = cidr;
      return true;
    });
    this.queue = run.catch(() => {});
    return run;
  }

  /** From a Node read back from the API: its spec.podCIDRs when it has some (a failure is logged, tried again on the next read). */
  async fromNode(node: ApiObject | undefined): Promise<void> {
    const cidrs = nodePodCidrs(node);
    if (!cidrs) return;
    await this.update(cidrs).catch((err: unknown) => this.opts.logger.error("error updating pod CIDR", { err: errorMessage(err) }));
  }
}
