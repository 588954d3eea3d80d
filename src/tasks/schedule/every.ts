import { InvalidTaskError } from '../../errors.js';
import { checkTime, stepBetween } from './args.js';
import type { Schedule } from './types.js';

/** Milliseconds per duration unit, largest first: the order `parseEvery` requires in combined durations. */
const UNITS: ReadonlyArray<readonly [unit: string, ms: number]> = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1_000],
  ['ms', 1],
];

// `ms` must be tried before `m`, so the alternation lists it first.
const PART = /(\d+)(ms|d|h|m|s)/y;

const EXPECTED =
  "a positive integer of milliseconds or a duration like '10s', '5m', '1h30m', '250ms' or '1d' (units d, h, m, s, ms, each at most once, largest first)";

/**
 * `'10s' | '5m' | '1h' | '250ms' | '1d'`, combinations like `'1h30m'`, or a positive integer of milliseconds → ms.
 *
 * Units must appear at most once and largest first: `'30m1h'` is far more likely a typo than a wish, and one
 * spelling per duration keeps sharing keys and logs readable.
 */
export function parseEvery(value: unknown): number {
  if (typeof value === 'number') {
    if (Number.isSafeInteger(value) && value > 0) return value;
    throw new InvalidTaskError('every', EXPECTED, value);
  }
  if (typeof value !== 'string' || value.length === 0 || value.length > 64) {
    throw new InvalidTaskError('every', EXPECTED, value);
  }
  let total = 0;
  let lastRank = -1;
  PART.lastIndex = 0;
  while (PART.lastIndex < value.length) {
    const start = PART.lastIndex;
    const match = PART.exec(value);
    if (match === null || match.index !== start) throw new InvalidTaskError('every', EXPECTED, value);
    const rank = UNITS.findIndex(([unit]) => unit === match[2]);
    if (rank <= lastRank) throw new InvalidTaskError('every', EXPECTED, value);
    lastRank = rank;
    total += Number(match[1]) * UNITS[rank]![1];
  }
  if (!Number.isSafeInteger(total) || total <= 0) throw new InvalidTaskError('every', EXPECTED, value);
  return total;
}

/** Times up to 2^52 ms (142,000 years) take the floor-division path of `EverySchedule.next`. */
const EXACT_PRODUCTS = 2 ** 52;

/**
 * `every` schedule, aligned to whole multiples of the period since the epoch, as InfluxDB does: an `every: '1h'`
 * task runs on the hour whenever it was created, and tasks with the same period tick together.
 * Arithmetic, O(1), plus a memo of its last two answers (an answer is true forever, so the memo is never stale).
 */
export class EverySchedule implements Schedule {
  readonly kind = 'every' as const;
  readonly key: string;
  readonly #period: number;
  /**
   * The last two answers, written in turn. The tasks due at one instant that share this schedule ask the same
   * questions: the run's time after their common last scheduled time, then the time after that (the next due,
   * `planNextRun`). One remembered answer would be overwritten between the two and never hit.
   */
  #after0 = NaN;
  #next0 = NaN;
  #after1 = NaN;
  #next1 = NaN;
  #writeSecond = false;

  constructor(periodMs: number) {
    this.#period = periodMs;
    this.key = `every:${periodMs}`;
  }

  get periodMs(): number {
    return this.#period;
  }

  next(afterMs: number): number {
    if (afterMs === this.#after0) return this.#next0;
    if (afterMs === this.#after1) return this.#next1;
    checkTime('afterMs', afterMs);
    const period = this.#period;
    let base: number;
    if (afterMs <= EXACT_PRODUCTS && afterMs >= -EXACT_PRODUCTS) {
      // Floor division, corrected when the quotient rounded up to the next integer (correct rounding never takes
      // it below one, so no other correction is needed). Below 2^52 the product is an integer under 2^53, so exact.
      // This path is the ticker's: `%` on times past the small-integer range is a call to C's fmod and cost a
      // third of a tick per due task.
      base = Math.floor(afterMs / period) * period;
      if (base > afterMs) base -= period;
    } else {
      // `%` is exact on doubles, unlike the quotient, which can round up to the next integer near 2^53 and skip a
      // period. For negative times `%` is negative, hence the correction.
      base = afterMs - (afterMs % period);
      if (base > afterMs) base -= period;
    }
    const sum = base + period;
    // Past 2^53 ms the sum can round back to `afterMs`: no representable time is strictly after it.
    const next = sum > afterMs ? sum : Infinity;
    if (this.#writeSecond) {
      this.#after1 = afterMs;
      this.#next1 = next;
    } else {
      this.#after0 = afterMs;
      this.#next0 = next;
    }
    this.#writeSecond = !this.#writeSecond;
    return next;
  }

  between(fromExclusive: number, toInclusive: number, limit: number): number[] {
    return stepBetween(this, fromExclusive, toInclusive, limit);
  }
}
