/**
 * The dashboard's live series: once a second, while someone looks (a page asked within the last few seconds), the
 * engine's throughput (evaluations its workers finished), its response-time p50 and p99 over that second (from the
 * broker's or the workers' latency histogram in the engine's registry) and its queue depths. Nothing is sampled
 * while no one looks, so an engine with a dashboard nobody opens pays nothing for it.
 */
import type { Registry } from 'prom-client';

export interface LivePoint {
  /** Epoch ms. */
  readonly at: number;
  /** Evaluations finished per second. */
  readonly throughput: number;
  /** Response time (ready → finished) over the second, ms; undefined when nothing finished. */
  readonly p50Ms: number | undefined;
  readonly p99Ms: number | undefined;
  readonly ready: number;
  readonly unacked: number;
  readonly failed: number;
}

export interface LiveSource {
  /** Evaluations finished so far (a count that only grows). */
  finished(): number;
  depths(): { readonly ready: number; readonly unacked: number; readonly failed: number } | Promise<{ readonly ready: number; readonly unacked: number; readonly failed: number }>;
  readonly registry: Registry;
}

/** Points kept: five minutes. */
export const LIVE_POINTS = 300;
/** How long after a page last asked the sampler keeps going, ms. */
const LOOKING_MS = 5_000;
const HISTOGRAMS = ['tickpool_broker_response_time_seconds', 'tickpool_worker_invoke_scheduler_seconds'];

interface Buckets {
  readonly bounds: number[];
  readonly counts: number[];
}

export class LiveSeries {
  readonly #source: LiveSource;
  readonly #points: LivePoint[] = [];
  #timer: NodeJS.Timeout | undefined;
  #lookedAt = 0;
  #lastFinished: number | undefined;
  #lastBuckets: Buckets | undefined;

  constructor(source: LiveSource) {
    this.#source = source;
  }

  /** The points so far, oldest first; keeps the sampler going for a while. */
  points(): readonly LivePoint[] {
    this.#lookedAt = Date.now();
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => void this.#sample(), 1_000);
      this.#timer.unref();
      void this.#sample();
    }
    return this.#points;
  }

  close(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #sample(): Promise<void> {
    if (Date.now() - this.#lookedAt > LOOKING_MS) {
      this.close();
      this.#lastFinished = undefined;
      this.#lastBuckets = undefined;
      return;
    }
    const finished = this.#source.finished();
    const buckets = await histogramBuckets(this.#source.registry);
    const depths = await this.#source.depths();
    const throughput = this.#lastFinished === undefined ? 0 : Math.max(0, finished - this.#lastFinished);
    const window = buckets !== undefined && this.#lastBuckets !== undefined ? delta(buckets, this.#lastBuckets) : undefined;
    this.#lastFinished = finished;
    this.#lastBuckets = buckets;
    this.#points.push({
      at: Date.now(),
      throughput,
      p50Ms: window === undefined ? undefined : quantileMs(window, 0.5),
      p99Ms: window === undefined ? undefined : quantileMs(window, 0.99),
      ...depths,
    });
    if (this.#points.length > LIVE_POINTS) this.#points.shift();
  }
}

/** The latency histogram's cumulative bucket counts, summed over its labels (seconds bounds). */
async function histogramBuckets(registry: Registry): Promise<Buckets | undefined> {
  for (const name of HISTOGRAMS) {
    const metric = registry.getSingleMetric(name);
    if (metric === undefined) continue;
    const { values } = await metric.get();
    const byBound = new Map<number, number>();
    for (const v of values) {
      if (!(v as { metricName?: string }).metricName?.endsWith('_bucket')) continue;
      const le = v.labels['le'];
      const bound = le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le);
      byBound.set(bound, (byBound.get(bound) ?? 0) + v.value);
    }
    if (byBound.size === 0) continue;
    const bounds = [...byBound.keys()].sort((a, b) => a - b);
    return { bounds, counts: bounds.map((b) => byBound.get(b)!) };
  }
  return undefined;
}

function delta(now: Buckets, before: Buckets): Buckets {
  return { bounds: now.bounds, counts: now.counts.map((c, i) => c - (before.bounds[i] === now.bounds[i] ? before.counts[i]! : 0)) };
}

/** The `q` quantile of cumulative bucket counts, ms, interpolated within its bucket; undefined when empty. */
export function quantileMs(buckets: Buckets, q: number): number | undefined {
  const total = buckets.counts[buckets.counts.length - 1] ?? 0;
  if (total <= 0) return undefined;
  const rank = q * total;
  let lowerBound = 0;
  let lowerCount = 0;
  for (let i = 0; i < buckets.bounds.length; i++) {
    const bound = buckets.bounds[i]!;
    const count = buckets.counts[i]!;
    if (count >= rank) {
      if (!Number.isFinite(bound)) return lowerBound * 1000;
      const within = count === lowerCount ? 0 : (rank - lowerCount) / (count - lowerCount);
      return (lowerBound + (bound - lowerBound) * within) * 1000;
    }
    lowerBound = bound;
    lowerCount = count;
  }
  return lowerBound * 1000;
}
