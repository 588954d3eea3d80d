import type { Schedule } from './schedule/index.js';
import { CatchUp, type CatchUpPolicy } from './task.js';

/** What the schedule says at `now`, given the last scheduled time already handed out. */
export interface PlannedRun {
  /** The scheduled time to run now, or `undefined` when nothing runs now. */
  readonly scheduledFor: number | undefined;
  /** The new "last scheduled time": the run's, or the newest skipped one. */
  readonly lastScheduled: number;
  /** When the next run is due (`<= now` while a backlog remains under `'all'`). */
  readonly nextDue: number;
}

/**
 * The catch-up rule as a pure function of time. A scheduled time `t` is due at `now` when `t + offset <= now`.
 *
 * - No due time: nothing runs; `nextDue` is the next one's due time.
 * - Exactly one due time, however late: it runs.
 * - A backlog (two or more due): `'all'` runs the oldest (the rest follow, one run each, in order), `'latest'`
 *   runs only the newest, `'none'` runs none and skips to the first time still in the future.
 *
 * Costs two `schedule.next` calls, plus a backward search for `'latest'`/`'none'` with a backlog.
 */
export function planNextRun(schedule: Schedule, offset: number, lastScheduled: number, now: number, policy: CatchUpPolicy): PlannedRun {
  const first = schedule.next(lastScheduled);
  if (!(first + offset <= now)) return { scheduledFor: undefined, lastScheduled, nextDue: first + offset };
  const second = schedule.next(first);
  if (!(second + offset <= now) || policy === CatchUp.ALL) {
    return { scheduledFor: first, lastScheduled: first, nextDue: second + offset };
  }
  const newest = latestAtOrBefore(schedule, first, now - offset);
  const nextDue = schedule.next(newest) + offset;
  if (policy === CatchUp.LATEST) return { scheduledFor: newest, lastScheduled: newest, nextDue };
  return { scheduledFor: undefined, lastScheduled: newest, nextDue };
}

/** Times asked of `between` at once while looking for the newest one. */
const WINDOW_LIMIT = 4096;
/** First look-back window, ms; doubled while empty. */
const FIRST_WINDOW_MS = 1000;

/**
 * The newest scheduled time `<= atOrBefore`, knowing that `known` (a scheduled time `<= atOrBefore`) exists.
 * A `Schedule` only looks forward, so this looks back in doubling windows: a backlog of a year of a per-second
 * schedule costs a few dozen `between` calls, not thirty million `next` calls.
 */
export function latestAtOrBefore(schedule: Schedule, known: number, atOrBefore: number): number {
  let width = FIRST_WINDOW_MS;
  for (;;) {
    const from = Math.max(known, atOrBefore - width);
    let times = schedule.between(from, atOrBefore, WINDOW_LIMIT);
    // A window denser than the limit: page forward through it to its end.
    while (times.length === WINDOW_LIMIT) {
      const more = schedule.between(times[times.length - 1]!, atOrBefore, WINDOW_LIMIT);
      if (more.length === 0) break;
      times = more;
    }
    const last = times[times.length - 1];
    if (last !== undefined) return last;
    if (from === known) return known;
    width *= 2;
  }
}
