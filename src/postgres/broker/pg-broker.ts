/**
 * The evaluation broker in PostgreSQL: one broker for every engine process sharing the schema. The rules are the
 * in-memory broker's (see `BrokerBackend`), kept by the database for the whole cluster: admission, the job slot,
 * promotion and dead-lettering happen in the schema's functions under the job's lock; a delivery is a lease in
 * database time; ack, nack, fail and remove present the delivery's token and are checked in the same transaction.
 *
 * This process's part: it batches the enqueues of one turn into one transaction (`Admission`), serves its waiting
 * dequeues from batched fetches (`Serving`, `Fetcher`: `FOR UPDATE SKIP LOCKED` in a MATERIALIZED CTE, as many rows
 * as dequeues wait), keeps the leases of what it handed out (`Leases`), and settles the handles it has (`Acks`,
 * `Settlement`). Events are those of what this process did. `PgBroker` owns each collaborator and wires them; it
 * keeps the switches (enabled, paused, closed), the stats (`stats.ts` reads their rows) and the lifecycle itself.
 */
import { randomUUID } from 'node:crypto';
import type { BrokerSettings } from '../../backend/backend.js';
import type { BrokerBackend, DequeueCallback, LeaseKeeper } from '../../backend/broker-backend.js';
import { assertCallback, assertEnabled, assertId, assertKeyTypes, assertOutcomeReason, assertWait, maxRefusal } from '../../broker/arguments.js';
import type { BrokerAdmin, EvaluationDetail, EvaluationPage, EvaluationQuery, QueueDepths } from '../../broker/admin-types.js';
import type { BrokerEvents } from '../../broker/broker-events.js';
import type { BrokerStats, Delivery, EvaluationInfo } from '../../broker/broker-types.js';
import type { Evaluation, EvaluationInput } from '../../broker/evaluation.js';
import type { AckResult, EvaluationHandle } from '../../broker/outcome-waiters.js';
import type { Clock } from '../../clock.js';
import { AbortedError, BrokerDisabledError, InvalidArgumentError } from '../../errors.js';
import { TypedEmitter } from '../../events.js';
import type { Logger } from '../../observability/logger.js';
import { payloadValidator } from '../../payload-size.js';
import { isStorableKey, MAX_KEY_BYTES } from '../../storable-key.js';
import type { Database } from '../database.js';
import type { Listener } from '../listener.js';
import type { SchemaNames } from '../names.js';
import { RoundTripPacer } from '../round-trip-pacer.js';
import { Acks, type AckOutcome } from './acks.js';
import { PgAdmin } from './admin.js';
import { Admission } from './admission.js';
import { Endings } from './endings.js';
import { Fetcher } from './fetcher.js';
import { GiveBacks } from './give-backs.js';
import { HeldDeliveries } from './held-deliveries.js';
import { leaseSettings, type LeaseSettings } from './lease-settings.js';
import { Leases } from './leases.js';
import { Notifications } from './notifications.js';
import { OutcomeWatch } from './outcome-watch.js';
import { FetchPacing } from './pacing.js';
import { BackgroundWork, BrokerSwitches, type BrokerParts } from './parts.js';
import { brokerQueries } from './queries.js';
import { Serving } from './serving.js';
import { Settlement } from './settlement.js';
import { infoOf, statsOf, type InspectRow, type StateCount } from './stats.js';
import { UnheardLeases } from './unheard-leases.js';
import { Waiters } from './waiters.js';

export interface PgBrokerOptions {
  readonly db: Database;
  readonly names: SchemaNames;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly listener: Listener;
  readonly settings: BrokerSettings;
  readonly pollMs: number;
  /** This backend instance: the origin of what it enqueues and the holder of what it dequeues. */
  readonly nodeId: string;
}

/** The longest id, job id, namespace or type, in UTF-8 bytes: the keys' rule (`storable-key.ts`) of both backends. */
export { MAX_KEY_BYTES };

export class PgBroker implements BrokerBackend, BrokerAdmin {
  readonly #parts: BrokerParts;
  readonly #switches = new BrokerSwitches();
  readonly #work = new BackgroundWork();
  readonly #pacer: RoundTripPacer;
  readonly #waiters: Waiters;
  readonly #pacing: FetchPacing;
  readonly #fetcher: Fetcher;
  readonly #giveBacks: GiveBacks;
  readonly #serving: Serving;
  readonly #notifications: Notifications;
  readonly #admission: Admission;
  readonly #acks: Acks;
  readonly #settlement: Settlement;
  readonly #held: HeldDeliveries;
  readonly #admin: PgAdmin;
  /** Told of each delivery handed over (the backend makes the replica catch up to its modifyIndex). */
  onDelivery: ((evaluation: Evaluation) => void) | undefined = undefined;

  constructor(options: PgBrokerOptions) {
    const { db, names, clock, logger, listener, pollMs, nodeId, settings: s } = options;
    const offerChannel = names.processChannel('offer', nodeId);
    const lease = leaseSettings(s);
    const events = new TypedEmitter<BrokerEvents>(() => logger);
    const queries = brokerQueries(names.S);
    const outcomes = new OutcomeWatch(db, queries, clock, logger, pollMs);
    this.#pacer = new RoundTripPacer(clock);
    const leases = new Leases(db, queries, clock, logger, lease.nackTimeoutMs, {
      expire: (held) => this.#settlement.expire(held),
      lost: (held) => this.#settlement.lost(held),
      extended: (held) => {
        if (events.hasListeners('broker:extend')) {
          events.emit('broker:extend', { evaluation: held.evaluation, token: held.token, deadline: held.leaseEnd });
        }
      },
    });
    const parts: BrokerParts = {
      db,
      names,
      queries,
      clock,
      logger,
      events,
      nodeId,
      lease,
      leases,
      outcomes,
      pacer: this.#pacer,
      unheard: new UnheardLeases(),
      switches: this.#switches,
      work: this.#work,
      lookAgain: () => this.#serving.lookAgain(),
    };
    this.#parts = parts;
    this.#waiters = new Waiters(parts, () => this.onDelivery);
    this.#pacing = new FetchPacing(parts, { waiting: () => this.#waiters.length, held: () => leases.size }, () => this.kick());
    // Breaks ties between types of equal priority (the broker's `random` option).
    const random = typeof s.random === 'function' ? s.random : Math.random;
    this.#fetcher = new Fetcher(parts, { pollMs, offerChannel, random });
    this.#giveBacks = new GiveBacks(parts);
    const wired = { waiters: this.#waiters, pacing: this.#pacing, fetcher: this.#fetcher, giveBacks: this.#giveBacks };
    this.#serving = new Serving({ ...parts, ...wired, listener, pollMs });
    this.#notifications = new Notifications({ ...parts, ...wired, serving: this.#serving, listener, offerChannel });
    this.#admission = new Admission({ ...parts, knownTypes: new Set(s.knownTypes), validatePayload: payloadValidator(s.maxPayloadBytes) });
    const endings = new Endings(parts);
    this.#acks = new Acks({ ...parts, pacing: this.#pacing, endings });
    this.#settlement = new Settlement({ ...parts, endings });
    this.#held = new HeldDeliveries(parts);
    this.#admin = new PgAdmin(parts);
  }

  get events(): TypedEmitter<BrokerEvents> {
    return this.#parts.events;
  }

  get enabled(): boolean {
    return this.#switches.enabled;
  }

  get paused(): boolean {
    return this.#switches.paused;
  }

  /** The lease settings this process applies (nack timeout, delivery limit, nack delays). */
  get leaseSettings(): LeaseSettings {
    return this.#parts.lease;
  }

  /** This backend instance's id (the `holder` of its deliveries, the `origin` of its enqueues). */
  get nodeId(): string {
    return this.#parts.nodeId;
  }

  /** Deliveries this process holds. */
  get held(): number {
    return this.#parts.leases.size;
  }

  /** Subscribes to the notifications it needs; called by the backend before the listener connects. */
  subscribe(): void {
    this.#notifications.subscribe();
  }

  open(): void {
    this.#switches.open = true;
    this.#admission.flushSoon();
    this.#serving.lookAgain();
  }

  // ───────────────────────────── admission and dequeue ─────────────────────────────

  enqueue(input: EvaluationInput): EvaluationHandle {
    return this.#admission.enqueue(input);
  }

  /** Never does I/O: a delivery exists here only for a dequeue that waits, so there is none to hand out now. */
  tryDequeue(types: readonly string[]): Delivery | undefined {
    assertKeyTypes(types);
    if (!this.#switches.enabled) throw new BrokerDisabledError('tryDequeue');
    return undefined;
  }

  dequeue(types: readonly string[], timeoutMs: number, signal?: AbortSignal): Promise<Delivery | undefined> {
    return new Promise<Delivery | undefined>((resolve, reject) => {
      this.dequeueWith(types, timeoutMs, signal, (error, delivery) => (error === undefined ? resolve(delivery) : reject(error)));
    });
  }

  dequeueMany(types: readonly string[], max: number, timeoutMs: number, signal?: AbortSignal): Promise<Delivery[]> {
    const refusal = maxRefusal(max);
    if (refusal !== undefined) return Promise.reject(refusal);
    return this.#dequeueMany(types, max, timeoutMs, signal);
  }

  async #dequeueMany(types: readonly string[], max: number, timeoutMs: number, signal: AbortSignal | undefined): Promise<Delivery[]> {
    const first = await this.dequeue(types, timeoutMs, signal);
    if (first === undefined) return [];
    const rest = max > 1 ? await this.#fetcher.fetch([...new Set(types)], max - 1) : [];
    return [first, ...rest.map((h) => this.#waiters.handOver(h))];
  }

  dequeueWith(types: readonly string[], timeoutMs: number, signal: AbortSignal | undefined, callback: DequeueCallback): void {
    assertCallback(callback);
    try {
      assertKeyTypes(types);
      assertWait(timeoutMs, signal);
    } catch (error) {
      return this.#waiters.answer(callback, error as Error, undefined);
    }
    if (!this.#switches.enabled || this.#switches.closed) return this.#waiters.answer(callback, new BrokerDisabledError('dequeue'), undefined);
    if (signal?.aborted === true) return this.#waiters.answer(callback, new AbortedError('dequeue'), undefined);
    this.#waiters.add(types, timeoutMs, signal, callback);
    this.kick();
  }

  /** Something may be ready (a notification, an enqueue, a promotion, a poll): fetch for the waiting dequeues. */
  kick(): void {
    this.#serving.kick();
  }

  paceBy(workAheadMs: () => number, threadsFree?: (withinMs: number) => number): void {
    if (typeof workAheadMs !== 'function') throw new InvalidArgumentError('workAheadMs', 'a function', workAheadMs);
    if (threadsFree !== undefined && typeof threadsFree !== 'function') throw new InvalidArgumentError('threadsFree', 'a function or undefined', threadsFree);
    this.#pacer.workAheadMs = workAheadMs;
    this.#pacer.threadsFree = threadsFree;
  }

  /** Resolves once what this process started in the background (timed-out nacks, give-backs, fetches) is done. */
  async idle(): Promise<void> {
    while (this.#work.size > 0 || this.#serving.fetching || this.#acks.busy || this.#admission.running !== undefined) {
      // Acks waiting for company go now: nothing is left to a timer.
      this.#acks.flushNow();
      await Promise.allSettled([...this.#work.pending(), this.#admission.running]);
      if (this.#serving.fetching || this.#acks.acking) await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  // ───────────────────────────── settlement ─────────────────────────────

  ack(id: string, token: string, result?: AckResult): Promise<void> {
    return this.#acks.ack(id, token, result);
  }

  /**
   * The local side of an ack that committed (here or in a plan's commit): the lease is over, the handle resolves,
   * the event goes out.
   */
  settledAck(id: string, token: string, outcome: AckOutcome): void {
    this.#acks.settledAck(id, token, outcome);
  }

  /** An ack promoted `promoted` and superseded `canceled` (their handles here reject with `SupersededError`). */
  settledPromotion(promoted: string, canceled: readonly string[] | null): void {
    this.#acks.settledPromotion(promoted, canceled);
  }

  nack(id: string, token: string, reason?: Error): Promise<void> {
    return this.#settlement.nack(id, token, reason);
  }

  giveBack(id: string, token: string, reason?: Error): Promise<void> {
    return this.#settlement.giveBack(id, token, reason);
  }

  fail(id: string, token: string, reason: Error): Promise<void> {
    return this.#settlement.fail(id, token, reason);
  }

  remove(id: string, token?: string, cause?: unknown): Promise<boolean> {
    return this.#settlement.remove(id, token, cause);
  }

  rejectOutcomes(reason: (evaluation: Evaluation) => Error): void {
    assertOutcomeReason(reason);
    for (const handle of this.#parts.outcomes.unsettled()) handle.abandoned(() => reason(handle.evaluation));
  }

  // ───────────────────────────── leases ─────────────────────────────

  outstanding(id: string): string | undefined | Promise<string | undefined> {
    return this.#held.outstanding(id);
  }

  outstandingReset(id: string, token: string): Promise<void> {
    return this.#held.outstandingReset(id, token);
  }

  pauseNackTimeout(id: string, token: string): void | Promise<never> {
    return this.#held.pauseNackTimeout(id, token);
  }

  resumeNackTimeout(id: string, token: string): void | Promise<never> {
    return this.#held.resumeNackTimeout(id, token);
  }

  keepLeases(keeper: LeaseKeeper | undefined): void {
    this.#parts.leases.keepLeases(keeper);
  }

  /** The job of a delivery this process holds (the plan committer locks it before acking in its commit). */
  jobOf(id: string, token: string): { namespace: string; jobId: string } | undefined {
    return this.#held.jobOf(id, token);
  }

  /** Reaped elsewhere or by this process's reaper: a delivery this process held is over. */
  reaped(token: string): void {
    this.#settlement.reaped(token);
  }

  // ───────────────────────────── state ─────────────────────────────

  async stats(): Promise<BrokerStats> {
    // State by state, so that each count reads its state's partial index rather than every row the table keeps.
    return statsOf(await this.#parts.db.query<StateCount>(this.#parts.queries.stats, [], 'broker stats'));
  }

  inspect(id: string): Promise<EvaluationInfo | undefined> {
    assertId('id', id);
    if (!isStorableKey(id)) return Promise.resolve(undefined);
    return this.#inspect(id);
  }

  async #inspect(id: string): Promise<EvaluationInfo | undefined> {
    const [row] = await this.#parts.db.query<InspectRow>(this.#parts.queries.inspect, [id], 'an inspect');
    return row === undefined ? undefined : infoOf(row);
  }

  // ───────────────────────────── admin (cluster-wide) ─────────────────────────────

  depths(cap: number): Promise<QueueDepths> {
    return this.#admin.depths(cap);
  }

  listEvaluations(query: EvaluationQuery): Promise<EvaluationPage> {
    return this.#admin.listEvaluations(query);
  }

  evaluationDetail(id: string): Promise<EvaluationDetail | undefined> {
    return this.#admin.evaluationDetail(id);
  }

  replay(id: string): Promise<boolean> {
    return this.#admin.replay(id);
  }

  failedIds(type: string, limit: number): Promise<readonly string[]> {
    return this.#admin.failedIds(type, limit);
  }

  pauseType(type: string): Promise<void> {
    return this.#admin.pauseType(type);
  }

  resumeType(type: string): Promise<void> {
    return this.#admin.resumeType(type);
  }

  pausedTypes(): Promise<readonly string[]> {
    return this.#admin.pausedTypes();
  }

  pause(): void {
    if (this.#switches.paused) return;
    this.#switches.paused = true;
    this.#parts.events.emit('broker:paused', { paused: true });
  }

  resume(): void {
    if (!this.#switches.paused) return;
    this.#switches.paused = false;
    this.#parts.events.emit('broker:paused', { paused: false });
    this.#serving.lookAgain();
  }

  setEnabled(enabled: boolean): Promise<Evaluation[]> {
    assertEnabled(enabled);
    return this.#setEnabled(enabled);
  }

  async #setEnabled(enabled: boolean): Promise<Evaluation[]> {
    if (enabled === this.#switches.enabled) return [];
    this.#switches.enabled = enabled;
    let given: Evaluation[] = [];
    if (!enabled) {
      this.#waiters.endAll(() => new BrokerDisabledError('dequeue'));
      given = await this.#giveBacks.all();
    } else {
      this.#serving.lookAgain();
    }
    this.#parts.events.emit('broker:enabled', { enabled, flushed: given });
    return given;
  }

  /** Stops serving this process: waiting dequeues end, what it holds goes back, admissions in flight finish. */
  async close(): Promise<void> {
    if (this.#switches.closed) return;
    this.#switches.closed = true;
    this.#waiters.endAll(() => new BrokerDisabledError('dequeue'));
    this.#serving.close();
    this.#pacing.close();
    this.#notifications.close();
    // Acks waiting for company go now (closed, none waits any more).
    this.#acks.close();
    await this.#admission.close();
    await Promise.allSettled(this.#work.pending());
    // Never opened (its engine's start failed before it): it fetched nothing, never stood as waiting and was offered
    // nothing, so there is nothing in the database to give back or withdraw.
    if (this.#switches.open) await this.#leave();
    await Promise.allSettled(this.#work.pending());
    this.#parts.leases.close();
    this.#parts.outcomes.close();
  }

  /** Close's part in the database: what this process holds goes back, and it stops standing as waiting. */
  async #leave(): Promise<void> {
    const { db, queries, logger, nodeId } = this.#parts;
    try {
      await this.#giveBacks.all();
    } catch (error) {
      logger.warn({ err: error }, 'could not give back the deliveries held at close; their leases will end');
    }
    // No enqueue should name this process any more (a row left behind stands until its time runs out). A fetch
    // still out would stand it again: after that one.
    while (this.#serving.fetching) await new Promise<void>((resolve) => setImmediate(resolve));
    await db
      .query(queries.unstand, [nodeId], 'leaving')
      .catch((error: unknown) => logger.warn({ err: error }, 'could not withdraw this process from the waiting dequeues'));
    // The DELETE waited for the enqueues that chose this process: what they offered is leased here, heard or not.
    await this.#notifications.giveBackMissedOffers();
  }

  /** A new random id for a backend instance. */
  static newNodeId(): string {
    return randomUUID();
  }
}
