/**
 * Node-wide image pull concurrency, as upstream's image pullers:
 * serializeImagePulls (the default) runs one pull at a time in arrival
 * order; otherwise maxParallelImagePulls bounds them (unset: no bound).
 */
export class PullQueue {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  /** `limit`: pulls at once; undefined for no bound. */
  constructor(private readonly limit: number | undefined) {}

  static fromConfig(serializeImagePulls: boolean, maxParallelImagePulls: number | undefined): PullQueue {
    return new PullQueue(serializeImagePulls ? 1 : maxParallelImagePulls);
  }

  /** Runs `pull` when a slot is free; slots go in arrival order. */
  async run<T>(pull: () => Promise<T>): Promise<T> {
    if (this.limit !== undefined && this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active++;
    try {
      return await pull();
    } finally {
      const next = this.waiting.shift();
      if (next) next(); // the slot passes straight to the next pull
      else this.active--;
    }
  }

  /** Pulls running and waiting, for tests and metrics. */
  get size(): { active: number; waiting: number } {
    return { active: this.active, waiting: this.waiting.length };
  }
}
