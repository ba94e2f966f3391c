/**
 * Requests to sync a pod from subsystems built before the pod workers (the
 * prober: a readiness or startup result changed, a liveness failure wants a
 * restart). The channel is built first and the workers serve it from their
 * construction on, so neither holds the other; a request made before that
 * is handed over then (a sync of a pod the workers do not know does nothing).
 */
export class PodSyncRequests {
  private handler: ((uid: string) => void) | undefined;
  private readonly early = new Set<string>();

  request(uid: string): void {
    if (this.handler) this.handler(uid);
    else this.early.add(uid);
  }

  /** Called once, by the pod workers' constructor. */
  serve(handler: (uid: string) => void): void {
    if (this.handler) throw new Error("pod sync requests are already served");
    this.handler = handler;
    for (const uid of this.early) handler(uid);
    this.early.clear();
  }
}
