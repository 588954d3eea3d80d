/**
 * Schedule math for tasks: `cron` (DST-correct, in the task's time zone) and `every` (epoch-aligned), shared
 * between tasks with equal specs so that the expensive cron evaluation is paid once per expression and zone.
 */
import { ScheduleCache } from './cache.js';
import type { Schedule, ScheduleSpec } from './types.js';

export type { Schedule, ScheduleSpec } from './types.js';
export { parseEvery } from './every.js';
export { ScheduleCache } from './cache.js';

const shared = new ScheduleCache();

/**
 * Validates a spec (exactly one of `cron`/`every`; `cron` with exactly 5 or 6 fields; `timezone` a valid IANA
 * zone, default 'UTC'; `every` > 0) and returns the Schedule shared process-wide by equal specs.
 * Throws `InvalidTaskError` naming the field (`cron`, `every`, `timezone`).
 */
export function parseSchedule(spec: ScheduleSpec): Schedule {
  return shared.get(spec);
}
