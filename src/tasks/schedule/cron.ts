import { CronExpressionParser, type CronExpression } from 'cron-parser';
import { InvalidTaskError } from '../../errors.js';
import { checkTime, stepBetween } from './args.js';
import { StretchMemo } from './memo.js';
import type { Schedule } from './types.js';
import { MAX_INSTANT, MIN_INSTANT, zoneOf, type Zone } from './zone.js';

const EXPECTED = 'a cron expression with 5 fields (minute hour day-of-month month day-of-week) or 6 (with leading seconds)';

/**
 * Gap and overlap corrections allowed in one `next()` before giving up with Infinity. Each correction passes one
 * offset change (at most a few per year), so this only ends a search for an expression that can match nothing
 * but non-existent wall times, such as `30 1 25-31 3 0` in Europe/London (01:30 on the last Sunday of March).
 */
const MAX_CORRECTIONS = 1000;

/**
 * Cheap structural check and normalization (single spaces) of a cron expression; the full parse happens once per
 * shared Schedule. Rejects what cron-parser would quietly accept: fewer than 5 fields (it pads 3-field
 * expressions) and `@daily`-style aliases (one field), and `H`, whose random value would make a shared,
 * pure schedule depend on which task created it.
 */
export function parseCron(value: unknown): { readonly text: string } {
  if (typeof value !== 'string' || value.length > 1024) throw new InvalidTaskError('cron', EXPECTED, value);
  const fields = value.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) throw new InvalidTaskError('cron', EXPECTED, value);
  // The last two fields (month, day of week) take 3-letter names such as `THU`; cron-parser resolves those
  // before it looks for `H`, so a name is not a hash.
  const hashed = fields.some((field, at) => /H/.test(at >= fields.length - 2 ? field.replace(/[a-z]{3}/gi, '') : field));
  if (hashed) throw new InvalidTaskError('cron', `${EXPECTED}, without the random \`H\``, value);
  return { text: fields.join(' ') };
}

/**
 * A cron expression evaluated on the wall clock of a time zone, DST-correct:
 *
 * - The schedule is the set of wall times (local date + time) that match the expression. Each one runs at the
 *   instant that carries it, so `0 9 * * *` is 09:00 local all year round.
 * - A wall time in a spring-forward gap does not exist and is SKIPPED: `30 2 * * *` in America/New_York has
 *   no run on 2026-03-08 (02:00 jumps to 03:00), and `0 * * * *` goes 01:00 EST → 03:00 EDT.
 *   cron-parser 5 instead shifts it forward to 03:30, a time the expression never names.
 * - A wall time in a fall-back overlap exists twice and runs ONCE, at its FIRST instant. On 2026-11-01 in
 *   New York (02:00 EDT → 01:00 EST) the wall times 01:00, 01:15, 01:30, 01:45 of `*\/15 * * * *` each run once,
 *   at 05:00, 05:15, 05:30, 05:45 UTC (EDT); their repeated EST copies at 06:00–06:45 UTC do not run, and the
 *   next run after 01:45 EDT is 02:00 EST (07:00 UTC). `0 * * * *` runs at 01:00 EDT, then 02:00 EST, two hours
 *   later. cron-parser 5 runs hourly expressions in both copies.
 *
 * How: cron-parser runs in UTC over wall times (where no DST exists), and the zone maps each matching wall time to
 * its instants (`Zone.instantsOf`). Answers are memoized in a `StretchMemo`, so tasks that share this Schedule
 * pay for one evaluation per scheduled instant, not one per task.
 */
export class CronSchedule implements Schedule {
  readonly kind = 'cron' as const;
  readonly key: string;
  readonly #expression: CronExpression;
  /** `undefined` for UTC, whose wall clock is the instant itself: no Intl call at all. */
  readonly #zone: Zone | undefined;
  readonly #memo = new StretchMemo();

  constructor(text: string, timezone: string) {
    this.key = `cron:${text}@${timezone}`;
    try {
      this.#expression = CronExpressionParser.parse(text, { tz: 'UTC' });
    } catch (cause) {
      const error = new InvalidTaskError('cron', `${EXPECTED} (cron-parser: ${cause instanceof Error ? cause.message : String(cause)})`, text);
      // InvalidArgumentError takes no `cause`; set it as Error's constructor would (own, non-enumerable).
      Object.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true });
      throw error;
    }
    this.#zone = timezone === 'UTC' ? undefined : zoneOf(timezone);
  }

  next(afterMs: number): number {
    checkTime('afterMs', afterMs);
    // Scheduled instants are whole seconds, so the first one after a fractional time is the first one after its floor.
    const after = Math.floor(afterMs);
    const known = this.#memo.lookup(after);
    if (known !== undefined) return known;
    const next = this.#compute(after);
    this.#memo.record(after, next);
    return next;
  }

  between(fromExclusive: number, toInclusive: number, limit: number): number[] {
    return stepBetween(this, fromExclusive, toInclusive, limit);
  }

  #compute(after: number): number {
    if (after >= MAX_INSTANT) return Infinity;
    // Below the supported range the schedule starts at its lower end (see zone.ts).
    const from = Math.max(after, MIN_INSTANT - 1);
    const zone = this.#zone;
    if (zone === undefined) return this.#nextWall(from);

    let wallFrom = zone.wallOf(from);
    // `from` may lie in the second copy of a repeated (fall-back) hour. Every wall time from there to the end of
    // the repetition already had its first instant before `from`, so the search starts at the end of the repetition.
    const copies = zone.instantsOf(wallFrom);
    if (copies.length === 2 && copies[1] === from) {
      const earlier = copies[0]!;
      const change = zone.transitionIn(earlier, from);
      // Wall time at the change, read with the old offset: where the repeated stretch ends.
      wallFrom = change + zone.offsetAt(earlier) - 1;
    }

    for (let corrections = 0; corrections <= MAX_CORRECTIONS; corrections++) {
      const wall = this.#nextWall(wallFrom);
      if (wall === Infinity) return Infinity;
      const instants = zone.instantsOf(wall);
      const first = instants[0];
      if (first !== undefined) {
        if (first > from) return first;
        // Not reached after the jump above; kept so correctness never rests on the jump, which is only there to
        // cross a repeated hour in one step rather than one matching wall time (up to 3,600 of them) at a time.
        wallFrom = wall;
        continue;
      }
      // A spring-forward gap: no instant shows this wall time. Skip every wall time up to the end of the gap in
      // one step (a 6-field expression may match 3,600 of them). Around it, `wall - offsetAfter` < change <=
      // `wall - offsetBefore`.
      const offsetBefore = zone.offsetAt(wall - 86_400_000);
      const offsetAfter = zone.offsetAt(wall + 86_400_000);
      const change = zone.transitionIn(wall - offsetAfter, wall - offsetBefore);
      wallFrom = change + offsetAfter - 1;
    }
    return Infinity;
  }

  /** The first wall time matching the expression strictly after `wall` (cron-parser in UTC), or Infinity. */
  #nextWall(wall: number): number {
    if (wall >= MAX_INSTANT) return Infinity;
    this.#expression.reset(new Date(wall));
    try {
      const next = this.#expression.next().getTime();
      return next >= MAX_INSTANT ? Infinity : next;
    } catch (error) {
      // cron-parser gives up after 10,000 steps on an expression that matches no date, such as `0 0 30 2 *`.
      if (error instanceof Error && error.message.includes('loop limit exceeded')) return Infinity;
      throw error;
    }
  }
}
