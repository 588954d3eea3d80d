/**
 * The mixed-cost load of the fairness benches: 1% of jobs burn 100 ms of CPU and 99% burn 1 ms. The sequence comes
 * from a seeded generator, so every side of a comparison sees the same long jobs at the same places.
 */

/** The share of long jobs and the two costs, ms. */
export const LONG_SHARE = 0.01;
export const LONG_MS = 100;
export const SHORT_MS = 1;
/** The mean cost of a job of the mix, ms: what a thread's capacity is counted in. */
export const MEAN_MS = LONG_SHARE * LONG_MS + (1 - LONG_SHARE) * SHORT_MS;

/** `count` costs (ms) of the mix, the same for the same seed. */
export function mixedCosts(count: number, seed = 0x9e3779b9): Float64Array {
  const costs = new Float64Array(count);
  let state = seed >>> 0;
  for (let i = 0; i < count; i++) {
    // mulberry32
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    const u = ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    costs[i] = u < LONG_SHARE ? LONG_MS : SHORT_MS;
  }
  return costs;
}
