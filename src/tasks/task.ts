/**
 * Tasks: periodic work on a `cron` or `every` schedule (InfluxDB 2.x's task model).
 *
 * Glossary
 * - task: `{ id, cron | every, offset?, timezone?, maxConcurrency, retry?, catchUp?, handler, payload? }`.
 * - scheduled time (`scheduledFor`): an instant of the schedule, the run's logical "now".
 * - due time (`runAt`): when a run is dispatched, `scheduledFor + offset` (the offset may be negative).
 * - run: one execution of a task for one scheduled time; it may take several attempts (`retry`).
 * - backlog: more than one scheduled time due at once (the process was busy, or the task was claimed with
 *   `latestCompleted` in the past); `catchUp` decides what runs.
 */
import { isStructuredCloneable } from '../broker/evaluation.js';
import { InvalidTaskError } from '../errors.js';
import { assertKey } from '../storable-key.js';
import { parseEvery, parseSchedule, type Schedule } from './schedule/index.js';

/** What a backlog runs: every due time in order (`'all'`), only the newest (`'latest'`), or none (`'none'`). */
export const CatchUp = Object.freeze({ ALL: 'all', LATEST: 'latest', NONE: 'none' } as const);
export type CatchUpPolicy = (typeof CatchUp)[keyof typeof CatchUp];

/** A validated task: frozen, with `every` and `offset` in milliseconds. */
export interface Task {
  readonly id: string;
  /** 5 or 6 fields, evaluated in `timezone`. Exactly one of `cron` and `every`. */
  readonly cron?: string;
  /** Period in ms, aligned to whole multiples since the epoch; at most 100 years. */
  readonly every?: number;
  /** Dispatch delay after each scheduled time, ms; negative dispatches early; at most 100 years either way. Default 0. */
  readonly offset?: number;
  /** IANA zone of `cron`. Default UTC. */
  readonly timezone?: string;
  /** Runs in flight at once, 1..100. */
  readonly maxConcurrency: number;
  /** Extra attempts of a run whose result is retryable, 0..100. Default 0. */
  readonly retry?: number;
  /** Default `'all'`. */
  readonly catchUp?: CatchUpPolicy;
  /** Name of a registered handler. */
  readonly handler: string;
  /** Handed to the handler as is; must survive structured clone to reach a pool thread (checked when validated). */
  readonly payload?: unknown;
}

/** What callers may write: `every` and `offset` also as duration strings ('10s', '5m', '-30s'). */
export interface TaskInput extends Omit<Task, 'every' | 'offset'> {
  readonly every?: number | string;
  readonly offset?: number | string;
}

/** Where a claim starts: runs are due for scheduled times after `latestCompleted` (epoch ms; default: now). */
export interface TaskMeta {
  readonly latestCompleted?: number;
}

/** 100 Julian years in ms: far beyond any real period or delay, and far inside what a `Date` holds (±8.64e15 ms). */
const HUNDRED_YEARS_MS = 100 * 365.25 * 86_400_000;

export const taskLimits = Object.freeze({
  maxConcurrency: Object.freeze({ min: 1, max: 100 }),
  retry: Object.freeze({ min: 0, max: 100 }),
  idLength: 256,
  handlerLength: 256,
  /**
   * Longest `every` and `|offset|`. The schedule math works for any safe integer; a task is bounded so that its
   * due times stay times (a period of 9e15 ms puts the next run past the end of `Date`).
   */
  maxEveryMs: HUNDRED_YEARS_MS,
  maxOffsetMs: HUNDRED_YEARS_MS,
});

export const taskDefaults = Object.freeze({
  offset: 0,
  retry: 0,
  catchUp: CatchUp.ALL as CatchUpPolicy,
  timezone: 'UTC',
});

const FIELDS: ReadonlySet<string> = new Set([
  'id',
  'cron',
  'every',
  'offset',
  'timezone',
  'maxConcurrency',
  'retry',
  'catchUp',
  'handler',
  'payload',
]);
const POLICIES: readonly string[] = Object.values(CatchUp);

/**
 * Validated tasks share this prototype, which marks them as checked and frozen at no per-task cost (a WeakSet
 * entry would cost ~40 bytes per task; a branded field, 8). Equality, spreading and JSON behave as for a plain
 * object; only `Object.getPrototypeOf` tells.
 */
const validatedTask: object = Object.freeze(Object.create(Object.prototype) as object);

/** True for a task returned by `validateTask` (frozen and valid: no need to check or copy it again). */
export function isValidatedTask(value: unknown): value is Task {
  return value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === validatedTask;
}

/**
 * Checks a task synchronously and returns a frozen copy with `every`/`offset` in ms, holding only the fields that
 * were given. Throws `InvalidTaskError` naming the first bad field (`cron`, `every` and `timezone` as the schedule
 * parser reports them). A task that this function returned before is returned as is.
 */
export function validateTask(value: unknown): Task {
  if (isValidatedTask(value)) return value;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidTaskError('task', 'an object', value);
  }
  const input = value as Record<string, unknown>;
  for (const key of Object.keys(input)) {
    if (!FIELDS.has(key)) throw new InvalidTaskError(key, `absent (a task has only ${[...FIELDS].join(', ')})`, input[key]);
  }
  const { id, cron, every, offset, timezone, maxConcurrency, retry, catchUp, handler } = input;
  if (typeof id !== 'string' || id.length === 0 || id.length > taskLimits.idLength) {
    throw new InvalidTaskError('id', `a non-empty string of at most ${taskLimits.idLength} characters`, id);
  }
  // Stored and matched by equality in a shared backend: the keys' rule (storable-key.ts) in both backends.
  assertKey('id', id, InvalidTaskError);
  // The schedule parser checks exactly-one-of `cron`/`every`, the cron fields, the zone and the period.
  parseSchedule({ cron, every, timezone });
  const period = every === undefined ? undefined : parseEvery(every);
  if (period !== undefined && period > taskLimits.maxEveryMs) throw new InvalidTaskError('every', EVERY_EXPECTED, every);
  const offsetMs = offset === undefined ? undefined : parseOffset(offset);
  checkInteger('maxConcurrency', maxConcurrency, taskLimits.maxConcurrency);
  if (retry !== undefined) checkInteger('retry', retry, taskLimits.retry);
  if (catchUp !== undefined && !POLICIES.includes(catchUp as string)) {
    throw new InvalidTaskError('catchUp', `one of ${POLICIES.map((p) => `'${p}'`).join(', ')}`, catchUp);
  }
  if (typeof handler !== 'string' || handler.length === 0 || handler.length > taskLimits.handlerLength) {
    throw new InvalidTaskError('handler', `the name of a registered handler (a non-empty string of at most ${taskLimits.handlerLength} characters)`, handler);
  }
  // Every run hands the payload to a pool thread by structured clone: one that cannot cross would fail every run.
  if (!isStructuredCloneable(input['payload'])) throw new InvalidTaskError('payload', 'a structured-cloneable value', input['payload']);

  // Only given fields are copied: an idle claimed task should not pay 8 bytes for each absent one.
  const task = Object.create(validatedTask) as Record<string, unknown>;
  task['id'] = id;
  if (cron !== undefined) task['cron'] = cron;
  if (period !== undefined) task['every'] = period;
  if (offsetMs !== undefined) task['offset'] = offsetMs;
  if (timezone !== undefined) task['timezone'] = timezone;
  task['maxConcurrency'] = maxConcurrency;
  if (retry !== undefined) task['retry'] = retry;
  if (catchUp !== undefined) task['catchUp'] = catchUp;
  task['handler'] = handler;
  if ('payload' in input) task['payload'] = input['payload'];
  return Object.freeze(task) as unknown as Task;
}

/** The shared Schedule of a validated task (a cache hit: a key computation and a map lookup). */
export function scheduleOf(task: Task): Schedule {
  return parseSchedule(task);
}

/** `meta` of `claimTask`/`putTask`: `latestCompleted` as a finite epoch-ms number, or absent. */
export function validateTaskMeta(value: unknown): TaskMeta {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidTaskError('meta', 'an object like { latestCompleted?: epochMs }', value);
  }
  const { latestCompleted } = value as { latestCompleted?: unknown };
  if (latestCompleted !== undefined && (typeof latestCompleted !== 'number' || !Number.isFinite(latestCompleted))) {
    throw new InvalidTaskError('meta.latestCompleted', 'a finite time in epoch milliseconds', latestCompleted);
  }
  return latestCompleted === undefined ? {} : { latestCompleted };
}

const EVERY_EXPECTED = `a period of at most 100 years (${taskLimits.maxEveryMs} ms): a positive integer of milliseconds or a duration like '10s', '5m' or '1h30m'`;
const OFFSET_EXPECTED = `an integer of milliseconds or a duration like '30s', '-5m' or '1h30m' (may be negative), at most 100 years (${taskLimits.maxOffsetMs} ms) either way`;

/** `offset`: integer ms or a duration string with an optional leading '-'; 0 and '0' are allowed. */
export function parseOffset(value: unknown): number {
  let ms: number;
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new InvalidTaskError('offset', OFFSET_EXPECTED, value);
    ms = value === 0 ? 0 : value;
  } else {
    if (typeof value !== 'string') throw new InvalidTaskError('offset', OFFSET_EXPECTED, value);
    const negative = value.startsWith('-');
    const magnitude = negative ? value.slice(1) : value;
    if (magnitude === '0') return 0;
    try {
      ms = negative ? -parseEvery(magnitude) : parseEvery(magnitude);
    } catch {
      // parseEvery names `every`; the caller wrote `offset`.
      throw new InvalidTaskError('offset', OFFSET_EXPECTED, value);
    }
  }
  if (Math.abs(ms) > taskLimits.maxOffsetMs) throw new InvalidTaskError('offset', OFFSET_EXPECTED, value);
  return ms;
}

function checkInteger(name: string, value: unknown, range: { readonly min: number; readonly max: number }): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < range.min || value > range.max) {
    throw new InvalidTaskError(name, `an integer from ${range.min} to ${range.max}`, value);
  }
}

