/**
 * The evaluation broker in PostgreSQL: one broker for every engine process sharing the schema. The rules are the
 * in-memory broker's (see `BrokerBackend`), kept by the database for the whole cluster: admission, the job slot,
 * promotion and dead-lettering happen in the schema's functions under the job's lock; a delivery is a lease in
 * database time; ack, nack, fail and remove present the delivery's token and are checked in the same transaction.
 *
 * This process's part: it batches the enqueues of one turn into one transaction (`accepted` resolves after its
 * commit), serves its waiting dequeues from batched fetches (`FOR UPDATE SKIP LOCKED` in a MATERIALIZED CTE, as
 * many rows as dequeues wait), keeps the leases of what it handed out (`Leases`), and settles the handles it has.
 * Events are those of what this process did.
 */
import { randomUUID } from 'node:crypto';
import type { BrokerSettings } from '../backend/backend.js';
import type { BrokerBackend, DequeueCallback, LeaseKeeper } from '../backend/broker-backend.js';
import {
  assertAckResult,
  assertCallback,
  assertEnabled,
  assertId,
  assertKeyTypes,
  assertOptionalReason,
  assertOptionalToken,
  assertOutcomeReason,
  assertReason,
  assertToken,
  assertWait,
  maxRefusal,
} from '../broker/arguments.js';
import type { BrokerEvents } from '../broker/broker-events.js';
import type { BrokerStats, Delivery, EvaluationInfo, SchedulerStats } from '../broker/eval-broker.js';
import {
  assertEvaluation,
  DEFAULT_NAMESPACE,
  FAILED_QUEUE,
  withEvaluationDefaults,
  type Evaluation,
  type EvaluationInput,
  type EvaluationState,
} from '../broker/evaluation.js';
import type { AckResult, EvaluationHandle } from '../broker/outcome-waiters.js';
import type { Clock, TimerHandle } from '../clock.js';
import {
  AbortedError,
  BackendUnavailableError,
  BrokerDisabledError,
  DeliveryLimitError,
  EvalNotOutstandingError,
  InvalidArgumentError,
  InvalidEvaluationError,
  InvalidStateError,
  NackTimeoutReachedError,
  SupersededError,
  TokenMismatchError,
  UnknownSchedulerError,
} from '../errors.js';
import { TypedEmitter } from '../events.js';
import type { Logger } from '../observability/logger.js';
import { payloadValidator } from '../payload-size.js';
import { isStorableKey, MAX_KEY_BYTES } from '../storable-key.js';
import { decodeValue, encodeError, encodeStorable, encodeValue } from './codec.js';
import { refusedInput, type Database } from './database.js';
import { Held, Leases } from './leases.js';
import type { Listener } from './listener.js';
import type { SchemaNames } from './names.js';
import { brokerQueries, type BrokerQueries } from './broker/queries.js';
import { OutcomeWatch } from './outcome-watch.js';
import { PgHandle } from './pg-handle.js';
import { RoundTripPacer } from './round-trip-pacer.js';
import { UnheardLeases } from './unheard-leases.js';

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

/** The broker settings with their defaults (the in-memory broker's). */
export interface LeaseSettings {
  readonly nackTimeoutMs: number;
  readonly deliveryLimit: number;
  readonly initialNackDelayMs: number;
  readonly subsequentNackDelayMs: number;
}

interface Waiter {
  readonly types: readonly string[];
  readonly key: string;
  readonly callback: DequeueCallback;
  timer: TimerHandle | undefined;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  answered: boolean;
}

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

interface PendingEnqueue {
  readonly evaluation: Evaluation;
  /** Its structured-clone serialization, made at enqueue (where a value that cannot be stored is refused). */
  readonly body: Buffer;
  readonly handle: PgHandle;
  readonly failure: UnknownSchedulerError | undefined;
}

/**
 * Retry delays of an end (ack, nack, fail, remove) that the database did not answer: from the first to the last,
 * doubling. The last is the most an end waits after the database's return; each try is bounded by the lease's end.
 */
const END_RETRY_FIRST_MS = 50;
const END_RETRY_LAST_MS = 500;
/** Most rows one fetch asks for. */
const MAX_FETCH = 256;
/** Most evaluations one admitting transaction carries. */
const MAX_ENQUEUE_BATCH = 2_000;
/**
 * Longest a fetch waits for the acks in flight. An ack batch lands in a few ms even under load; one that takes
 * longer is waiting on something (a row lock a long transaction holds), and the dequeues waiting here must not
 * wait with it.
 */
const MAX_ACK_WAIT_MS = 50;
/**
 * Longest an ack waits for company while the threads are busy (see `RoundTripPacer`), and at most a tenth of the
 * nack timeout: it holds the job's slot and the caller's outcome meanwhile, and must land well inside its lease.
 */
const MAX_ACK_LINGER_MS = 20;
/** How often a fetch that waits for company looks again without being kicked, ms. */
const PACE_RECHECK_MS = 10;
/**
 * How long a process with waiting dequeues leaves an enqueue's notification to the process it names before looking
 * itself, ms: the named one takes it in about a round trip, and if it died meanwhile, this is the delay.
 */
const NAMED_NOTIFY_LEAD_MS = 50;

/** The longest id, job id, namespace or type, in UTF-8 bytes: the keys' rule (`storable-key.ts`) of both backends. */
export { MAX_KEY_BYTES };

/**
 * A token as a statement can carry it. Tokens are the broker's own UUIDs; one that `text` cannot hold (a NUL, a lone
 * surrogate) matches no delivery, so it is sent as a token that matches none either, and the database answers with
 * the refusal the in-memory broker gives (mismatch, or not outstanding), rather than with a driver error.
 */
function sqlToken(token: string): string {
  return token.includes('\u0000') || !token.isWellFormed() ? NO_SUCH_TOKEN : token;
}
/** Never a delivery's token (those are UUIDs), and not empty (which `remove` reads as "no token"). */
const NO_SUCH_TOKEN = '-';

function withCause<E extends Error>(error: E, cause: unknown): E {
  if (cause !== undefined) Object.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true, enumerable: false });
  return error;
}

/** A refusal code from the schema's functions as the error the in-memory broker throws for it. */
export function refusalError(status: string, id: string, token: unknown): Error {
  switch (status) {
    case 'timed_out':
    case 'expired':
      return new NackTimeoutReachedError(id);
    case 'mismatch':
      return new TokenMismatchError(id, token);
    default:
      return new EvalNotOutstandingError(id);
  }
}

export class PgBroker implements BrokerBackend {
  readonly #db: Database;
  readonly #names: SchemaNames;
  /** The statements it sends, built for its schema. */
  readonly #q: BrokerQueries;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #listener: Listener;
  readonly #pollMs: number;
  readonly #nodeId: string;
  /** The channel offers to this process come on. */
  readonly #offerChannel: string;
  readonly #lease: LeaseSettings;
  readonly #knownTypes: ReadonlySet<string>;
  readonly #validatePayload: (payload: unknown) => void;
  /** Breaks ties between types of equal priority (the broker's `random` option). */
  readonly #random: () => number;
  readonly #events: TypedEmitter<BrokerEvents>;
  readonly #leases: Leases;
  readonly #outcomes: OutcomeWatch;
  readonly #pacer: RoundTripPacer;

  #enabled = true;
  #paused = false;
  #open = false;
  #closed = false;

  #enqueueBatch: PendingEnqueue[] = [];
  #enqueueScheduled = false;
  #enqueueRunning: Promise<void> | undefined;

  readonly #waiters: Waiter[] = [];
  #ackBatch: PendingAck[] = [];
  #acking = false;
  /** A flush of the ack batch is due in this turn's microtasks: acks asked for meanwhile go with it. */
  #ackFlushSoon = false;
  /** Armed while the ack batch waits for company: when it fires, the batch goes whatever it holds. */
  #ackLinger: TimerHandle | undefined;
  /** When `#ackLinger` fires. */
  #ackLingerAt = Number.POSITIVE_INFINITY;
  /** Armed while a fetch waits for company (`#fetchCanWait`): when it fires, the fetch looks again. */
  #paceTimer: TimerHandle | undefined;
  /** How many acks the statement in flight carries that a fetch may still wait for (0 when none, or past the bound). */
  #acksInFlight = 0;
  /** A kick is due at the next check phase (`#acksLanded`): kicks before it are folded into it. */
  #kickSoon = false;
  /** Armed while a fetch waits for the acks in flight; when it fires, fetches stop waiting for them. */
  #ackWait: TimerHandle | undefined;
  #fetching = false;
  #fetchAgain = false;
  #pollTimer: TimerHandle | undefined;
  /** Armed while a notification named another process (`NAMED_NOTIFY_LEAD_MS`): when it fires, this one looks too. */
  #lookTimer: TimerHandle | undefined;
  /**
   * Counts what may have made an evaluation ready for this process: ready notifications, reconnects, polls, and its
   * own admissions, nacks, promotions and give-backs (see `#lookAgain`).
   */
  #heard = 0;
  /** `#heard` when the last fetch for `#quietKey` began, if it found less than it asked for and stood as waiting. */
  #quietAt: number | undefined;
  #quietKey: string | undefined;
  /** The listener connected once already: a connect after that is a reconnect. */
  #listenedBefore = false;
  /** What a look for unheard leases must not take (`#lookForUnheard`). */
  readonly #unheard = new UnheardLeases();
  /** A poll came: the next round of fetches first looks for leases of this process it never heard of. */
  #lookDue = false;
  /** Settles when the look in flight is answered; fetches wait for it (see `UnheardLeases`). */
  #looking: Promise<void> | undefined;
  /** Fetches whose answer has not come. */
  #fetchesOut = 0;
  /** Told of each delivery handed over (the backend makes the replica catch up to its modifyIndex). */
  onDelivery: ((evaluation: Evaluation) => void) | undefined = undefined;
  /** Deliveries being handed over or given back: `close()` waits for them. */
  readonly #inFlight = new Set<Promise<unknown>>();

  constructor(options: PgBrokerOptions) {
    this.#db = options.db;
    this.#names = options.names;
    this.#q = brokerQueries(options.names.S);
    this.#clock = options.clock;
    this.#logger = options.logger;
    this.#listener = options.listener;
    this.#pollMs = options.pollMs;
    this.#nodeId = options.nodeId;
    this.#offerChannel = options.names.processChannel('offer', options.nodeId);
    const s = options.settings;
    this.#lease = {
      nackTimeoutMs: s.nackTimeoutMs ?? 60_000,
      deliveryLimit: s.deliveryLimit ?? 3,
      initialNackDelayMs: s.initialNackDelayMs ?? 1_000,
      subsequentNackDelayMs: s.subsequentNackDelayMs ?? 20_000,
    };
    this.#knownTypes = new Set(s.knownTypes);
    this.#random = typeof s.random === 'function' ? s.random : Math.random;
    this.#validatePayload = payloadValidator(s.maxPayloadBytes);
    this.#events = new TypedEmitter<BrokerEvents>(() => this.#logger);
    this.#outcomes = new OutcomeWatch(this.#db, this.#names, this.#clock, this.#logger, this.#pollMs);
    this.#pacer = new RoundTripPacer(this.#clock);
    this.#leases = new Leases(this.#db, this.#names, this.#clock, this.#logger, this.#lease.nackTimeoutMs, {
      expire: (held) => this.#expire(held),
      lost: (held) => this.#lost(held),
      extended: (held) => {
        if (this.#events.hasListeners('broker:extend')) {
          this.#events.emit('broker:extend', { evaluation: held.evaluation, token: held.token, deadline: held.leaseEnd });
        }
      },
    });
  }

  get events(): TypedEmitter<BrokerEvents> {
    return this.#events;
  }

  get enabled(): boolean {
    return this.#enabled;
  }

  get paused(): boolean {
    return this.#paused;
  }

  /** The lease settings this process applies (nack timeout, delivery limit, nack delays). */
  get leaseSettings(): LeaseSettings {
    return this.#lease;
  }

  /** This backend instance's id (the `holder` of its deliveries, the `origin` of its enqueues). */
  get nodeId(): string {
    return this.#nodeId;
  }

  /** Deliveries this process holds. */
  get held(): number {
    return this.#leases.size;
  }

  /** Subscribes to the notifications it needs; called by the backend before the listener connects. */
  subscribe(): void {
    this.#listener.subscribe(this.#names.channels.ready, { onNotify: (payload) => this.#onReady(payload), onConnect: () => this.#lookAgain() });
    // Offers come on a channel of this process's own: no other process wakes for them.
    this.#listener.subscribe(this.#offerChannel, {
      onNotify: (payload) => {
        const offer = offerIn(payload);
        if (offer === undefined || offer.holder !== this.#nodeId) this.#logger.warn({ payload: payload.slice(0, 200) }, 'an offer that is not for this process; ignored');
        else this.#takeOffer(offer);
      },
      onConnect: () => {
        // None can be missed before the first connect: offers need a fetch of this process first.
        if (this.#listenedBefore) this.#giveBackMissedOffers();
        this.#listenedBefore = true;
      },
    });
    // Outcomes of evaluations enqueued here come on a channel of this process's own.
    this.#listener.subscribe(this.#names.processChannel('outcome', this.#nodeId), {
      onNotify: (payload) => {
        if (payload === this.#nodeId) this.#outcomes.hint();
        else if (payload.startsWith('{')) {
          const named = outcomesNamed(payload);
          if (named?.origin === this.#nodeId) this.#outcomes.hint(named.ids);
        }
      },
      onConnect: () => this.#outcomes.hint(),
    });
  }

  open(): void {
    this.#open = true;
    this.#flushEnqueuesSoon();
    this.#lookAgain();
  }

  // ───────────────────────────── admission ─────────────────────────────

  enqueue(input: EvaluationInput): EvaluationHandle {
    if (!this.#enabled) throw new BrokerDisabledError('enqueue');
    if (this.#closed) throw new InvalidStateError('Expected an open PostgreSQL broker to enqueue into, but it is closed');
    const evaluation = withEvaluationDefaults(input);
    // Its keys by the rule of both backends (storable-key.ts): nothing the database cannot hold joins a batch.
    assertEvaluation(evaluation, this.#validatePayload);
    const known = this.#outcomes.get(evaluation.id);
    if (known !== undefined && !known.settled) return known;
    let body: Buffer;
    try {
      body = encodeValue(evaluation);
    } catch {
      // Shared memory cannot leave the process: a SharedArrayBuffer is refused by the serializer.
      throw new InvalidEvaluationError('evaluation.payload', 'a value that can be stored in the database (structured-cloneable, no shared memory)', evaluation.payload);
    }
    const handle = new PgHandle(evaluation, (h) => this.#outcomes.watch(h));
    this.#outcomes.track(handle);
    const failure = this.#knownTypes.has(evaluation.type) ? undefined : new UnknownSchedulerError(evaluation.type, [...this.#knownTypes]);
    this.#enqueueBatch.push({ evaluation, body, handle, failure });
    this.#flushEnqueuesSoon();
    return handle;
  }

  #flushEnqueuesSoon(): void {
    if (!this.#open || this.#enqueueScheduled || this.#enqueueRunning !== undefined || this.#enqueueBatch.length === 0) return;
    this.#enqueueScheduled = true;
    // Everything enqueued in this turn goes into one transaction.
    queueMicrotask(() => {
      this.#enqueueScheduled = false;
      this.#enqueueRunning = this.#runEnqueues().finally(() => {
        this.#enqueueRunning = undefined;
        this.#flushEnqueuesSoon();
      });
    });
  }

  async #runEnqueues(): Promise<void> {
    while (this.#enqueueBatch.length > 0) {
      const batch = this.#enqueueBatch.splice(0, MAX_ENQUEUE_BATCH);
      await this.#admit(batch);
    }
  }

  async #admit(batch: PendingEnqueue[]): Promise<void> {
    const e = batch.map((p) => p.evaluation);
    let rows: { id: string; admitted: 'new' | 'held'; state: string; due_in_ms: number | null }[];
    try {
      rows = await this.#db.query(
        this.#q.enqueue,
        [
          e.map((x) => x.id),
          e.map((x) => x.namespace ?? DEFAULT_NAMESPACE),
          e.map((x) => x.jobId),
          e.map((x) => x.type),
          e.map((x) => x.priority),
          e.map((x) => x.modifyIndex ?? 0),
          e.map((x) => x.createIndex ?? 0),
          e.map((x) => x.wait ?? null),
          // A time in the past is due now in either backend: the epoch stands for all of them (a timestamp cannot
          // hold the earliest times a Date can).
          e.map((x) => (x.waitUntil === undefined ? null : Math.max(0, x.waitUntil))),
          batch.map((p) => p.body),
          batch.map((p) => (p.failure === undefined ? null : JSON.stringify(encodeError(p.failure)))),
          this.#nodeId,
        ],
        'an enqueue',
      );
    } catch (error) {
      if (batch.length > 1 && refusedInput(error)) {
        // The statement refused something the batch carried (it changed nothing): each half goes on its own, down
        // to the evaluation that causes it, which alone is refused.
        const half = Math.ceil(batch.length / 2);
        await this.#admit(batch.slice(0, half));
        await this.#admit(batch.slice(half));
        return;
      }
      // An ambiguous failure (the COMMIT broke) may have admitted them: enqueueing the same ids again is safe.
      this.#logger.warn({ err: error, evaluations: batch.length }, 'enqueue failed');
      for (const p of batch) p.handle.refused(error as Error);
      return;
    }
    const now = this.#clock.now();
    let ready = false;
    // Rows come back by id (the lock-free admissions first): each id's rows in batch order.
    const byId = new Map<string, (typeof rows)[number][]>();
    for (const row of rows) {
      const list = byId.get(row.id);
      if (list === undefined) byId.set(row.id, [row]);
      else list.push(row);
    }
    for (const p of batch) {
      const row = byId.get(p.evaluation.id)?.shift();
      p.handle.admitted();
      if (row === undefined || row.admitted !== 'new') continue;
      if (row.state === 'ready') ready = true;
      if (this.#events.hasListeners('broker:enqueue')) {
        this.#events.emit('broker:enqueue', {
          evaluation: p.evaluation,
          delayedUntil: row.due_in_ms === null ? undefined : now + Number(row.due_in_ms),
        });
      }
      if (p.failure !== undefined) {
        p.handle.rejected(p.failure);
        if (this.#events.hasListeners('broker:failed')) this.#events.emit('broker:failed', { evaluation: p.evaluation, reason: p.failure });
      }
    }
    if (ready) this.#lookAgain();
  }

  // ───────────────────────────── dequeue ─────────────────────────────

  /** Never does I/O: a delivery exists here only for a dequeue that waits, so there is none to hand out now. */
  tryDequeue(types: readonly string[]): Delivery | undefined {
    assertKeyTypes(types);
    if (!this.#enabled) throw new BrokerDisabledError('tryDequeue');
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
    const rest = max > 1 ? await this.#fetch([...new Set(types)], max - 1) : [];
    return [first, ...rest.map((h) => this.#handOver(h))];
  }

  dequeueWith(types: readonly string[], timeoutMs: number, signal: AbortSignal | undefined, callback: DequeueCallback): void {
    assertCallback(callback);
    try {
      assertKeyTypes(types);
      assertWait(timeoutMs, signal);
    } catch (error) {
      return this.#answer(callback, error as Error, undefined);
    }
    if (!this.#enabled || this.#closed) return this.#answer(callback, new BrokerDisabledError('dequeue'), undefined);
    if (signal?.aborted === true) return this.#answer(callback, new AbortedError('dequeue'), undefined);
    const unique = [...new Set(types)];
    const waiter: Waiter = { types: unique, key: unique.join('\u0000'), callback, timer: undefined, signal, onAbort: undefined, answered: false };
    if (timeoutMs > 0) {
      waiter.timer = this.#clock.setTimer(() => this.#settleWaiter(waiter, undefined, undefined), timeoutMs);
    }
    if (signal !== undefined) {
      waiter.onAbort = () => this.#settleWaiter(waiter, new AbortedError('dequeue'), undefined);
      signal.addEventListener('abort', waiter.onAbort, { once: true });
    }
    this.#waiters.push(waiter);
    this.kick();
  }

  #answer(callback: DequeueCallback, error: Error | undefined, delivery: Delivery | undefined): void {
    try {
      callback(error, delivery);
    } catch (thrown) {
      this.#logger.error({ err: thrown, evalId: delivery?.evaluation.id }, 'dequeue callback threw');
    }
  }

  #settleWaiter(waiter: Waiter, error: Error | undefined, delivery: Delivery | undefined): void {
    if (waiter.answered) return;
    waiter.answered = true;
    const at = this.#waiters.indexOf(waiter);
    if (at >= 0) this.#waiters.splice(at, 1);
    if (waiter.timer !== undefined) this.#clock.clearTimer(waiter.timer);
    if (waiter.onAbort !== undefined) waiter.signal?.removeEventListener('abort', waiter.onAbort);
    this.#answer(waiter.callback, error, delivery);
  }

  /** Something may be ready (a notification, an enqueue, a promotion, a poll): fetch for the waiting dequeues. */
  kick(): void {
    if (!this.#open || this.#closed || this.#kickSoon) return;
    if (this.#fetching) {
      this.#fetchAgain = true;
      return;
    }
    if (this.#waiters.length === 0 || this.#paused || !this.#enabled) return;
    if (this.#waiters.every((w) => this.#quiet(w.key))) return;
    if (this.#worthWaitingForAcks() || this.#fetchCanWait()) return;
    void this.#serveWaiters();
  }

  /** Something may have become ready for this process: its next fetch goes, whatever the last one found. */
  #lookAgain(): void {
    this.#heard++;
    this.kick();
  }

  /**
   * Whether a fetch for `key` would find nothing: the last one found less than it asked for and stood as waiting, and
   * since it began nothing was heard that could have made an evaluation ready here. Every way an evaluation becomes
   * ready notifies (an idle enqueue names or offers to a standing process, everything else goes to everyone), so at
   * idle the dequeue after each finished evaluation costs no fetch. Not while the listener is away:
   * notifications are hints, and the poll (`#armPoll`) stays the backstop either way.
   */
  #quiet(key: string): boolean {
    return this.#quietAt === this.#heard && this.#quietKey === key && this.#listener.connected;
  }

  /**
   * A `ready` notification: empty for everyone, or naming the one process an idle enqueue chose among those waiting
   * for its type (`waiting_dequeues`). The named process looks at once, or passes it on to everyone when it no longer
   * waits or its threads have work ahead; any other process with waiting dequeues looks after
   * `NAMED_NOTIFY_LEAD_MS`, in case the named one died.
   */
  #onReady(payload: string): void {
    if (payload === '') {
      this.#lookAgain();
    } else if (payload === this.#nodeId) {
      if (this.#canStartNow()) this.#lookAgain();
      else this.#passOn();
    } else if (this.#waiters.length > 0 && this.#lookTimer === undefined && !this.#closed) {
      this.#lookTimer = this.#clock.setTimer(() => {
        this.#lookTimer = undefined;
        this.#lookAgain();
      }, NAMED_NOTIFY_LEAD_MS, { unref: true });
    }
  }

  /**
   * Whether a dequeue waits here that a thread could start now. Threads with work ahead would make the fetch wait
   * (`#fetchCanWait`), threads none of which is free soon would not fetch: a process that can start it now gets it
   * instead.
   */
  #canStartNow(): boolean {
    return this.#waiters.length > 0 && !this.#paused && this.#enabled && !this.#closed && !this.#pacer.threadsBusy() && this.#pacer.threadFreeSoon();
  }

  /**
   * The delivery an offer carries goes to a dequeue waiting for its type, as a fetched one would. Its lease began in
   * the enqueue's transaction, a notification's transit before it is heard: its end here counts from the hearing,
   * which the extension's margin (at least 20 ms before that end) covers. A process that cannot start it now gives
   * it back uncharged and passes the notification on.
   */
  #takeOffer(offer: Offer): void {
    // Taken already by a poll's look (its notification came late), or a second copy: nothing to do.
    if (this.#leases.byToken(offer.token) !== undefined || !this.#unheard.heard(offer.token)) return;
    const waiter = this.#canStartNow() ? this.#waiters.find((w) => w.types.includes(offer.queue)) : undefined;
    if (waiter === undefined) {
      this.#declineOffer(offer);
      return;
    }
    let evaluation: Evaluation;
    try {
      evaluation = decodeValue(Buffer.from(offer.body, 'base64')) as Evaluation;
    } catch (error) {
      this.#logger.warn({ err: error, evalId: offer.id }, 'an offer whose body does not decode; given back');
      this.#declineOffer(offer);
      return;
    }
    const held = new Held(offer.id, offer.token, evaluation, offer.queue, 1, this.#clock.now() + this.#lease.nackTimeoutMs);
    this.#leases.add(held);
    this.#settleWaiter(waiter, undefined, this.#handOver(held));
  }

  /**
   * After a reconnect of the listener: offers sent while it was away were leased to this process and never heard, so
   * they would wait out their leases. Every delivery of this holder whose token it does not hold goes back, uncharged.
   * (An offer heard between the reconnect and this statement's snapshot can go back too; its lease is then lost here
   * at its first extension, as any lease taken over elsewhere is.)
   */
  #giveBackMissedOffers(): Promise<unknown> {
    return this.#track(
      // After a look in flight: what it takes is held by then, and stays.
      Promise.resolve(this.#looking)
        .then(() => this.#db.query(
          this.#q.giveBackMissed,
          [this.#nodeId, this.#leases.all().map((h) => h.token), this.#names.channels.ready],
          'a give-back of missed offers',
        ))
        .catch((error: unknown) => this.#logger.warn({ err: error }, 'giving back missed offers failed; their leases will end instead')),
    );
  }

  /** An offer this process cannot start now: back to ready, uncharged, and everyone told; it stops standing. */
  #declineOffer(offer: Offer): void {
    this.#quietAt = undefined;
    this.#track(
      this.#giveBackInSql([offer], true).catch((error: unknown) =>
        this.#logger.warn({ err: error, evalId: offer.id }, 'giving an offer back failed; its lease will end instead'),
      ),
    );
  }

  /**
   * This process was named but cannot start it now: the notification goes to everyone instead, and the process stops
   * standing as waiting, so that the enqueues after it name a process that can (it stands again at its next fetch
   * that finds too little with a thread free).
   */
  #passOn(): void {
    this.#quietAt = undefined;
    // Also while closing: a process that is leaving must not swallow what was meant for a waiting one.
    this.#track(
      this.#db
        .query(
          this.#q.passOn,
          [this.#names.channels.ready, this.#nodeId],
          'a ready notification',
        )
        .catch((error: unknown) => this.#logger.warn({ err: error }, 'passing a ready notification on failed; the others look after their delay')),
    );
  }

  paceBy(workAheadMs: () => number, threadsFree?: (withinMs: number) => number): void {
    if (typeof workAheadMs !== 'function') throw new InvalidArgumentError('workAheadMs', 'a function', workAheadMs);
    if (threadsFree !== undefined && typeof threadsFree !== 'function') throw new InvalidArgumentError('threadsFree', 'a function or undefined', threadsFree);
    this.#pacer.workAheadMs = workAheadMs;
    this.#pacer.threadsFree = threadsFree;
  }

  /**
   * While more deliveries are held here than dequeues wait, and the threads have work ahead of them, a fetch waits
   * for more dequeues to come (each finished evaluation brings one and kicks again; `PACE_RECHECK_MS` is the
   * backstop), so CPU-bound work is leased dozens at a time rather than one per evaluation finished.
   */
  #fetchCanWait(): boolean {
    if (this.#waiters.length >= this.#leases.size || !this.#pacer.threadsBusy()) return false;
    this.#recheckPaceSoon();
    return true;
  }

  /** A fetch that pacing held back is looked at again after `PACE_RECHECK_MS` at the latest. */
  #recheckPaceSoon(): void {
    this.#paceTimer ??= this.#clock.setTimer(() => {
      this.#paceTimer = undefined;
      this.kick();
    }, PACE_RECHECK_MS, { unref: true });
  }

  /**
   * Under load, a fetch started while an ack batch is out takes only the few workers already back, and the ones
   * that batch frees wait for the next fetch: fetches and acks settle into small batches, each a statement and a
   * commit. When the acks in flight would free more workers than wait now, the fetch waits for them to land and
   * then serves both at once (`#acksLanded` kicks it). With little in flight, as when idle, it never waits.
   * The wait lasts one ack statement, at most `MAX_ACK_WAIT_MS`, and it cannot go on: acks come only from work that
   * was delivered.
   */
  #worthWaitingForAcks(): boolean {
    if (this.#acksInFlight <= this.#waiters.length) return false;
    this.#ackWait ??= this.#clock.setTimer(() => {
      this.#ackWait = undefined;
      this.#acksInFlight = 0;
      this.kick();
    }, MAX_ACK_WAIT_MS, { unref: true });
    return true;
  }

  /**
   * An ack statement answered, before its acks are settled. The workers they free ask for their next evaluation
   * in this turn's promise jobs, so one fetch after those (kicks meanwhile are folded into it) serves them all,
   * with whatever waited for these acks to land.
   */
  #acksLanded(): void {
    this.#acksInFlight = 0;
    if (this.#ackWait !== undefined) {
      this.#clock.clearTimer(this.#ackWait);
      this.#ackWait = undefined;
    }
    if (this.#kickSoon) return;
    this.#kickSoon = true;
    setImmediate(() => {
      this.#kickSoon = false;
      this.kick();
    });
  }

  async #serveWaiters(): Promise<void> {
    this.#fetching = true;
    try {
      do {
        this.#fetchAgain = false;
        if (this.#lookDue && this.#fetchesOut === 0) {
          this.#lookDue = false;
          await this.#lookForUnheard();
        }
        // One fetch per distinct set of types, for as many dequeues as wait on it, in arrival order.
        const keys = [...new Set(this.#waiters.map((w) => w.key))];
        for (const key of keys) {
          while (!this.#paused && this.#enabled && !this.#closed) {
            const waiting = this.#waiters.filter((w) => w.key === key);
            if (waiting.length === 0 || this.#quiet(key)) break;
            // Only for threads free soon; meanwhile the dequeue a finished evaluation brings, or the recheck, looks again.
            if (!this.#pacer.threadFreeSoon()) {
              this.#recheckPaceSoon();
              break;
            }
            const heardAt = this.#heard;
            const asked = Math.min(MAX_FETCH, waiting.length);
            const stands = !this.#pacer.threadsBusy();
            const rows = await this.#fetch(waiting[0]!.types, asked, stands);
            if (rows.length < asked && stands) {
              this.#quietAt = heardAt;
              this.#quietKey = key;
            } else {
              this.#quietAt = undefined;
            }
            for (const row of rows) {
              const waiter = this.#waiters.find((w) => w.key === key);
              if (waiter === undefined || this.#paused || !this.#enabled) {
                // Its dequeue went away while the fetch was out: back, uncharged, not left to its lease.
                this.#giveBack(row);
                continue;
              }
              this.#settleWaiter(waiter, undefined, this.#handOver(row));
            }
            if (rows.length < waiting.length) break;
          }
        }
      } while (this.#fetchAgain && !this.#closed && !this.#worthWaitingForAcks() && !this.#fetchCanWait());
    } catch (error) {
      this.#logger.warn({ err: error }, 'dequeue fetch failed; retrying at the next poll');
    } finally {
      this.#fetching = false;
      this.#armPoll();
    }
  }

  /** Polls while dequeues wait and nothing was found: notifications are hints, this is the backstop. */
  #armPoll(): void {
    if (this.#pollTimer !== undefined || this.#closed || this.#waiters.length === 0) return;
    this.#pollTimer = this.#clock.setTimer(() => {
      this.#pollTimer = undefined;
      this.#lookDue = true;
      this.#lookAgain();
      this.#armPoll();
    }, this.#pollMs, { unref: true });
  }

  /**
   * Leases up to `max` of the best ready evaluations across `types`. Finding fewer than asked for, a fetch that
   * `stands` records this process as waiting for these types (see `waiting_dequeues`).
   */
  async #fetch(types: readonly string[], max: number, stands = !this.#pacer.threadsBusy()): Promise<Held[]> {
    while (this.#looking !== undefined) await this.#looking;
    this.#fetchesOut++;
    try {
      return await this.#fetchRows(types, max, stands);
    } finally {
      this.#fetchesOut--;
    }
  }

  async #fetchRows(types: readonly string[], max: number, stands: boolean): Promise<Held[]> {
    const sentAt = this.#pacer.start();
    const rows = await this.#db.query<{ id: string; body: Buffer; queue: string; deliveries: number; token: string; priority: number; create_index: string; seq: string }>(
      this.#q.leaseReady,
      // Finding fewer than asked for records this process as waiting for these types until its next polls, unless
      // its threads have work ahead: an enqueue should name (or offer to) a process that can start the evaluation now.
      [types, max, this.#lease.nackTimeoutMs, this.#nodeId, stands ? 2 * this.#pollMs : 0, this.#offerChannel],
      'a dequeue',
    );
    this.#pacer.answered(sentAt);
    // Best first: priority, then the turn within its type (FIFO), ties between types at random.
    const turn = new Map<string, number>();
    const tie = new Map<string, number>();
    const ranked = rows
      .sort((a, b) => a.queue.localeCompare(b.queue) || b.priority - a.priority || Number(a.create_index) - Number(b.create_index) || Number(a.seq) - Number(b.seq))
      .map((row) => {
        const rank = (turn.get(row.queue) ?? 0) + 1;
        turn.set(row.queue, rank);
        if (!tie.has(row.queue)) tie.set(row.queue, this.#random());
        return { row, rank };
      })
      .sort((a, b) => b.row.priority - a.row.priority || a.rank - b.rank || tie.get(a.row.queue)! - tie.get(b.row.queue)!);
    const held: Held[] = [];
    for (const { row } of ranked) {
      const evaluation = decodeValue(row.body) as Evaluation;
      const h = new Held(row.id, row.token, evaluation, row.queue, row.deliveries, sentAt + this.#lease.nackTimeoutMs);
      this.#leases.add(h);
      held.push(h);
    }
    return held;
  }

  #handOver(held: Held): Delivery {
    const delivery: Delivery = { evaluation: held.evaluation, token: held.token };
    this.onDelivery?.(held.evaluation);
    if (this.#events.hasListeners('broker:dequeue')) {
      this.#events.emit('broker:dequeue', { evaluation: held.evaluation, token: held.token, queue: held.queue, deliveries: held.deliveries });
    }
    return delivery;
  }

  #giveBack(held: Held): void {
    this.#leases.delete(held);
    this.#track(
      this.#giveBackInSql([held]).catch((error: unknown) => this.#logger.warn({ err: error, evalId: held.id }, 'give-back failed; its lease will end instead')),
    );
  }

  /**
   * Gives `deliveries` back, uncharged, and tells everyone when any went back (a quiet process fetches only once it
   * hears of something); with `unstand`, this process also stops standing as waiting, in the same statement.
   */
  #giveBackInSql(deliveries: readonly { readonly id: string; readonly token: string }[], unstand = false): Promise<unknown> {
    const tokens = deliveries.map((d) => d.token);
    this.#unheard.givingBack(tokens);
    return this.#db.query(
      unstand ? this.#q.giveBackAndUnstand : this.#q.giveBack,
      [deliveries.map((d) => d.id), tokens, this.#names.channels.ready, ...(unstand ? [this.#nodeId] : [])],
      'a give-back',
    ).finally(() => this.#unheard.gaveBack(tokens));
  }

  /**
   * A poll's look for deliveries the database shows as leased to this process that it never heard of (see
   * `UnheardLeases`): each is taken as it is (token, lease and delivery count unchanged), for a dequeue waiting for
   * its type, or given back uncharged when none can start it now.
   */
  async #lookForUnheard(): Promise<void> {
    const exclude = this.#unheard.begin(this.#leases.all().map((h) => h.token));
    const sentAt = this.#clock.now();
    const look = this.#db.query<{ id: string; body: Buffer; queue: string; deliveries: number; token: string; left_ms: number }>(
      this.#q.unheardLeases,
      [this.#nodeId, exclude],
      'a look for unheard deliveries',
    );
    this.#looking = look.then(
      () => undefined,
      () => undefined,
    );
    let rows: Awaited<typeof look>;
    try {
      rows = await look;
    } catch (error) {
      this.#logger.debug({ err: error }, 'look for unheard deliveries failed; again at the next poll');
      rows = [];
    } finally {
      this.#looking = undefined;
    }
    const fresh = this.#unheard.end((token) => this.#leases.byToken(token) !== undefined);
    for (const row of rows) {
      if (!fresh(row.token)) continue;
      let evaluation: Evaluation;
      try {
        evaluation = decodeValue(row.body) as Evaluation;
      } catch (error) {
        this.#logger.warn({ err: error, evalId: row.id }, 'an unheard delivery whose body does not decode; its lease will end');
        continue;
      }
      const held = new Held(row.id, row.token, evaluation, row.queue, row.deliveries, sentAt + Number(row.left_ms));
      this.#leases.add(held);
      this.#logger.info({ evalId: row.id }, 'took a delivery leased to this process whose notification or answer never came');
      const waiter = this.#canStartNow() ? this.#waiters.find((w) => w.types.includes(row.queue)) : undefined;
      if (waiter !== undefined) this.#settleWaiter(waiter, undefined, this.#handOver(held));
      else this.#giveBack(held);
    }
  }

  /** Resolves once what this process started in the background (timed-out nacks, give-backs, fetches) is done. */
  async idle(): Promise<void> {
    while (this.#inFlight.size > 0 || this.#fetching || this.#acking || this.#ackBatch.length > 0 || this.#enqueueRunning !== undefined) {
      // Acks waiting for company go now: nothing is left to a timer.
      if (!this.#acking && this.#ackBatch.length > 0) void this.#flushAcks(false);
      await Promise.allSettled([...this.#inFlight, this.#enqueueRunning]);
      if (this.#fetching || this.#acking) await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  #track<T>(promise: Promise<T>): Promise<T> {
    this.#inFlight.add(promise);
    void promise.finally(() => this.#inFlight.delete(promise));
    return promise;
  }

  // ───────────────────────────── settlement ─────────────────────────────

  ack(id: string, token: string, result?: AckResult): Promise<void> {
    assertId('id', id);
    assertToken(token);
    assertAckResult(result);
    const held = this.#leases.byToken(token);
    if (held === undefined || held.id !== id) {
      if (!isStorableKey(id)) return Promise.reject(new EvalNotOutstandingError(id));
      return this.#ack(id, sqlToken(token), result);
    }
    // Refused here, alone, if it cannot be stored: never inside the statement that carries the other acks.
    const body = encodeStorable(result?.value, 'result.value', InvalidArgumentError);
    // A delivery held here: its job is known, so it can go with the other acks of this turn in one call.
    const batched = new Promise<void>((resolve, reject) => {
      // It waits at most MAX_ACK_LINGER_MS (a tenth of the nack timeout when that is shorter), and never into the
      // last stretch of its lease, where a late statement would find the lease over.
      const now = this.#clock.now();
      const linger = Math.min(MAX_ACK_LINGER_MS, this.#lease.nackTimeoutMs / 10);
      const due = Math.min(now + linger, held.leaseEnd - linger);
      this.#ackBatch.push({ held, result, body, resolve, reject, due });
      this.#flushAcksSoon();
    });
    // A try again re-reads first: the batch's statement may have landed with its answer lost.
    return this.#ending(held, batched, () => this.#ack(id, token, result, new BackendUnavailableError('the ack before this one was not answered')));
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
    if (this.#closed || this.#ackBatch.length >= MAX_FETCH) return false;
    const now = this.#clock.now();
    let due = Number.POSITIVE_INFINITY;
    for (const a of this.#ackBatch) if (a.due < due) due = a.due;
    if (now >= due || !this.#pacer.threadsBusy()) return false;
    if (this.#ackLinger !== undefined && this.#ackLingerAt <= due) return true;
    if (this.#ackLinger !== undefined) this.#clock.clearTimer(this.#ackLinger);
    this.#ackLingerAt = due;
    this.#ackLinger = this.#clock.setTimer(() => {
      this.#ackLinger = undefined;
      this.#ackLingerAt = Number.POSITIVE_INFINITY;
      void this.#flushAcks(true);
    }, due - now, { unref: true });
    return true;
  }

  async #ackMany(batch: PendingAck[]): Promise<void> {
    let rows: { id: string | null; status: string | null; deliveries: number | null; promoted: string | null; canceled: string[] | null }[];
    this.#acksInFlight = batch.length;
    const sentAt = this.#pacer.start();
    try {
      rows = await this.#db.query(
        this.#q.ackMany,
        [
          batch.map((a) => a.held.id),
          batch.map((a) => a.held.token),
          batch.map((a) => a.body),
          batch.map((a) => a.result?.index ?? 0),
          batch.map((a) => a.result?.attempts ?? 1),
          batch.map((a) => a.held.evaluation.namespace ?? DEFAULT_NAMESPACE),
          batch.map((a) => a.held.evaluation.jobId),
          this.#nodeId,
        ],
        'an ack',
      );
      this.#pacer.answered(sentAt);
    } catch (error) {
      this.#acksLanded();
      // Unknown whether it landed: each one is resolved by re-reading, never acked twice.
      for (const a of batch) this.#ack(a.held.id, a.held.token, a.result, error).then(a.resolve, a.reject);
      return;
    }
    this.#acksLanded();
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
  async #ack(id: string, token: string, result: AckResult | undefined, failed?: unknown): Promise<void> {
    const value = encodeValue(result?.value);
    const index = result?.index ?? 0;
    const attempts = result?.attempts ?? 1;
    let row: { status: string; deliveries: number | null; promoted: string | null; canceled: string[] | null };
    try {
      if (failed !== undefined) throw failed;
      [row] = (await this.#db.query(this.#q.ack, [id, token, value, index, attempts, this.#nodeId], 'an ack')) as [typeof row];
    } catch (error) {
      // The connection broke with the ack on its way (it may have committed): re-read whether it landed, never ack twice.
      if (!(error instanceof BackendUnavailableError)) throw error;
      const landed = await this.#landed(id, token);
      if (landed === 'acked') row = { status: 'ok', deliveries: null, promoted: null, canceled: null };
      else if (landed === 'unacked') return this.#ack(id, token, result);
      // Neither acked nor current with this token: the delivery is over (its lease ran out and it was redelivered).
      else throw withCause(new EvalNotOutstandingError(id), error);
    }
    if (row.status !== 'ok') throw refusalError(row.status, id, token);
    this.settledAck(id, token, { value: result?.value, index, attempts, deliveries: row.deliveries ?? undefined });
    if (row.promoted !== null) this.settledPromotion(row.promoted, row.canceled);
  }

  /** Whether an ack of (id, token) is in the database ('acked'), still to do ('unacked') or impossible (undefined). */
  async #landed(id: string, token: string): Promise<'acked' | 'unacked' | undefined> {
    const [row] = await this.#db.query<{ state: string; token: string | null }>(
      this.#q.ackCheck,
      [id],
      'an ack check',
    );
    if (row === undefined || row.token !== token) return undefined;
    return row.state === 'acked' ? 'acked' : row.state === 'unacked' ? 'unacked' : undefined;
  }

  /**
   * The local side of an ack that committed (here or in a plan's commit): the lease is over, the handle resolves,
   * the event goes out.
   */
  settledAck(
    id: string,
    token: string,
    outcome: { readonly value: unknown; readonly index: number; readonly attempts: number; readonly deliveries: number | undefined },
  ): void {
    const held = this.#leases.byToken(token);
    if (held !== undefined) this.#leases.delete(held);
    // Unknown (a cut-off commit that landed): the held delivery's own count is the one the database has.
    const deliveries = outcome.deliveries ?? held?.deliveries ?? 0;
    this.#outcomes.settle(id, (h) => h.acked(outcome.value, outcome.index, outcome.attempts, deliveries));
    if (held !== undefined && this.#events.hasListeners('broker:ack')) this.#events.emit('broker:ack', { evaluation: held.evaluation, token });
  }

  /** An ack promoted `promoted` and superseded `canceled` (their handles here reject with `SupersededError`). */
  settledPromotion(promoted: string, canceled: readonly string[] | null): void {
    if (canceled !== null && canceled.length > 0) {
      for (const c of canceled) this.#outcomes.settle(c, (h) => h.rejected(() => new SupersededError(c, promoted)));
      if (this.#events.hasListeners('broker:cancelable')) void this.#emitCancelable(canceled);
    }
    this.#lookAgain();
  }

  async #emitCancelable(ids: readonly string[]): Promise<void> {
    try {
      const rows = await this.#db.query<{ body: Buffer }>(this.#q.bodies, [ids]);
      this.#events.emit('broker:cancelable', { evaluations: rows.map((r) => decodeValue(r.body) as Evaluation) });
    } catch (error) {
      this.#logger.debug({ err: error }, 'could not read the superseded evaluations for broker:cancelable');
    }
  }

  nack(id: string, token: string, reason?: Error): Promise<void> {
    assertId('id', id);
    assertToken(token);
    assertOptionalReason(reason);
    if (!isStorableKey(id)) return Promise.reject(new EvalNotOutstandingError(id));
    const t = sqlToken(token);
    const nack = (): Promise<void> => this.#nack(id, t, reason, false);
    return this.#ending(this.#heldAs(id, t), nack(), nack);
  }

  async #nack(id: string, token: string, reason: Error | undefined, timedOut: boolean): Promise<void> {
    const l = this.#lease;
    const [row] = await this.#db.query<{ status: string; deliveries: number; failed: boolean; delay_ms: number; promoted: string | null }>(
      this.#q.nack,
      [id, token, reason === undefined ? null : JSON.stringify(encodeError(reason)), timedOut, l.deliveryLimit, l.initialNackDelayMs, l.subsequentNackDelayMs, this.#nodeId],
      'a nack',
    );
    const held = this.#leases.byToken(token);
    if (row === undefined || row.status !== 'ok') {
      if (held !== undefined && timedOut) this.#lost(held);
      throw refusalError(row?.status ?? 'not_outstanding', id, token);
    }
    if (held !== undefined) this.#leases.delete(held);
    if (row.failed) {
      const error = withCause(new DeliveryLimitError(id, row.deliveries, l.deliveryLimit), reason);
      this.#outcomes.settle(id, (h) => h.rejected(error));
    }
    if (held !== undefined) {
      if (this.#events.hasListeners('broker:nack')) {
        this.#events.emit('broker:nack', {
          evaluation: held.evaluation,
          token,
          timedOut,
          deliveries: row.deliveries,
          delayMs: Number(row.delay_ms),
          failed: row.failed,
          reason,
        });
      }
      if (row.failed && this.#events.hasListeners('broker:failed')) {
        this.#events.emit('broker:failed', { evaluation: held.evaluation, reason: withCause(new DeliveryLimitError(id, row.deliveries, l.deliveryLimit), reason) });
      }
    }
    if (!row.failed && Number(row.delay_ms) === 0) this.#lookAgain();
    if (row.promoted !== null) this.#lookAgain();
  }

  giveBack(id: string, token: string, reason?: Error): Promise<void> {
    assertId('id', id);
    assertToken(token);
    assertOptionalReason(reason);
    if (!isStorableKey(id)) return Promise.reject(new EvalNotOutstandingError(id));
    const t = sqlToken(token);
    const giveBack = (): Promise<void> => this.#giveBackOne(id, t, reason);
    return this.#ending(this.#heldAs(id, t), giveBack(), giveBack);
  }

  /**
   * `give_back` (uncharged, ready at once) with the reason for a refusal: the row as the statement's snapshot saw it,
   * before the give-back, says why one did not take.
   */
  async #giveBackOne(id: string, token: string, reason: Error | undefined): Promise<void> {
    const [row] = await this.#db.query<{ ok: boolean; refusal: string | null; deliveries: number | null; queue: string | null }>(
      this.#q.giveBackOne,
      [id, token, this.#names.channels.ready],
      'a give-back',
    );
    if (row === undefined || !row.ok) throw refusalError(row?.refusal ?? 'not_outstanding', id, token);
    const held = this.#leases.byToken(token);
    if (held !== undefined) this.#leases.delete(held);
    if (held !== undefined && this.#events.hasListeners('broker:give-back')) {
      const deliveries = (row.deliveries ?? held.deliveries) - (row.queue === FAILED_QUEUE ? 0 : 1);
      this.#events.emit('broker:give-back', { evaluation: held.evaluation, token, deliveries, reason });
    }
    this.#lookAgain();
  }

  fail(id: string, token: string, reason: Error): Promise<void> {
    assertId('id', id);
    assertToken(token);
    assertReason(reason);
    if (!isStorableKey(id)) return Promise.reject(new EvalNotOutstandingError(id));
    const t = sqlToken(token);
    const fail = (): Promise<void> => this.#fail(id, t, reason);
    return this.#ending(this.#heldAs(id, t), fail(), fail);
  }

  async #fail(id: string, token: string, reason: Error): Promise<void> {
    const [row] = await this.#db.query<{ status: string; promoted: string | null }>(
      this.#q.fail,
      [id, token, JSON.stringify(encodeError(reason)), this.#nodeId],
      'a fail',
    );
    if (row === undefined || row.status !== 'ok') throw refusalError(row?.status ?? 'not_outstanding', id, token);
    const held = this.#leases.byToken(token);
    if (held !== undefined) this.#leases.delete(held);
    this.#outcomes.settle(id, (h) => h.rejected(reason));
    if (held !== undefined && this.#events.hasListeners('broker:failed')) this.#events.emit('broker:failed', { evaluation: held.evaluation, reason });
    if (row.promoted !== null) this.#lookAgain();
  }

  remove(id: string, token?: string, cause?: unknown): Promise<boolean> {
    assertId('id', id);
    assertOptionalToken(token);
    // No evaluation has an id that is not a key: there is nothing to remove.
    if (!isStorableKey(id)) return Promise.resolve(false);
    const t = token === undefined ? undefined : sqlToken(token);
    const held = t === undefined ? undefined : this.#heldAs(id, t);
    if (held === undefined) return this.#remove(id, t, cause);
    let removed = false;
    const remove = (): Promise<void> => this.#remove(id, t, cause).then((r) => void (removed = r));
    return this.#ending(held, remove(), remove).then(() => removed);
  }

  async #remove(id: string, token: string | undefined, cause: unknown): Promise<boolean> {
    const [row] = await this.#db.query<{ status: string; prior: EvaluationState | null; promoted: string | null }>(
      this.#q.remove,
      [id, token ?? null, cause === undefined ? null : JSON.stringify(encodeError(cause)), this.#nodeId],
      'a remove',
    );
    if (row === undefined || row.status === 'absent') return false;
    if (row.status !== 'ok') throw refusalError(row.status, id, token);
    const held = token === undefined ? undefined : this.#leases.byToken(token);
    if (held !== undefined) this.#leases.delete(held);
    this.#outcomes.settle(id, (h) => h.rejected(() => new AbortedError(`evaluation ${JSON.stringify(id)}`, { cause })));
    if (this.#events.hasListeners('broker:remove')) {
      const evaluation = held?.evaluation ?? this.#outcomes.get(id)?.evaluation;
      if (evaluation !== undefined) this.#events.emit('broker:remove', { evaluation, state: row.prior ?? 'ready' });
    }
    if (row.promoted !== null) this.#lookAgain();
    return true;
  }

  rejectOutcomes(reason: (evaluation: Evaluation) => Error): void {
    assertOutcomeReason(reason);
    for (const handle of this.#outcomes.unsettled()) handle.abandoned(() => reason(handle.evaluation));
  }

  // ───────────────────────────── leases ─────────────────────────────

  outstanding(id: string): string | undefined | Promise<string | undefined> {
    assertId('id', id);
    const held = this.#leases.byId(id);
    if (held !== undefined) return held.token;
    if (!isStorableKey(id)) return undefined;
    return this.#db
      .query<{ token: string }>(this.#q.outstanding, [id], 'an outstanding look-up')
      .then((rows) => rows[0]?.token);
  }

  /** The delivery (id, token) if this process holds it. */
  #heldAs(id: string, token: string): Held | undefined {
    const held = this.#leases.byToken(token);
    return held !== undefined && held.id === id ? held : undefined;
  }

  /** The held delivery for (id, token), or the refusal the database gives for it. */
  #heldOrRefuse(id: string, token: string): Held | Promise<never> {
    assertId('id', id);
    assertToken(token);
    const held = this.#leases.byToken(token);
    if (held !== undefined && held.id === id) return held;
    if (!isStorableKey(id)) return Promise.reject(new EvalNotOutstandingError(id));
    return this.#refusal(id, sqlToken(token));
  }

  async #refusal(id: string, token: string): Promise<never> {
    const [row] = await this.#db.query<{ refusal: string | null }>(
      this.#q.refusal,
      [id, token],
      'a token check',
    );
    // A current token this process does not hold (a delivery handed out by another process) is still not its own.
    throw refusalError(row?.refusal ?? (row === undefined ? 'not_outstanding' : 'mismatch'), id, token);
  }

  outstandingReset(id: string, token: string): Promise<void> {
    const held = this.#heldOrRefuse(id, token);
    if (held instanceof Promise) return held;
    if (held.paused) return Promise.resolve();
    return this.#leases.extendNow(held).then((extended) => {
      if (!extended) throw new NackTimeoutReachedError(id);
    });
  }

  pauseNackTimeout(id: string, token: string): void | Promise<never> {
    const held = this.#heldOrRefuse(id, token);
    if (held instanceof Promise) return held;
    this.#leases.pause(held);
  }

  resumeNackTimeout(id: string, token: string): void | Promise<never> {
    const held = this.#heldOrRefuse(id, token);
    if (held instanceof Promise) return held;
    this.#leases.resume(held);
  }

  keepLeases(keeper: LeaseKeeper | undefined): void {
    this.#leases.keepLeases(keeper);
  }

  /** The keeper let the lease go and its end came: the nack deadline fired. */
  #expire(held: Held): void {
    const nack = (): Promise<void> => this.#nack(held.id, held.token, new NackTimeoutReachedError(held.id), true);
    this.#track(
      this.#ending(held, nack(), nack).catch((error: unknown) =>
        this.#logger.debug({ err: error, evalId: held.id }, 'timed-out nack refused (the lease was already over)'),
      ),
    );
  }

  /**
   * The end of a delivery this process holds: `first` is its first try, `again` makes another. From here on its
   * lease is never extended (`Held.ending`): nobody works on it. When the database did not answer, the end is tried
   * again in the background (the caller has its rejection at once, and has let the delivery go) until it lands, is
   * refused (it ended otherwise: an earlier try landed, or the lease ran out and was reaped), or the lease's own end
   * comes, after which the reaper ends it. Any other failure ends it here at once, and the lease runs out. So after an
   * outage every delivery ends within a nack timeout of the database's return, and none is kept alive by nobody.
   */
  #ending(held: Held | undefined, first: Promise<void>, again: () => Promise<void>): Promise<void> {
    if (held === undefined || held.ended) return first;
    held.ending = true;
    return first.catch((error: unknown) => {
      this.#endFailed(held, again, error, 1);
      throw error;
    });
  }

  #endFailed(held: Held, again: () => Promise<void>, error: unknown, attempt: number): void {
    if (held.ended) return;
    const left = held.leaseEnd - this.#clock.now();
    if (!(error instanceof BackendUnavailableError) || this.#closed || left <= 0) {
      // Refused (it ended otherwise), or given up on: either way no look may take it again (`UnheardLeases`).
      this.#unheard.abandoned(held.token);
      this.#leases.delete(held);
      return;
    }
    const delay = Math.min(END_RETRY_LAST_MS, END_RETRY_FIRST_MS * 2 ** (attempt - 1), left);
    this.#clock.setTimer(() => {
      if (held.ended || this.#closed) return;
      this.#track(
        again().then(
          () => {
            if (!held.ended) this.#leases.delete(held);
          },
          (retryError: unknown) => this.#endFailed(held, again, retryError, attempt + 1),
        ),
      );
    }, delay, { unref: true });
  }

  /** The database no longer has this process's lease: whoever works on it here must stop. */
  #lost(held: Held): void {
    if (held.ended) return;
    this.#leases.delete(held);
    this.#logger.info({ evalId: held.id }, 'lease lost (it ran out and was taken over)');
    if (this.#events.hasListeners('broker:nack')) {
      this.#events.emit('broker:nack', {
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

  /** The job of a delivery this process holds (the plan committer locks it before acking in its commit). */
  jobOf(id: string, token: string): { namespace: string; jobId: string } | undefined {
    const held = this.#leases.byToken(token);
    if (held === undefined || held.id !== id) return undefined;
    return { namespace: held.evaluation.namespace ?? DEFAULT_NAMESPACE, jobId: held.evaluation.jobId };
  }

  /** Reaped elsewhere or by this process's reaper: a delivery this process held is over. */
  reaped(token: string): void {
    const held = this.#leases.byToken(token);
    if (held !== undefined) this.#lost(held);
  }

  // ───────────────────────────── state ─────────────────────────────

  async stats(): Promise<BrokerStats> {
    // State by state, so that each count reads its state's partial index rather than every row the table keeps.
    const rows = await this.#db.query<{ state: string; queue: string; n: number }>(
      this.#q.stats,
      [],
      'broker stats',
    );
    let totalReady = 0;
    let totalUnacked = 0;
    let totalPending = 0;
    let totalWaiting = 0;
    let totalCancelable = 0;
    let totalFailed = 0;
    const byScheduler: Record<string, { ready: number; unacked: number }> = Object.create(null) as Record<string, { ready: number; unacked: number }>;
    const queue = (name: string): { ready: number; unacked: number } => (byScheduler[name] ??= { ready: 0, unacked: 0 });
    for (const { state, queue: name, n } of rows) {
      switch (state) {
        case 'ready':
          queue(name).ready += n;
          if (name === FAILED_QUEUE) totalFailed += n;
          else totalReady += n;
          break;
        case 'unacked':
          queue(name).unacked += n;
          totalUnacked += n;
          break;
        case 'pending':
          totalPending += n;
          break;
        case 'waiting':
          totalWaiting += n;
          break;
        case 'cancelable':
          totalCancelable += n;
          break;
      }
    }
    return {
      totalReady,
      totalUnacked,
      totalPending,
      totalWaiting,
      totalCancelable,
      totalFailed,
      byScheduler: Object.fromEntries(Object.entries(byScheduler)) as Record<string, SchedulerStats>,
    };
  }

  inspect(id: string): Promise<EvaluationInfo | undefined> {
    assertId('id', id);
    if (!isStorableKey(id)) return Promise.resolve(undefined);
    return this.#inspect(id);
  }

  async #inspect(id: string): Promise<EvaluationInfo | undefined> {
    const [row] = await this.#db.query<{ state: string; queue: string; deliveries: number; holds_slot: boolean }>(
      this.#q.inspect,
      [id],
      'an inspect',
    );
    if (row === undefined) return undefined;
    const failed = row.queue === FAILED_QUEUE;
    const state: EvaluationState = row.state === 'ready' && failed ? 'failed' : (row.state as EvaluationState);
    const inQueue = row.state === 'ready' || row.state === 'unacked';
    return { state, queue: inQueue ? row.queue : undefined, deliveries: row.deliveries, holdsJobSlot: row.holds_slot };
  }

  pause(): void {
    if (this.#paused) return;
    this.#paused = true;
    this.#events.emit('broker:paused', { paused: true });
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.#events.emit('broker:paused', { paused: false });
    this.#lookAgain();
  }

  setEnabled(enabled: boolean): Promise<Evaluation[]> {
    assertEnabled(enabled);
    return this.#setEnabled(enabled);
  }

  async #setEnabled(enabled: boolean): Promise<Evaluation[]> {
    if (enabled === this.#enabled) return [];
    this.#enabled = enabled;
    let given: Evaluation[] = [];
    if (!enabled) {
      for (const waiter of [...this.#waiters]) this.#settleWaiter(waiter, new BrokerDisabledError('dequeue'), undefined);
      given = await this.#giveBackAll();
    } else {
      this.#lookAgain();
    }
    this.#events.emit('broker:enabled', { enabled, flushed: given });
    return given;
  }

  /** Gives back every delivery this process holds, uncharged; answers with their evaluations. */
  async #giveBackAll(): Promise<Evaluation[]> {
    const held = this.#leases.all();
    for (const h of held) this.#leases.delete(h);
    if (held.length === 0) return [];
    await this.#giveBackInSql(held);
    return held.map((h) => h.evaluation);
  }

  /** Stops serving this process: waiting dequeues end, what it holds goes back, admissions in flight finish. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const waiter of [...this.#waiters]) this.#settleWaiter(waiter, new BrokerDisabledError('dequeue'), undefined);
    for (const timer of [this.#pollTimer, this.#ackWait, this.#paceTimer, this.#ackLinger, this.#lookTimer]) if (timer !== undefined) this.#clock.clearTimer(timer);
    this.#pollTimer = undefined;
    this.#lookTimer = undefined;
    this.#ackWait = undefined;
    this.#paceTimer = undefined;
    this.#ackLinger = undefined;
    // Acks waiting for company go now (closed, none waits any more).
    if (this.#ackBatch.length > 0) void this.#flushAcks(false);
    await this.#enqueueRunning;
    for (const p of this.#enqueueBatch.splice(0)) {
      p.handle.refused(new InvalidStateError('Expected the PostgreSQL broker to admit the evaluation, but it closed first'));
    }
    await Promise.allSettled([...this.#inFlight]);
    // Never opened (its engine's start failed before it): it fetched nothing, never stood as waiting and was offered
    // nothing, so there is nothing in the database to give back or withdraw.
    if (this.#open) await this.#leave();
    await Promise.allSettled([...this.#inFlight]);
    this.#leases.close();
    this.#outcomes.close();
  }

  /** Close's part in the database: what this process holds goes back, and it stops standing as waiting. */
  async #leave(): Promise<void> {
    try {
      await this.#giveBackAll();
    } catch (error) {
      this.#logger.warn({ err: error }, 'could not give back the deliveries held at close; their leases will end');
    }
    // No enqueue should name this process any more (a row left behind stands until its time runs out). A fetch
    // still out would stand it again: after that one.
    while (this.#fetching) await new Promise<void>((resolve) => setImmediate(resolve));
    await this.#db
      .query(this.#q.unstand, [this.#nodeId], 'leaving')
      .catch((error: unknown) => this.#logger.warn({ err: error }, 'could not withdraw this process from the waiting dequeues'));
    // The DELETE waited for the enqueues that chose this process: what they offered is leased here, heard or not.
    await this.#giveBackMissedOffers();
  }

  /** A new random id for a backend instance. */
  static newNodeId(): string {
    return randomUUID();
  }
}

/** A delivery an idle enqueue leased to a waiting process, as its notification carries it (an offer). */
interface Offer {
  readonly holder: string;
  readonly id: string;
  readonly token: string;
  readonly queue: string;
  /** The evaluation's encoded body, base64. */
  readonly body: string;
}

/** The offer a ready notification carries, or undefined for one that does not parse as one. */
function offerIn(payload: string): Offer | undefined {
  try {
    const o = JSON.parse(payload) as { offer?: unknown; id?: unknown; token?: unknown; queue?: unknown; body?: unknown };
    if (typeof o.offer !== 'string' || typeof o.id !== 'string' || typeof o.token !== 'string' || typeof o.queue !== 'string' || typeof o.body !== 'string') return undefined;
    return { holder: o.offer, id: o.id, token: o.token, queue: o.queue, body: o.body };
  } catch {
    return undefined;
  }
}

/** An outcome notification that names its evaluations, or undefined for one that does not parse. */
function outcomesNamed(payload: string): { origin: unknown; ids: string[] } | undefined {
  try {
    const parsed = JSON.parse(payload) as { origin?: unknown; ids?: unknown };
    if (!Array.isArray(parsed.ids) || !parsed.ids.every((id) => typeof id === 'string')) return undefined;
    return { origin: parsed.origin, ids: parsed.ids as string[] };
  } catch {
    return undefined;
  }
}
