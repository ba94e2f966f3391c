/**
 * usageNanoCores from two samples of a cumulative CPU counter, the way
 * upstream's CRI stats provider computes it for runtimes that do not
 * (getAndUpdateContainerUsageNanoCores): (Δ usage ns) / (Δ time s). The
 * runtime's own usageNanoCores is not used even when present: containerd
 * computes it between any two callers' requests, so another client
 * (crictl stats) would skew ours.
 *
 * Samples are kept per key with the time they were read (the injected
 * clock). A round marks the keys seen; `endRound` forgets the others, so
 * deleted pods and containers do not accumulate.
 */
export class CpuRates {
  private samples = new Map<string, { usageNs: number; atMs: number; rate: number | undefined }>();
  private seen = new Set<string>();

  /**
   * Records a sample and returns the rate since the previous one, or
   * undefined on the first sample and after a counter reset. A second sample
   * at the same instant returns the last rate instead of dividing by zero.
   */
  observe(key: string, usageNs: number, atMs: number): number | undefined {
    this.seen.add(key);
    const prev = this.samples.get(key);
    let rate: number | undefined;
    if (prev && usageNs >= prev.usageNs) {
      if (atMs <= prev.atMs) return prev.rate;
      rate = Math.round(((usageNs - prev.usageNs) * 1000) / (atMs - prev.atMs));
    }
    this.samples.set(key, { usageNs, atMs, rate });
    return rate;
  }

  beginRound(): void {
    this.seen.clear();
  }

  /** Forgets every key not observed since `beginRound`. */
  endRound(): void {
    for (const key of this.samples.keys()) if (!this.seen.has(key)) this.samples.delete(key);
  }

  get size(): number {
    return this.samples.size;
  }
}
