/**
 * What an item is expected to cost a thread, learned per evaluation type and per task handler from the durations
 * the threads report. The pool writes it into each item's record, so that a thread knows whether the outcomes it
 * holds may wait for company while the item runs; and it tells a broker with round trips how much work is ahead of
 * the threads and which threads will be free soon.
 *
 * The estimate is deliberately pessimistic: it jumps to a longer duration at once and comes down by DECAY of the
 * gap per shorter item. One 100 ms outlier among 1 ms items therefore stops items of its kind from queueing behind
 * each other for a few dozen items; a cheap estimate is only ever earned by a run of cheap items. A kind never seen
 * is assumed long (UNKNOWN_MS): its first item travels alone.
 */

/** Predicted cost of a kind of item never measured, ms: large enough that nothing queues behind it. */
export const UNKNOWN_MS = 1_000;
/** Share of the gap the estimate moves towards a shorter duration, per item. */
const DECAY = 0.25;

export class CostEstimate {
  #ms = UNKNOWN_MS;
  #known = false;

  /** Predicted duration of the next item of this kind, ms. */
  get ms(): number {
    return this.#ms;
  }

  observe(ms: number): void {
    if (!(ms >= 0)) return;
    if (!this.#known || ms >= this.#ms) {
      this.#known = true;
      this.#ms = ms;
      return;
    }
    this.#ms += (ms - this.#ms) * DECAY;
  }
}

/** One estimate per evaluation type and per task handler. */
export class CostModel {
  readonly #evaluations = new Map<string, CostEstimate>();
  readonly #runs = new Map<string, CostEstimate>();

  forEvaluation(type: string): CostEstimate {
    return estimateIn(this.#evaluations, type);
  }

  forRun(handler: string): CostEstimate {
    return estimateIn(this.#runs, handler);
  }
}

function estimateIn(map: Map<string, CostEstimate>, key: string): CostEstimate {
  let estimate = map.get(key);
  if (estimate === undefined) {
    estimate = new CostEstimate();
    map.set(key, estimate);
  }
  return estimate;
}
