import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';

/** HDR-style latency recording on Node's own histogram (integer nanoseconds), reported in microseconds. */
export class Latency {
  readonly #histogram: RecordableHistogram = createHistogram({ lowest: 1, highest: 60e9, figures: 3 });

  /** Records a latency in microseconds (fractional allowed). */
  recordUs(us: number): void {
    this.#histogram.record(Math.max(1, Math.round(us * 1000)));
  }

  /** Adds every sample of `other` to this one (rounds of one comparison are merged this way). */
  merge(other: Latency): this {
    this.#histogram.add(other.#histogram);
    return this;
  }

  get count(): number {
    return this.#histogram.count;
  }

  percentileUs(p: number): number {
    return this.#histogram.percentile(p) / 1000;
  }

  summary(): { p50Us: number; p99Us: number; p999Us: number; meanUs: number } {
    return {
      p50Us: round(this.percentileUs(50)),
      p99Us: round(this.percentileUs(99)),
      p999Us: round(this.percentileUs(99.9)),
      meanUs: round(this.#histogram.mean / 1000),
    };
  }

  /** Bucketed counts for charts: [upper bound µs, count] pairs on a log scale. */
  buckets(): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    const seen = new Map<number, number>();
    for (const [percentile, valueNs] of this.#histogram.percentiles) seen.set(percentile, valueNs / 1000);
    let previous = 0;
    for (const [percentile, us] of [...seen.entries()].sort((a, b) => a[0] - b[0])) {
      out.push([round(us), round(((percentile - previous) / 100) * this.count)]);
      previous = percentile;
    }
    return out;
  }
}

export function round(value: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** Absolute time in microseconds, comparable across threads of one process. */
export function nowUs(): number {
  return (performance.timeOrigin + performance.now()) * 1000;
}
