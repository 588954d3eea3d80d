import type { Latency } from './latency.js';

/** A latency distribution as [percentile, µs] points: what the report draws histograms and percentile curves from. */
export interface Distribution {
  readonly label: string;
  readonly count: number;
  /** Ascending percentiles (0..100) with the latency at each, µs. */
  readonly quantiles: ReadonlyArray<readonly [number, number]>;
}

/** Percentiles read from a histogram: every 1% for the body, finer in the tail (HDR-style). */
export const PERCENTILES: readonly number[] = [
  ...Array.from({ length: 99 }, (_, i) => i + 1),
  99.5, 99.9, 99.95, 99.99, 100,
];

/** Reads a `Latency` into a `Distribution` (the histogram itself stays inside the Latency). */
export function distributionOf(label: string, latency: Latency): Distribution {
  if (latency.count === 0) return { label, count: 0, quantiles: [] };
  // Node's histogram takes percentiles in (0, 100]: the smallest one stands for the minimum.
  const quantiles: Array<[number, number]> = [[0, latency.percentileUs(1e-9)]];
  for (const p of PERCENTILES) quantiles.push([p, latency.percentileUs(p)]);
  return { label, count: latency.count, quantiles };
}

/** One chart of latency distributions: an engine figure and its baseline, measured in the same run. */
export interface LatencyChart {
  readonly id: string;
  readonly title: string;
  readonly threads: number;
  readonly series: readonly Distribution[];
}
