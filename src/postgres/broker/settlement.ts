/**
 * The ends of a delivery other than an ack: nack (redelivery after its delay, or `_failed` at the delivery limit),
 * give-back (ready again at once, uncharged), fail (straight to `_failed`) and remove; and the ends that come from
 * the lease (its nack deadline fired, or the database no longer has it). Each end of a held delivery is tried until
 * it lands (`Endings`); each presents the delivery's token, checked by the database in the same transaction, and a
 * refusal is the in-memory broker's error. Events are those of deliveries this process held.
 */
import { assertId, assertOptionalReason, assertOptionalToken, assertReason, assertToken } from '../../broker/arguments.js';
import { FAILED_QUEUE, type EvaluationState } from '../../broker/evaluation.js';
import { AbortedError, DeliveryLimitError, EvalNotOutstandingError, NackTimeoutReachedError } from '../../errors.js';
import { isStorableKey } from '../../storable-key.js';
import { encodeError } from '../codec.js';
import type { Endings } from './endings.js';
import { heldAs } from './held-deliveries.js';
import type { Held } from './leases.js';
import type { BrokerParts } from './parts.js';
import { refusalError, sqlToken, withCause } from './refusals.js';

export interface SettlementParts
  extends Pick<BrokerParts, 'db' | 'names' | 'queries' | 'logger' | 'events' | 'nodeId' | 'lease' | 'leases' | 'outcomes' | 'work' | 'lookAgain'> {
  readonly endings: Endings;
}

export class Settlement {
  readonly #parts: SettlementParts;

  constructor(parts: SettlementParts) {
    this.#parts = parts;
  }

  nack(id: string, token: string, reason?: Error): Promise<void> {
    assertId('id', id);
    assertToken(token);
    assertOptionalReason(reason);
    return this.#end(id, token, (t) => this.#nack(id, t, reason, false));
  }

  /**
   * An end by (id, token) with checked arguments: `end` runs with the token as a statement carries it, and is tried
   * until it lands when this process holds the delivery. No delivery has an id that is not a key.
   */
  #end(id: string, token: string, end: (token: string) => Promise<void>): Promise<void> {
    if (!isStorableKey(id)) return Promise.reject(new EvalNotOutstandingError(id));
    const t = sqlToken(token);
    const again = (): Promise<void> => end(t);
    return this.#parts.endings.ending(heldAs(this.#parts.leases, id, t), again(), again);
  }

  async #nack(id: string, token: string, reason: Error | undefined, timedOut: boolean): Promise<void> {
    const { db, queries, leases, outcomes, events, lease: l } = this.#parts;
    const [row] = await db.query<{ status: string; deliveries: number; failed: boolean; delay_ms: number; promoted: string | null }>(
      queries.nack,
      [id, token, reason === undefined ? null : JSON.stringify(encodeError(reason)), timedOut, l.deliveryLimit, l.initialNackDelayMs, l.subsequentNackDelayMs, this.#parts.nodeId],
      'a nack',
    );
    const held = leases.byToken(token);
    if (row === undefined || row.status !== 'ok') {
      if (held !== undefined && timedOut) this.lost(held);
      throw refusalError(row?.status ?? 'not_outstanding', id, token);
    }
    if (held !== undefined) leases.delete(held);
    if (row.failed) {
      const error = withCause(new DeliveryLimitError(id, row.deliveries, l.deliveryLimit), reason);
      outcomes.settle(id, (h) => h.rejected(error));
    }
    if (held !== undefined) {
      if (events.hasListeners('broker:nack')) {
        events.emit('broker:nack', {
          evaluation: held.evaluation,
          token,
          timedOut,
          deliveries: row.deliveries,
          delayMs: Number(row.delay_ms),
          failed: row.failed,
          reason,
        });
      }
      if (row.failed && events.hasListeners('broker:failed')) {
        events.emit('broker:failed', { evaluation: held.evaluation, reason: withCause(new DeliveryLimitError(id, row.deliveries, l.deliveryLimit), reason) });
      }
    }
    if (!row.failed && Number(row.delay_ms) === 0) this.#parts.lookAgain();
    if (row.promoted !== null) this.#parts.lookAgain();
  }

  giveBack(id: string, token: string, reason?: Error): Promise<void> {
    assertId('id', id);
    assertToken(token);
    assertOptionalReason(reason);
    return this.#end(id, token, (t) => this.#giveBackOne(id, t, reason));
  }

  /**
   * `give_back` (uncharged, ready at once) with the reason for a refusal: the row as the statement's snapshot saw it,
   * before the give-back, says why one did not take.
   */
  async #giveBackOne(id: string, token: string, reason: Error | undefined): Promise<void> {
    const { db, queries, names, leases, events } = this.#parts;
    const [row] = await db.query<{ ok: boolean; refusal: string | null; deliveries: number | null; queue: string | null }>(
      queries.giveBackOne,
      [id, token, names.channels.ready],
      'a give-back',
    );
    if (row === undefined || !row.ok) throw refusalError(row?.refusal ?? 'not_outstanding', id, token);
    const held = leases.byToken(token);
    if (held !== undefined) leases.delete(held);
    if (held !== undefined && events.hasListeners('broker:give-back')) {
      const deliveries = (row.deliveries ?? held.deliveries) - (row.queue === FAILED_QUEUE ? 0 : 1);
      events.emit('broker:give-back', { evaluation: held.evaluation, token, deliveries, reason });
    }
    this.#parts.lookAgain();
  }

  fail(id: string, token: string, reason: Error): Promise<void> {
    assertId('id', id);
    assertToken(token);
    assertReason(reason);
    return this.#end(id, token, (t) => this.#fail(id, t, reason));
  }

  async #fail(id: string, token: string, reason: Error): Promise<void> {
    const { db, queries, leases, outcomes, events } = this.#parts;
    const [row] = await db.query<{ status: string; promoted: string | null }>(
      queries.fail,
      [id, token, JSON.stringify(encodeError(reason)), this.#parts.nodeId],
      'a fail',
    );
    if (row === undefined || row.status !== 'ok') throw refusalError(row?.status ?? 'not_outstanding', id, token);
    const held = leases.byToken(token);
    if (held !== undefined) leases.delete(held);
    outcomes.settle(id, (h) => h.rejected(reason));
    if (held !== undefined && events.hasListeners('broker:failed')) events.emit('broker:failed', { evaluation: held.evaluation, reason });
    if (row.promoted !== null) this.#parts.lookAgain();
  }

  remove(id: string, token?: string, cause?: unknown): Promise<boolean> {
    assertId('id', id);
    assertOptionalToken(token);
    // No evaluation has an id that is not a key: there is nothing to remove.
    if (!isStorableKey(id)) return Promise.resolve(false);
    const t = token === undefined ? undefined : sqlToken(token);
    const held = t === undefined ? undefined : heldAs(this.#parts.leases, id, t);
    if (held === undefined) return this.#remove(id, t, cause);
    let removed = false;
    const remove = (): Promise<void> => this.#remove(id, t, cause).then((r) => void (removed = r));
    return this.#parts.endings.ending(held, remove(), remove).then(() => removed);
  }

  async #remove(id: string, token: string | undefined, cause: unknown): Promise<boolean> {
    const { db, queries, leases, outcomes, events } = this.#parts;
    const [row] = await db.query<{ status: string; prior: EvaluationState | null; promoted: string | null }>(
      queries.remove,
      [id, token ?? null, cause === undefined ? null : JSON.stringify(encodeError(cause)), this.#parts.nodeId],
      'a remove',
    );
    if (row === undefined || row.status === 'absent') return false;
    if (row.status !== 'ok') throw refusalError(row.status, id, token);
    const held = token === undefined ? undefined : leases.byToken(token);
    if (held !== undefined) leases.delete(held);
    outcomes.settle(id, (h) => h.rejected(() => new AbortedError(`evaluation ${JSON.stringify(id)}`, { cause })));
    if (events.hasListeners('broker:remove')) {
      const evaluation = held?.evaluation ?? outcomes.get(id)?.evaluation;
      if (evaluation !== undefined) events.emit('broker:remove', { evaluation, state: row.prior ?? 'ready' });
    }
    if (row.promoted !== null) this.#parts.lookAgain();
    return true;
  }

  /** The keeper let the lease go and its end came: the nack deadline fired. */
  expire(held: Held): void {
    const nack = (): Promise<void> => this.#nack(held.id, held.token, new NackTimeoutReachedError(held.id), true);
    this.#parts.work.track(
      this.#parts.endings.ending(held, nack(), nack).catch((error: unknown) =>
        this.#parts.logger.debug({ err: error, evalId: held.id }, 'timed-out nack refused (the lease was already over)'),
      ),
    );
  }

  /** The database no longer has this process's lease: whoever works on it here must stop. */
  lost(held: Held): void {
    if (held.ended) return;
    this.#parts.leases.delete(held);
    this.#parts.logger.info({ evalId: held.id }, 'lease lost (it ran out and was taken over)');
    if (this.#parts.events.hasListeners('broker:nack')) {
      this.#parts.events.emit('broker:nack', {
        evaluation: held.evaluation,
        token: held.token,
        timedOut: true,
        deliveries: held.deliveries,
        delayMs: 0,
        failed: false,
        reason: new NackTimeoutReachedError(held.id),
      });
    }
  }

  /** Reaped elsewhere or by this process's reaper: a delivery this process held is over. */
  reaped(token: string): void {
    const held = this.#parts.leases.byToken(token);
    if (held !== undefined) this.lost(held);
  }
}
