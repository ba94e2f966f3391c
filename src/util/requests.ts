/**
 * A channel for requests from a subsystem built before the one that serves
 * them, so that neither holds the other and nothing is assigned after
 * construction: the prober asks the pod workers to sync a pod (a readiness
 * or startup result changed, a liveness failure wants a restart), the node
 * shutdown manager asks the node controller for a status update. The server
 * calls `serve` once, from its constructor; a request made before that is
 * handed over then (repeats of one value collapse into one).
 */
/** The asking side of a request channel: what a subsystem that asks is given. */
export interface RequestSink<T> {
  request(value: T): void;
}

export class Requests<T> implements RequestSink<T> {
  private handler: ((value: T) => void) | undefined;
  private readonly early = new Set<T>();

  request(value: T): void {
    if (this.handler) this.handler(value);
    else this.early.add(value);
  }

  serve(handler: (value: T) => void): void {
    if (this.handler) throw new Error("these requests are already served");
    this.handler = handler;
    for (const value of this.early) handler(value);
    this.early.clear();
  }
}
