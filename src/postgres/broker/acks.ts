/**
 * Acks, batched: the acks of held deliveries asked for in one turn go to the database in one `ack_many` statement
 * (at most `MAX_FETCH`), and while the threads have work ahead a batch waits a little for company. Each ack is
 * answered for itself. An ack whose statement was not answered is re-read, never sent twice; one of a delivery this
 * process does not hold goes alone. The local side of an ack that committed (`settledAck`) is the same whether it
 * committed here or in a plan's commit.
 */
import { assertAckResult, assertId, assertToken } from '../../broker/arguments.js';
import { DEFAULT_NAMESPACE, type Evaluation } from '../../broker/evaluation.js';
import type { AckResult } from '../../broker/outcome-waiters.js';
import type { TimerHandle } from '../../clock.js';
import { BackendUnavailableError, EvalNotOutstandingError, InvalidArgumentError, SupersededError } from '../../errors.js';
import { isStorableKey } from '../../storable-key.js';
import { decodeValue, encodeStorable, encodeValue } from '../codec.js';
import type { Endings } from './endings.js';
import { MAX_FETCH } from './fetcher.js';
import type { Held } from './leases.js';
import type { FetchPacing } from './pacing.js';
import type { BrokerParts } from './parts.js';
import { refusalError, sqlToken, withCause } from './refusals.js';

/**
 * Longest an ack waits for company while the threads are busy (see `RoundTripPacer`), and at most a tenth of the
 * nack timeout: it holds the job's slot and the caller's outcome meanwhile, and must land well inside its lease.
 */
const MAX_ACK_LINGER_MS = 20;

interface PendingAck {
  readonly held: Held;
  readonly result: AckResult | undefined;
  /** `result.value` encoded at `ack()` (see `encodeStorable`). */
  readonly body: Buffer;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
  /** The latest it may wait for company until (the broker's clock; see `#acksCanWait`). */
  readonly due: number;
}

/** What an ack that committed settles here. */
export interface AckOutcome {
  readonly value: unknown;
  readonly index: number;
  readonly attempts: number;
  readonly deliveries: number | undefined;
}

export interface AckParts
  extends Pick<BrokerParts, 'db' | 'queries' | 'clock' | 'logger' | 'events' | 'nodeId' | 'lease' | 'leases' | 'outcomes' | 'pacer' | 'switches' | 'lookAgain'> {
  readonly pacing: FetchPacing;
  readonly endings: Endings;
}

export class Acks {
  readonly #parts: AckParts;
  #ackBatch: PendingAck[] = [];
  #acking = false;
  /** A flush of the ack batch is due in this turn's microtasks: acks asked for meanwhile go with it. */
  #ackFlushSoon = false;
  /** Armed while the ack batch waits for company: when it fires, the batch goes whatever it holds. */
  #ackLinger: TimerHandle | undefined;
  /** When `#ackLinger` fires. */
  #ackLingerAt = Number.POSITIVE_INFINITY;

  constructor(parts: AckParts) {
    this.#parts = parts;
  }

  /** An ack statement is out, or acks wait to go. */
  get busy(): boolean {
    return this.#acking || this.#ackBatch.length > 0;
  }

  /** An ack statement is out. */
  get acking(): boolean {
    return this.#acking;
  }

  ack(id: string, token: string, result?: AckResult): Promise<void> {
    assertId('id', id);
    assertToken(token);
    assertAckResult(result);
    const held = this.#parts.leases.byToken(token);
    if (held === undefined || held.id !== id) {
      if (!isStorableKey(id)) return Promise.reject(new EvalNotOutstandingError(id));
      return this.#ackOne(id, sqlToken(token), result);
    }
    // Refused here, alone, if it cannot be stored: never inside the statement that carries the other acks.
    const body = encodeStorable(result?.value, 'result.value', InvalidArgumentError);
    // A delivery held here: its job is known, so it can go with the other acks of this turn in one call.
    const batched = new Promise<void>((resolve, reject) => {
      // It waits at most MAX_ACK_LINGER_MS (a tenth of the nack timeout when that is shorter), and never into the
      // last stretch of its lease, where a late statement would find the lease over.
      const now = this.#parts.clock.now();
      const linger = Math.min(MAX_ACK_LINGER_MS, this.#parts.lease.nackTimeoutMs / 10);
      const due = Math.min(now + linger, held.leaseEnd - linger);
      this.#ackBatch.push({ held, result, body, resolve, reject, due });
      this.#flushAcksSoon();
    });
    // A try again re-reads first: the batch's statement may have landed with its answer lost.
    return this.#parts.endings.ending(held, batched, () => this.#ackOne(id, token, result, new BackendUnavailableError('the ack before this one was not answered')));
  }

  /** Acks waiting for company go now, unless a statement is out (they go after it). */
  flushNow(): void {
    if (!this.#acking && this.#ackBatch.length > 0) void this.#flushAcks(false);
  }

  /** No ack waits for company any more: the linger timer goes, and what waits is sent. */
  close(): void {
    if (this.#ackLinger !== undefined) this.#parts.clock.clearTimer(this.#ackLinger);
    this.#ackLinger = undefined;
    if (this.#ackBatch.length > 0) void this.#flushAcks(false);
  }

  #flushAcksSoon(): void {
    if (this.#acking || this.#ackFlushSoon) return;
    this.#ackFlushSoon = true;
    queueMicrotask(() => {
      this.#ackFlushSoon = false;
      void this.#flushAcks(true);
    });
  }

  /** Sends the ack batch, a statement at a time; with `linger`, not while it may wait for company (`#acksCanWait`). */
  async #flushAcks(linger: boolean): Promise<void> {
    if (this.#acking) return;
    this.#acking = true;
    try {
      while (this.#ackBatch.length > 0 && !(linger && this.#acksCanWait())) {
        const batch = this.#ackBatch.splice(0, MAX_FETCH);
        await this.#ackMany(batch);
      }
    } finally {
      this.#acking = false;
    }
  }

  /**
   * While the threads have work ahead of them, an ack batch waits for more acks until the earliest `due` among them
   * (each ack asked for looks again; the timer is the bound), so CPU-bound work is acked dozens at a time.
   */
  #acksCanWait(): boolean {
    const { clock, switches, pacer } = this.#parts;
    if (switches.closed || this.#ackBatch.length >= MAX_FETCH) return false;
    const now = clock.now();
    let due = Number.POSITIVE_INFINITY;
    for (const a of this.#ackBatch) if (a.due < due) due = a.due;
    if (now >= due || !pacer.threadsBusy()) return false;
    if (this.#ackLinger !== undefined && this.#ackLingerAt <= due) return true;
    if (this.#ackLinger !== undefined) clock.clearTimer(this.#ackLinger);
    this.#ackLingerAt = due;
    this.#ackLinger = clock.setTimer(() => {
      this.#ackLinger = undefined;
      this.#ackLingerAt = Number.POSITIVE_INFINITY;
      void this.#flushAcks(true);
    }, due - now, { unref: true });
    return true;
  }

  async #ackMany(batch: PendingAck[]): Promise<void> {
    const { db, queries, pacer, pacing, nodeId } = this.#parts;
    let rows: { id: string | null; status: string | null; deliveries: number | null; promoted: string | null; canceled: string[] | null }[];
    pacing.acksSent(batch.length);
    const sentAt = pacer.start();
    try {
      rows = await db.query(
        queries.ackMany,
        [
          batch.map((a) => a.held.id),
          batch.map((a) => a.held.token),
          batch.map((a) => a.body),
          batch.map((a) => a.result?.index ?? 0),
          batch.map((a) => a.result?.attempts ?? 1),
          batch.map((a) => a.held.evaluation.namespace ?? DEFAULT_NAMESPACE),
          batch.map((a) => a.held.evaluation.jobId),
          nodeId,
        ],
        'an ack',
      );
      pacer.answered(sentAt);
    } catch (error) {
      pacing.acksLanded();
      // Unknown whether it landed: each one is resolved by re-reading, never acked twice.
      for (const a of batch) this.#ackOne(a.held.id, a.held.token, a.result, error).then(a.resolve, a.reject);
      return;
    }
    pacing.acksLanded();
    const byId = new Map<string, (typeof rows)[number]>();
    for (const row of rows) {
      if (row.id !== null) byId.set(row.id, row);
      else if (row.promoted !== null) this.settledPromotion(row.promoted, row.canceled);
    }
    for (const a of batch) {
      const row = byId.get(a.held.id);
      if (row?.status !== 'ok') {
        a.reject(refusalError(row?.status ?? 'not_outstanding', a.held.id, a.held.token));
        continue;
      }
      this.settledAck(a.held.id, a.held.token, {
        value: a.result?.value,
        index: a.result?.index ?? 0,
        attempts: a.result?.attempts ?? 1,
        deliveries: row.deliveries ?? 0,
      });
      a.resolve();
    }
  }

  /** One ack on its own; with `failed`, the error of a first try whose outcome is unknown (re-read first). */
  async #ackOne(id: string, token: string, result: AckResult | undefined, failed?: unknown): Promise<void> {
    const value = encodeValue(result?.value);
    const index = result?.index ?? 0;
    const attempts = result?.attempts ?? 1;
    let row: { status: string; deliveries: number | null; promoted: string | null; canceled: string[] | null };
    try {
      if (failed !== undefined) throw failed;
      [row] = (await this.#parts.db.query(this.#parts.queries.ack, [id, token, value, index, attempts, this.#parts.nodeId], 'an ack')) as [typeof row];
    } catch (error) {
      // The connection broke with the ack on its way (it may have committed): re-read whether it landed, never ack twice.
      if (!(error instanceof BackendUnavailableError)) throw error;
      const landed = await this.#landed(id, token);
      if (landed === 'acked') row = { status: 'ok', deliveries: null, promoted: null, canceled: null };
      else if (landed === 'unacked') return this.#ackOne(id, token, result);
      // Neither acked nor current with this token: the delivery is over (its lease ran out and it was redelivered).
      else throw withCause(new EvalNotOutstandingError(id), error);
    }
    if (row.status !== 'ok') throw refusalError(row.status, id, token);
    this.settledAck(id, token, { value: result?.value, index, attempts, deliveries: row.deliveries ?? undefined });
    if (row.promoted !== null) this.settledPromotion(row.promoted, row.canceled);
  }

  /** Whether an ack of (id, token) is in the database ('acked'), still to do ('unacked') or impossible (undefined). */
  async #landed(id: string, token: string): Promise<'acked' | 'unacked' | undefined> {
    const [row] = await this.#parts.db.query<{ state: string; token: string | null }>(this.#parts.queries.ackCheck, [id], 'an ack check');
    if (row === undefined || row.token !== token) return undefined;
    return row.state === 'acked' ? 'acked' : row.state === 'unacked' ? 'unacked' : undefined;
  }

  /**
   * The local side of an ack that committed (here or in a plan's commit): the lease is over, the handle resolves,
   * the event goes out.
   */
  settledAck(id: string, token: string, outcome: AckOutcome): void {
    const { leases, outcomes, events } = this.#parts;
    const held = leases.byToken(token);
    if (held !== undefined) leases.delete(held);
    // Unknown (a cut-off commit that landed): the held delivery's own count is the one the database has.
    const deliveries = outcome.deliveries ?? held?.deliveries ?? 0;
    outcomes.settle(id, (h) => h.acked(outcome.value, outcome.index, outcome.attempts, deliveries));
    if (held !== undefined && events.hasListeners('broker:ack')) events.emit('broker:ack', { evaluation: held.evaluation, token });
  }

  /** An ack promoted `promoted` and superseded `canceled` (their handles here reject with `SupersededError`). */
  settledPromotion(promoted: string, canceled: readonly string[] | null): void {
    if (canceled !== null && canceled.length > 0) {
      for (const c of canceled) this.#parts.outcomes.settle(c, (h) => h.rejected(() => new SupersededError(c, promoted)));
      if (this.#parts.events.hasListeners('broker:cancelable')) void this.#emitCancelable(canceled);
    }
    this.#parts.lookAgain();
  }

  async #emitCancelable(ids: readonly string[]): Promise<void> {
    try {
      const rows = await this.#parts.db.query<{ body: Buffer }>(this.#parts.queries.bodies, [ids]);
      this.#parts.events.emit('broker:cancelable', { evaluations: rows.map((r) => decodeValue(r.body) as Evaluation) });
    } catch (error) {
      this.#parts.logger.debug({ err: error }, 'could not read the superseded evaluations for broker:cancelable');
    }
  }
}
