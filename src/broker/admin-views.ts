/**
 * The admin views of the in-memory broker's entries: a page of one state in enqueue order, and one entry in detail.
 * A page walks the entries in enqueue order (the broker's map keeps insertion order, which is `seq` order) and
 * stops as soon as it has its page for `oldest`, or at the cursor for `newest`: no sort, no copy of the map, and at
 * most `limit + 1` summaries held at once.
 */
import { hostname } from 'node:os';
import { InvalidArgumentError } from '../errors.js';
import {
  ADMIN_EVALUATION_STATES,
  MAX_PAGE_SIZE,
  errorView,
  type AdminEvaluationState,
  type EvaluationDetail,
  type EvaluationPage,
  type EvaluationSummary,
} from './admin-types.js';
import { EntryState, type Entry } from './broker-entry.js';

/** Deliveries an entry keeps in its history (the most recent ones). */
export const HISTORY_LIMIT = 32;

/** Where this process's broker runs its deliveries, as the admin API names a process. */
export const THIS_PROCESS = `${hostname()}/${process.pid}`;

export interface CheckedQuery {
  readonly state: AdminEvaluationState;
  readonly type: string | undefined;
  readonly namespace: string | undefined;
  readonly jobId: string | undefined;
  readonly newest: boolean;
  readonly limit: number;
  /** The cursor's enqueue sequence number, or undefined for the first page. */
  readonly after: number | undefined;
}

const optionalString = (name: string, value: unknown): string | undefined => {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value === '') throw new InvalidArgumentError(name, 'a non-empty string or undefined', value);
  return value;
};

/**
 * Checks a query from a caller: `InvalidArgumentError` (`ERR_INVALID_ARGUMENT`) naming the field, what it takes and
 * what it got. `parseCursor` reads the backend's own cursors.
 */
export function checkQuery(query: unknown, parseCursor: (cursor: string) => number | undefined): CheckedQuery {
  if (query === null || typeof query !== 'object') throw new InvalidArgumentError('query', 'an object { state, type?, jobId?, … }', query);
  const q = query as Record<string, unknown>;
  const state = q['state'];
  if (typeof state !== 'string' || !(ADMIN_EVALUATION_STATES as readonly string[]).includes(state)) {
    throw new InvalidArgumentError('query.state', `one of ${ADMIN_EVALUATION_STATES.join(', ')}`, state);
  }
  const order = q['order'] ?? 'newest';
  if (order !== 'newest' && order !== 'oldest') throw new InvalidArgumentError('query.order', "'newest' or 'oldest'", order);
  const limit = q['limit'] ?? 50;
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) {
    throw new InvalidArgumentError('query.limit', `an integer from 1 to ${MAX_PAGE_SIZE}`, limit);
  }
  const cursor = q['cursor'];
  let after: number | undefined;
  if (cursor !== undefined) {
    after = typeof cursor === 'string' ? parseCursor(cursor) : undefined;
    if (after === undefined) throw new InvalidArgumentError('query.cursor', "a page's nextCursor", cursor);
  }
  return {
    state: state as AdminEvaluationState,
    type: optionalString('query.type', q['type']),
    namespace: optionalString('query.namespace', q['namespace']),
    jobId: optionalString('query.jobId', q['jobId']),
    newest: order === 'newest',
    limit,
    after,
  };
}

/** A `depths` cap: `InvalidArgumentError` unless an integer >= 1. */
export function checkCap(cap: unknown): asserts cap is number {
  if (typeof cap !== 'number' || !Number.isSafeInteger(cap) || cap < 1) throw new InvalidArgumentError('cap', 'an integer >= 1', cap);
}

/** Where an entry is, as the admin API names it; undefined for one whose outcome is settled (cancelable). */
export function adminStateOf(entry: Entry): AdminEvaluationState | undefined {
  switch (entry.state) {
    case EntryState.Ready:
      return entry.queue?.failed === true ? 'failed' : 'ready';
    case EntryState.Unacked:
      return 'unacked';
    case EntryState.Pending:
      return 'pending';
    case EntryState.Waiting:
      return 'delayed';
    default:
      return undefined;
  }
}

const CURSOR = /^m([0-9]{1,15})$/;
export const memoryCursor = (seq: number): string => `m${seq}`;
export const parseMemoryCursor = (cursor: string): number | undefined => {
  const match = CURSOR.exec(cursor);
  return match === null ? undefined : Number(match[1]);
};

function summary(entry: Entry, state: AdminEvaluationState): EvaluationSummary {
  return { id: entry.id, namespace: entry.namespace, jobId: entry.jobId, type: entry.type, priority: entry.priority, state, deliveries: entry.deliveries };
}

/** One page of `entries` (in enqueue order) that match `q`. */
export function pageOf(entries: Iterable<Entry>, q: CheckedQuery): EvaluationPage {
  const matches = (entry: Entry): boolean =>
    adminStateOf(entry) === q.state &&
    (q.type === undefined || entry.type === q.type) &&
    (q.namespace === undefined || entry.namespace === q.namespace) &&
    (q.jobId === undefined || entry.jobId === q.jobId);
  if (!q.newest) {
    const items: EvaluationSummary[] = [];
    let lastSeq = 0;
    for (const entry of entries) {
      if (q.after !== undefined && entry.seq <= q.after) continue;
      if (!matches(entry)) continue;
      if (items.length === q.limit) return { items, nextCursor: memoryCursor(lastSeq) };
      items.push(summary(entry, q.state));
      lastSeq = entry.seq;
    }
    return { items, nextCursor: undefined };
  }
  // Newest first: the last `limit + 1` matches before the cursor, kept in a ring.
  const ring: Entry[] = [];
  let next = 0;
  let seen = 0;
  for (const entry of entries) {
    if (q.after !== undefined && entry.seq >= q.after) break;
    if (!matches(entry)) continue;
    ring[next] = entry;
    next = (next + 1) % (q.limit + 1);
    seen++;
  }
  const kept = Math.min(seen, q.limit + 1);
  const newestFirst: Entry[] = [];
  for (let i = 1; i <= kept; i++) newestFirst.push(ring[(next - i + (q.limit + 1)) % (q.limit + 1)]!);
  const more = newestFirst.length > q.limit;
  const page = newestFirst.slice(0, q.limit);
  return { items: page.map((e) => summary(e, q.state)), nextCursor: more ? memoryCursor(page[page.length - 1]!.seq) : undefined };
}

/** One entry in detail; undefined for one whose outcome is settled. */
export function detailOf(entry: Entry): EvaluationDetail | undefined {
  const state = adminStateOf(entry);
  if (state === undefined) return undefined;
  return {
    ...summary(entry, state),
    queue: entry.queue?.name,
    holdsJobSlot: entry.holdsSlot,
    payload: entry.evaluation.payload,
    lastError: errorView(entry.lastReason),
    failure: errorView(entry.failure),
    // The ended deliveries, and the one in flight (`dequeuedAt` is its start).
    history: [
      ...(entry.history ?? []),
      ...(state === 'unacked' ? [{ startedAt: entry.dequeuedAt, endedAt: undefined, end: undefined, error: undefined, process: THIS_PROCESS }] : []),
    ],
  };
}
