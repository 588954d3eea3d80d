import { InvalidArgumentError } from '../../errors.js';

/**
 * Argument checks for `Schedule.next`/`between`. They run on the scheduler's hot path, so they are plain
 * comparisons; a NaN or an infinite time would otherwise silently poison a heap of due times.
 */

export function checkTime(name: string, value: number): void {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new InvalidArgumentError(name, 'a finite time in epoch milliseconds', value);
  }
}

export function checkLimit(value: number): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new InvalidArgumentError('limit', 'an integer >= 0', value);
  }
}

/**
 * Every time t of `schedule` with fromExclusive < t <= toInclusive, ascending, at most `limit`: the `between` of
 * every schedule kind. Stepping with `next(t)` keeps the times strictly ascending at any magnitude, and with the cap
 * it ends even for a range of centuries.
 */
export function stepBetween(schedule: { next(afterMs: number): number }, fromExclusive: number, toInclusive: number, limit: number): number[] {
  checkTime('fromExclusive', fromExclusive);
  checkTime('toInclusive', toInclusive);
  checkLimit(limit);
  const out: number[] = [];
  for (let t = schedule.next(fromExclusive); t <= toInclusive && out.length < limit; t = schedule.next(t)) out.push(t);
  return out;
}
