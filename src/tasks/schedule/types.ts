/**
 * Schedule vocabulary shared by the `cron` and `every` implementations.
 *
 * A schedule is a pure function of the time it is asked about: the same `afterMs` always gives the same answer,
 * whatever was asked before. Implementations may memoize, but only answers that are true forever.
 */

export interface Schedule {
  readonly kind: 'cron' | 'every';
  /**
   * Sharing key: tasks with equal keys share one Schedule object and its cached computations.
   * e.g. 'cron:0 * * * *@America/New_York', 'every:10000'
   */
  readonly key: string;
  /** The smallest scheduled time strictly greater than `afterMs` (epoch ms, integer). Infinity if there is none. */
  next(afterMs: number): number;
  /** Every scheduled time t with fromExclusive < t <= toInclusive, ascending, at most `limit` of them (for catch-up). */
  between(fromExclusive: number, toInclusive: number, limit: number): number[];
}

/** What a task says about its schedule; validated by `parseSchedule`. */
export interface ScheduleSpec {
  readonly cron?: unknown;
  readonly every?: unknown;
  readonly timezone?: unknown;
}
