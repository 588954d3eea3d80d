import type { Distribution } from '../lib/quantiles.js';

/** Log-spaced bin edges covering every series, µs. */
export function logBins(series: readonly Distribution[], bins = 40): number[] {
  const values = series.flatMap((s) => s.quantiles.map((q) => q[1])).filter((v) => v > 0 && Number.isFinite(v));
  if (values.length === 0) return [];
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (hi <= lo) {
    lo /= 1.5;
    hi *= 1.5;
  }
  lo *= 0.98;
  hi *= 1.02;
  const step = Math.log(hi / lo) / bins;
  return Array.from({ length: bins + 1 }, (_, i) => lo * Math.exp(step * i));
}

/**
 * Share of samples (%) per bin, from the quantile function: the samples between two read percentiles are spread
 * over the latencies between them, evenly in log scale (a point mass when the two latencies are equal).
 */
export function histogramOf(distribution: Distribution, edges: readonly number[]): number[] {
  const shares = new Array<number>(Math.max(0, edges.length - 1)).fill(0);
  if (shares.length === 0) return shares;
  const binOf = (v: number): number => {
    let i = 0;
    while (i < shares.length - 1 && v >= edges[i + 1]!) i++;
    return i;
  };
  const q = distribution.quantiles;
  for (let i = 0; i + 1 < q.length; i++) {
    const [p0, v0] = q[i]!;
    const [p1, v1] = q[i + 1]!;
    const mass = p1 - p0;
    if (mass <= 0) continue;
    if (!(v1 > v0)) {
      shares[binOf(v1)]! += mass;
      continue;
    }
    const l0 = Math.log(Math.max(v0, edges[0]!));
    const l1 = Math.log(Math.max(v1, edges[0]!));
    const span = l1 - l0;
    for (let b = 0; b < shares.length; b++) {
      const a = Math.log(edges[b]!);
      const z = Math.log(edges[b + 1]!);
      const overlap = Math.min(z, l1) - Math.max(a, l0);
      if (overlap > 0) shares[b]! += (mass * overlap) / span;
    }
  }
  return shares;
}

/** x on the "nines" scale of HDR percentile plots: 0 → 0, 90 → 1, 99 → 2, 99.9 → 3. */
export function ninesOf(percentile: number): number {
  return Math.max(0, -Math.log10(Math.max(1e-6, 1 - percentile / 100)));
}
