/**
 * The PostgreSQL broker's admin views and actions (`BrokerAdmin`), for the whole cluster: what every process of the
 * schema holds. A page is one indexed scan in enqueue order (`seq`) bounded by its cursor and `limit + 1`; replay
 * and the paused types are the schema's functions (`replay` under the job's lock; `paused_types`, which every
 * fetch and offer consults).
 *
 * A delivery's history is what the row keeps: the current delivery (when it was leased, by which process) or, once
 * it ended, the last one with how it ended; the process that held an ended delivery is not kept.
 */
import {
  errorView,
  type AdminEvaluationState,
  type DeliveryRecord,
  type EvaluationDetail,
  type EvaluationPage,
  type EvaluationQuery,
  type QueueDepths,
} from '../../broker/admin-types.js';
import { checkCap, checkQuery } from '../../broker/admin-views.js';
import { assertId } from '../../broker/arguments.js';
import type { Evaluation } from '../../broker/evaluation.js';
import { BrokerDisabledError, InvalidArgumentError } from '../../errors.js';
import { isStorableKey, KEY_EXPECTED } from '../../storable-key.js';
import { decodeValue, type StoredError } from '../codec.js';
import type { BrokerParts } from './parts.js';

const CURSOR = /^s([0-9]{1,15})$/;
const pgCursor = (seq: number): string => `s${seq}`;
const parsePgCursor = (cursor: string): number | undefined => {
  const match = CURSOR.exec(cursor);
  return match === null ? undefined : Number(match[1]);
};

type ListRow = {
  id: string;
  namespace: string;
  job_id: string;
  type: string;
  priority: number;
  deliveries: number;
  seq: string;
};

type DetailRow = {
  id: string;
  namespace: string;
  job_id: string;
  type: string;
  priority: number;
  state: 'ready' | 'pending' | 'unacked' | 'waiting';
  queue: string;
  deliveries: number;
  holds_slot: boolean;
  body: Buffer;
  last_reason: StoredError | null;
  failure: StoredError | null;
  holder: string | null;
  leased_ms: number | null;
  ready_ms: number | null;
  settled_ms: number | null;
};

const msOf = (value: number | string | null): number | undefined => (value === null ? undefined : Math.round(Number(value)));

function adminState(row: DetailRow): AdminEvaluationState {
  if (row.state === 'ready') return row.queue === '_failed' ? 'failed' : 'ready';
  return row.state === 'waiting' ? 'delayed' : row.state;
}

/** The row's current delivery, or its last one and how that ended. */
function historyOf(row: DetailRow): DeliveryRecord[] {
  const startedAt = msOf(row.leased_ms);
  if (row.state === 'unacked') {
    return [{ startedAt: startedAt ?? msOf(row.ready_ms) ?? 0, endedAt: undefined, end: undefined, error: undefined, process: row.holder ?? '' }];
  }
  if (startedAt === undefined || row.deliveries === 0) return [];
  const reason = row.last_reason ?? undefined;
  const failedOutright = row.queue === '_failed' && row.failure !== null && row.failure.code !== 'ERR_DELIVERY_LIMIT';
  const end: DeliveryRecord['end'] = failedOutright ? 'failed' : reason?.code === 'ERR_NACK_TIMEOUT_REACHED' ? 'timed-out' : 'nacked';
  const ended = row.queue === '_failed' ? msOf(row.settled_ms) : msOf(row.ready_ms);
  return [{ startedAt, endedAt: ended !== undefined && ended >= startedAt ? ended : undefined, end, error: errorView(reason), process: '' }];
}

export class PgAdmin {
  readonly #parts: Pick<BrokerParts, 'db' | 'queries' | 'outcomes' | 'switches' | 'logger' | 'nodeId'>;
  readonly #lookAgain: () => void;

  constructor(parts: Pick<BrokerParts, 'db' | 'queries' | 'outcomes' | 'switches' | 'logger' | 'nodeId' | 'lookAgain'>) {
    this.#parts = parts;
    this.#lookAgain = parts.lookAgain;
  }

  async listEvaluations(query: EvaluationQuery): Promise<EvaluationPage> {
    const q = checkQuery(query, parsePgCursor);
    const { db, queries } = this.#parts;
    // No evaluation has a key the database cannot store (and the database would refuse it as a parameter).
    if ([q.type, q.namespace, q.jobId].some((key) => key !== undefined && !isStorableKey(key))) return { items: [], nextCursor: undefined };
    const shape = { state: q.state, newest: q.newest, cursor: q.after !== undefined, type: q.type !== undefined, namespace: q.namespace !== undefined, jobId: q.jobId !== undefined };
    const values: unknown[] = [];
    if (q.after !== undefined) values.push(q.after);
    if (q.type !== undefined) values.push(q.type);
    if (q.namespace !== undefined) values.push(q.namespace);
    if (q.jobId !== undefined) values.push(q.jobId);
    values.push(q.limit + 1);
    const rows = await db.query<ListRow>(queries.listEvaluations(shape), values, 'an evaluation listing');
    const page = rows.slice(0, q.limit);
    const items = page.map((r) => ({ id: r.id, namespace: r.namespace, jobId: r.job_id, type: r.type, priority: r.priority, state: q.state, deliveries: r.deliveries }));
    return { items, nextCursor: rows.length > q.limit ? pgCursor(Number(page[page.length - 1]!.seq)) : undefined };
  }

  /** Counts by state and type, each state's scan stopped at `cap` rows. */
  async depths(cap: number): Promise<QueueDepths> {
    checkCap(cap);
    const rows = await this.#parts.db.query<{ state: AdminEvaluationState; queue: string; n: number }>(this.#parts.queries.depths, [cap], 'queue depths');
    const totals: Record<AdminEvaluationState, number> = { ready: 0, unacked: 0, pending: 0, delayed: 0, failed: 0 };
    const byType: Record<string, { ready: number; unacked: number }> = {};
    for (const { state, queue, n } of rows) {
      totals[state] += n;
      if ((state === 'ready' || state === 'unacked') && queue !== '_failed') (byType[queue] ??= { ready: 0, unacked: 0 })[state] += n;
    }
    return { totals, byType, cap };
  }

  async evaluationDetail(id: string): Promise<EvaluationDetail | undefined> {
    assertId('id', id);
    if (!isStorableKey(id)) return undefined;
    const [row] = await this.#parts.db.query<DetailRow>(this.#parts.queries.evaluationDetail, [id], 'an evaluation detail');
    if (row === undefined) return undefined;
    return {
      id: row.id,
      namespace: row.namespace,
      jobId: row.job_id,
      type: row.type,
      priority: row.priority,
      state: adminState(row),
      deliveries: row.deliveries,
      queue: row.queue,
      holdsJobSlot: row.holds_slot,
      payload: (decodeValue(row.body) as Evaluation).payload,
      lastError: errorView(row.last_reason ?? undefined),
      failure: errorView(row.failure ?? undefined),
      history: historyOf(row),
    };
  }

  /**
   * A failed evaluation that is not in flight back to its type's queue (see the schema's `replay`). This process's
   * handle of it, if it enqueued it, reopens: `done` read from now on settles with the new outcome.
   */
  async replay(id: string): Promise<boolean> {
    assertId('id', id);
    if (!this.#parts.switches.enabled) throw new BrokerDisabledError('replay');
    if (!isStorableKey(id)) return false;
    const [row] = await this.#parts.db.query<{ replayed: boolean; origin: string | null }>(this.#parts.queries.replay, [id], 'a replay');
    if (row?.replayed !== true) return false;
    if (row.origin === this.#parts.nodeId) this.#parts.outcomes.get(id)?.reopen();
    if (this.#parts.logger.isLevelEnabled('info')) this.#parts.logger.info({ evalId: id }, 'failed eval replayed');
    this.#lookAgain();
    return true;
  }

  async failedIds(type: string, limit: number): Promise<readonly string[]> {
    assertId('type', type);
    if (!Number.isSafeInteger(limit) || limit < 1) throw new InvalidArgumentError('limit', 'an integer >= 1', limit);
    if (!isStorableKey(type)) return [];
    const rows = await this.#parts.db.query<{ id: string }>(this.#parts.queries.failedIds, [type, limit], 'failed ids');
    return rows.map((r) => r.id);
  }

  async pauseType(type: string): Promise<void> {
    assertId('type', type);
    if (!isStorableKey(type)) throw new InvalidArgumentError('type', KEY_EXPECTED, type);
    await this.#parts.db.query(this.#parts.queries.pauseType, [type], 'pausing a type');
  }

  /** The schema's `resume_type` notifies every process; this one looks again at once (behind a pooler it hears none). */
  async resumeType(type: string): Promise<void> {
    assertId('type', type);
    if (!isStorableKey(type)) return;
    await this.#parts.db.query(this.#parts.queries.resumeType, [type], 'resuming a type');
    this.#lookAgain();
  }

  async pausedTypes(): Promise<readonly string[]> {
    const rows = await this.#parts.db.query<{ type: string }>(this.#parts.queries.pausedTypes, [], 'paused types');
    return rows.map((r) => r.type);
  }
}
