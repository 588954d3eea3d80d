import { InvalidTaskError } from '../../errors.js';
import { CronSchedule, parseCron } from './cron.js';
import { EverySchedule, parseEvery } from './every.js';
import { parseTimezone } from './timezone.js';
import type { Schedule, ScheduleSpec } from './types.js';

/**
 * Registry that makes equal specs share one Schedule, so that a thousand tasks on `0 * * * *` in one zone pay
 * for one cron evaluation per hour, not a thousand.
 *
 * Eviction is by garbage collection: the cache holds each Schedule through a `WeakRef`, and a
 * `FinalizationRegistry` drops the entry once no task references the Schedule any more. This fits a `get`-only
 * API (callers never have to remember a `release`), and the cache can never outgrow the set of Schedules that are
 * alive anyway. A Schedule that is dropped and asked for again is simply rebuilt; its answers are identical
 * because schedules are pure.
 */
export class ScheduleCache {
  readonly #entries = new Map<string, WeakRef<Schedule>>();
  readonly #finalizer = new FinalizationRegistry<{ key: string; ref: WeakRef<Schedule> }>(({ key, ref }) => {
    // A new Schedule may already sit under the same key; only remove the entry this one owned.
    if (this.#entries.get(key) === ref) this.#entries.delete(key);
  });

  /** Validates `spec` (see `parseSchedule`) and returns the Schedule shared by every equal spec. */
  get(spec: ScheduleSpec): Schedule {
    const normalized = normalizeSpec(spec);
    const existing = this.#entries.get(normalized.key)?.deref();
    if (existing !== undefined) return existing;
    const schedule = normalized.build();
    const ref = new WeakRef(schedule);
    this.#entries.set(normalized.key, ref);
    this.#finalizer.register(schedule, { key: normalized.key, ref });
    return schedule;
  }

  /** Number of entries; an entry whose Schedule was collected counts until its finalizer has run. */
  get size(): number {
    return this.#entries.size;
  }
}

interface NormalizedSpec {
  readonly key: string;
  readonly build: () => Schedule;
}

/**
 * Validates a spec and computes its sharing key without building anything expensive: a cache hit costs a
 * whitespace split and a map lookup.
 */
function normalizeSpec(spec: ScheduleSpec): NormalizedSpec {
  if (spec === null || typeof spec !== 'object') {
    throw new InvalidTaskError('schedule', 'an object with `cron` or `every`', spec);
  }
  const { cron, every } = spec;
  // Validated even for `every`, where it changes nothing (epoch alignment has no zone): a typo should not pass.
  const timezone = parseTimezone(spec.timezone);
  if (cron !== undefined && every !== undefined) {
    throw new InvalidTaskError('every', 'absent when `cron` is set (a task has exactly one of `cron` and `every`)', every);
  }
  if (every !== undefined) {
    const period = parseEvery(every);
    return { key: `every:${period}`, build: () => new EverySchedule(period) };
  }
  if (cron === undefined) {
    throw new InvalidTaskError('cron', 'a cron expression when `every` is absent (a task has exactly one of `cron` and `every`)', cron);
  }
  const expression = parseCron(cron);
  return {
    key: `cron:${expression.text}@${timezone}`,
    build: () => new CronSchedule(expression.text, timezone),
  };
}
