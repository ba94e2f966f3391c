/**
 * What a subsystem built later serves to those built before it, so that
 * nothing is assigned after construction in the wiring (agent.ts): the pod
 * workers' view (sync/view.ts) for the cgroups, stats, eviction and node
 * shutdown their admission asks; the PLEG's (pleg/view.ts) for the metrics
 * the CRI client is built with. The server calls `serve` once, from its
 * constructor; until then every question gets its answer for "nothing here
 * yet". `util/requests.ts` is the same seam for requests going the other way.
 */
export class Served<T> {
  private server: T | undefined;

  constructor(private readonly what: string) {}

  /** Called once, by the server's constructor. */
  serve(server: T): void {
    if (this.server) throw new Error(`${this.what} is already served`);
    this.server = server;
  }

  /** The server's answer, or `before` until it serves. */
  protected ask<R>(question: (server: T) => R, before: R): R {
    return this.server ? question(this.server) : before;
  }
}
