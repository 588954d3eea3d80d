import type { Clock } from '../clock.js';
import {
  AbortedError,
  BrokerDisabledError,
  DeliveryLimitError,
  EvalNotOutstandingError,
  InvalidArgumentError,
  NackTimeoutReachedError,
  SupersededError,
  TokenMismatchError,
  UnknownSchedulerError,
} from '../errors.js';
import { TypedEmitter } from '../events.js';
import { childLogger, type Logger } from '../observability/logger.js';
import type { Registry } from '../observability/metrics.js';
import {
  assertAckResult,
  assertCallback,
  assertEnabled,
  assertId,
  assertOptionalReason,
  assertOptionalToken,
  assertOutcomeReason,
  assertReason,
  assertToken,
  assertTypes,
  assertWait,
  maxRefusal,
} from './arguments.js';
import { errorView, type BrokerAdmin, type DeliveryRecord, type EvaluationDetail, type EvaluationPage, type EvaluationQuery, type QueueDepths } from './admin-types.js';
import { adminStateOf, checkCap, checkQuery, detailOf, HISTORY_LIMIT, pageOf, parseMemoryCursor, THIS_PROCESS } from './admin-views.js';
import { Entry, EntryState, JobSlot, pendingBefore, ReadyQueue } from './broker-entry.js';
import type { BrokerEvents } from './broker-events.js';
import { brokerMetricsHub, type BrokerGaugeSnapshot, type BrokerMetricsHub } from './broker-metrics.js';
import { resolveEvalBrokerOptions, type EvalBrokerOptions, type ResolvedEvalBrokerOptions } from './broker-options.js';
import { DeadlineQueue, type DeadlineNode } from './deadline-queue.js';
import { assertEvaluation, FAILED_QUEUE, nackDelayMs, withEvaluationDefaults, type Evaluation, type EvaluationInput, type EvaluationState } from './evaluation.js';
import { OutcomeHandle, type AckResult, type EvaluationHandle } from './outcome-waiters.js';
import type { BrokerBackend, DequeueCallback, LeaseKeeper } from '../backend/broker-backend.js';
import { PriorityHeap } from './priority-heap.js';

import type { BrokerStats, Delivery, EvaluationInfo, SchedulerStats } from './broker-types.js';

export type { BrokerStats, Delivery, EvaluationInfo, SchedulerStats } from './broker-types.js';

/**
 * A dequeue waiting for work. Its timeout lives in the broker's waiter deadline queue (one clock timer for all of
 * them), and its signal's abort reaches it through one listener per signal: a timer and a listener per dequeue cost
 * microseconds on the path from enqueue to an idle worker.
 */
class Waiter implements DeadlineNode {
  readonly types: readonly string[];
  readonly callback: DequeueCallback;
  due = 0;
  deadlineIndex = -1;
  deadlineSeq = 0;
  /** The waiters of its signal (see #signalWaiters), when it has one. */
  signalWaiters: Set<Waiter> | undefined = undefined;

  constructor(types: readonly string[], callback: DequeueCallback) {
    this.types = types;
    this.callback = callback;
  }
}

/** Sets `cause` the way the Error constructor does (own, non-enumerable), for errors whose constructor takes none. */
function withCause<E extends Error>(error: E, cause: unknown): E {
  if (cause !== undefined) Object.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true, enumerable: false });
  return error;
}

/** Where an entry the broker holds is, as `inspect` reports it (the admin API's name for it, in `inspect`'s words). */
function stateOf(entry: Entry): EvaluationState {
  const state = adminStateOf(entry);
  return state === undefined ? 'cancelable' : state === 'delayed' ? 'waiting' : state;
}

/** Empty job slots a broker may keep before it sweeps them (see `#vacate`): a few dozen KB when idle. */
const SWEEP_FLOOR = 1024;

/**
 * Brokers made in this process, numbered: a token is `<broker>.<delivery>` in base 36, so no two brokers' tokens
 * collide, and a token stays under 13 characters for the first 10⁸ or so deliveries of the first brokers: V8 makes
 * a shorter concatenation one flat string, while a longer one is a pair of pieces that the first hash of it (the
 * lookups by token) has to copy into one. Tokens fence deliveries; they are not secrets.
 */
let brokerInstances = Math.floor(Math.random() * 36 ** 2);

/**
 * Nomad's evaluation broker on the main thread: at-least-once delivery of evaluations to scheduler workers, with
 * per-type priority queues, per-job serialization, nack deadlines, redelivery with growing delays and a `_failed`
 * dead-letter queue past the delivery limit.
 *
 * Rules (the tests state each one):
 * - Per job key (`namespace` + `jobId`) at most one evaluation is ready or unacked in a scheduler queue; the others
 *   wait as pending. On ack the best pending one is promoted and the rest become cancelable.
 * - Each delivery gets a fresh token and a nack deadline; ack/nack/… must present the current token. A deadline
 *   that passes nacks the delivery, and a late ack then fails with `NackTimeoutReachedError` (the nack wins).
 * - A nack re-enqueues after `nackDelayMs(deliveries)`; at `deliveryLimit` deliveries it goes to `_failed`.
 * - All deadlines and delays share one `DeadlineQueue` with one clock timer.
 *
 * Single-threaded: every method runs to completion, so there are no locks. Listeners of `events`, the lease keeper
 * and `extendNackDeadline` run synchronously inside broker calls. The in-memory `BrokerBackend`: every method
 * answers synchronously.
 */
export class EvalBroker implements BrokerBackend, BrokerAdmin {
  readonly #options: ResolvedEvalBrokerOptions;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #random: () => number;
  readonly #events: TypedEmitter<BrokerEvents>;
  readonly #metrics: BrokerMetricsHub;
  readonly #deadlines: DeadlineQueue<Entry>;

  #enabled = true;
  #paused = false;
  /** Asked before a nack deadline fires (`keepLeases`); `extendNackDeadline` is asked when there is none. */
  #keeper: LeaseKeeper | undefined;

  /** Every evaluation the broker holds, by id (dedupes enqueue). */
  readonly #evals = new Map<string, Entry>();
  readonly #queues = new Map<string, ReadyQueue>();
  /**
   * namespace → jobId → slot. Nested maps avoid building a key string per enqueue. A slot that empties stays in
   * its map until a sweep (see #sweepSlots): V8 keeps a deleted Map entry in its bucket chain until the next
   * rehash, so deleting and re-adding the same few hot job keys on every ack grows those chains until each lookup
   * walks thousands of holes (a tenth of the broker's cycles per second with 20k other jobs in the map).
   */
  readonly #jobs = new Map<string, Map<string, JobSlot>>();
  #jobSlots = 0;
  #emptySlots = 0;
  #cancelable: Entry[] = [];
  readonly #waiters = new Set<Waiter>();
  /** Dequeue timeouts. Ref'd: a caller awaiting a dequeue with a timeout keeps the process alive, as a timer would. */
  readonly #waitDeadlines: DeadlineQueue<Waiter>;
  /** The waiting dequeues of each signal; the signal has one abort listener for all of them, added once. */
  readonly #bySignal = new WeakMap<AbortSignal, Set<Waiter>>();

  #totalReady = 0;
  #totalFailed = 0;
  #totalUnacked = 0;
  #totalPending = 0;
  #totalWaiting = 0;

  #seq = 0;
  /** Tokens: this broker's number plus a delivery counter (see `brokerInstances`). */
  readonly #tokenPrefix: string;
  #tokenCounter = 0;
  /** Set when something became ready since waiters were last served; see #serveWaiters. */
  #readyAdded = false;
  /** Reused for random tie-breaks between queues, so a dequeue allocates nothing for them. */
  readonly #ties: ReadyQueue[] = [];

  constructor(options?: EvalBrokerOptions) {
    this.#options = resolveEvalBrokerOptions(options);
    this.#clock = this.#options.clock;
    this.#logger = childLogger(this.#options.logger, { component: 'eval-broker' });
    this.#random = this.#options.random;
    this.#events = new TypedEmitter<BrokerEvents>(() => this.#logger);
    this.#metrics = brokerMetricsHub(this.#options.registry);
    this.#metrics.addSource(this);
    this.#deadlines = new DeadlineQueue<Entry>(this.#clock, (entry) => this.#onDeadline(entry));
    this.#waitDeadlines = new DeadlineQueue<Waiter>(
      this.#clock,
      (waiter) => {
        this.#dropWaiter(waiter);
        this.#answer(waiter.callback, undefined, undefined);
      },
      { unref: false },
    );
    this.#tokenPrefix = `${(brokerInstances++).toString(36)}.`;
  }

  /** Typed events: `broker.events.on('broker:ack', ({ evaluation }) => …)`. */
  get events(): TypedEmitter<BrokerEvents> {
    return this.#events;
  }

  /** The registry holding the broker's metrics (the injected one, or the broker's own). */
  get registry(): Registry {
    return this.#options.registry;
  }

  /** The resolved options (defaults filled in). */
  get options(): ResolvedEvalBrokerOptions {
    return this.#options;
  }

  get enabled(): boolean {
    return this.#enabled;
  }

  get paused(): boolean {
    return this.#paused;
  }

  /**
   * Adds an evaluation and returns its handle (`done` settles where the broker settles the evaluation). Absent
   * `id`, `jobId` and `priority` get their defaults (a random UUID, the id, 50). An id the broker already holds (in
   * any state, including cancelable and failed) changes nothing and returns a handle of that evaluation (a new view:
   * the same id, the same `done` promise).
   * `wait`/`waitUntil` hold it until due (the later of the two), without taking its job's slot meanwhile.
   */
  enqueue(input: EvaluationInput): EvaluationHandle {
    if (!this.#enabled) throw new BrokerDisabledError('enqueue');
    const evaluation = withEvaluationDefaults(input);
    assertEvaluation(evaluation, this.#options.validatePayload);
    const held = this.#evals.get(evaluation.id);
    if (held !== undefined) return new OutcomeHandle(held);
    const now = this.#clock.now();
    const entry = new Entry(evaluation, this.#seq++);
    this.#evals.set(entry.id, entry);
    let due = Number.NEGATIVE_INFINITY;
    if (evaluation.wait !== undefined && evaluation.wait > 0) due = now + evaluation.wait;
    if (evaluation.waitUntil !== undefined && evaluation.waitUntil > due) due = evaluation.waitUntil;
    const known = this.#options.knownTypes;
    // Nothing would ever run a type outside `knownTypes`: failed here, once, instead of waiting to be ready.
    const unknown = known !== undefined && !known.has(evaluation.type) && evaluation.type !== FAILED_QUEUE;
    const delayed = !unknown && due > now;
    if (unknown) {
      // Failed below, once broker:enqueue has told of it.
    } else if (delayed) {
      entry.state = EntryState.Waiting;
      this.#totalWaiting++;
      this.#deadlines.schedule(entry, due);
    } else {
      this.#admit(entry, now);
    }
    if (this.#logger.isLevelEnabled('debug')) {
      this.#logger.debug({ evalId: entry.id, jobId: entry.jobId, type: entry.type, state: entry.state, due: delayed ? due : undefined }, 'eval enqueued');
    }
    if (this.#events.hasListeners('broker:enqueue')) {
      this.#events.emit('broker:enqueue', { evaluation, delayedUntil: delayed ? due : undefined });
    }
    if (unknown) {
      const reason = new UnknownSchedulerError(evaluation.type, [...known!]);
      entry.lastReason = reason;
      this.#toFailed(entry, reason, now);
    }
    this.#serveWaiters();
    return new OutcomeHandle(entry);
  }

  /**
   * Takes the best ready evaluation across `types` now, or returns `undefined` when none is ready or the broker is
   * paused. Same semantics as a `dequeue` that finds work: a fresh token, and the nack deadline starts.
   */
  tryDequeue(types: readonly string[]): Delivery | undefined {
    assertTypes(types);
    if (!this.#enabled) throw new BrokerDisabledError('tryDequeue');
    if (this.#paused) return undefined;
    const queue = this.#pick(types);
    return queue === undefined ? undefined : this.#deliver(queue);
  }

  /**
   * Resolves with the best ready evaluation across `types` (higher priority first; equal priorities between types
   * are broken at random), waiting up to `timeoutMs` (0 = forever) for one. Resolves `undefined` on timeout;
   * rejects with `AbortedError` when `signal` aborts and `BrokerDisabledError` when the broker is or gets disabled.
   * While the broker is paused it waits (its timeout keeps running) and is served on resume.
   */
  dequeue(types: readonly string[], timeoutMs: number, signal?: AbortSignal): Promise<Delivery | undefined> {
    return new Promise<Delivery | undefined>((resolve, reject) => {
      this.dequeueWith(types, timeoutMs, signal, (error, delivery) => (error === undefined ? resolve(delivery) : reject(error)));
    });
  }

  /**
   * Up to `max` deliveries: waits up to `timeoutMs` (0 = forever) for the first as `dequeue` does, then takes what
   * else is ready across `types` at that moment, best first. Resolves with none on timeout; rejects as `dequeue`.
   */
  dequeueMany(types: readonly string[], max: number, timeoutMs: number, signal?: AbortSignal): Promise<Delivery[]> {
    const refusal = maxRefusal(max);
    if (refusal !== undefined) return Promise.reject(refusal);
    return new Promise<Delivery[]>((resolve, reject) => {
      this.dequeueWith(types, timeoutMs, signal, (error, first) => {
        if (error !== undefined) return reject(error);
        if (first === undefined) return resolve([]);
        const batch = [first];
        // The first may have come inside the call that made it ready: the rest is whatever is ready now.
        while (batch.length < max && this.#enabled && !this.#paused) {
          const queue = this.#pick(types);
          if (queue === undefined) break;
          batch.push(this.#deliver(queue));
        }
        resolve(batch);
      });
    });
  }

  /**
   * `dequeue` with a callback instead of a promise, for a consumer on the main thread that wants to act on a
   * delivery at once: `callback` runs synchronously inside the call that makes an evaluation available to it (an
   * enqueue, an ack that promotes a pending evaluation, a resume), or inside `dequeueWith` itself when one is
   * ready now or the arguments are wrong. It is called exactly once, with an error or with the delivery
   * (`undefined` on timeout). The engine's scheduling workers use it so that an idle worker sends an evaluation to
   * its thread within the enqueue, without waiting for a promise job. A callback that throws is logged; the
   * delivery it was given stays outstanding until acked or its nack deadline redelivers it.
   */
  dequeueWith(types: readonly string[], timeoutMs: number, signal: AbortSignal | undefined, callback: DequeueCallback): void {
    assertCallback(callback);
    try {
      assertTypes(types);
      assertWait(timeoutMs, signal);
    } catch (error) {
      return this.#answer(callback, error as Error, undefined);
    }
    if (!this.#enabled) return this.#answer(callback, new BrokerDisabledError('dequeue'), undefined);
    if (signal?.aborted) return this.#answer(callback, new AbortedError('dequeue'), undefined);
    if (!this.#paused) {
      const queue = this.#pick(types);
      if (queue !== undefined) return this.#answer(callback, undefined, this.#deliver(queue));
    }
    const waiter = new Waiter([...types], callback);
    if (timeoutMs > 0) this.#waitDeadlines.schedule(waiter, this.#clock.now() + timeoutMs);
    if (signal !== undefined) {
      const waiters = this.#signalWaiters(signal);
      waiters.add(waiter);
      waiter.signalWaiters = waiters;
    }
    this.#waiters.add(waiter);
  }

  /** Calls a dequeue's callback; one that throws is logged and cannot break the call that served it. */
  #answer(callback: DequeueCallback, error: Error | undefined, delivery: Delivery | undefined): void {
    try {
      callback(error, delivery);
    } catch (thrown) {
      this.#logger.error({ err: thrown, evalId: delivery?.evaluation.id }, 'dequeue callback threw');
    }
  }

  /**
   * Completes a delivery: its handle's `done` resolves with `result` (the value, the index its plan committed at,
   * the scheduler runs it took) and its delivery count. The job's best pending evaluation is promoted; its other
   * pending ones become cancelable (their `done` rejects with `SupersededError`).
   */
  ack(id: string, token: string, result?: AckResult): void {
    const entry = this.#outstanding(id, token);
    assertAckResult(result);
    const now = this.#clock.now();
    this.#endDelivery(entry, now, 'acked');
    this.#evals.delete(entry.id);
    entry.state = EntryState.Gone;
    entry.queue = undefined;
    let canceled: Entry[] | undefined;
    if (entry.holdsSlot) canceled = this.#releaseSlot(entry, now, true);
    if (result === undefined) entry.acked(undefined, 0, 1, entry.deliveries);
    else entry.acked(result.value, result.index ?? 0, result.attempts ?? 1, entry.deliveries);
    if (this.#logger.isLevelEnabled('debug')) this.#logger.debug({ evalId: entry.id, jobId: entry.jobId }, 'eval acked');
    if (this.#events.hasListeners('broker:ack')) this.#events.emit('broker:ack', { evaluation: entry.evaluation, token });
    if (canceled !== undefined) this.#emitCancelable(canceled);
    this.#serveWaiters();
  }

  /**
   * Fails a delivery: the evaluation is re-enqueued after the nack delay for its delivery count, or moved to
   * `_failed` once it reached the delivery limit (with a `DeliveryLimitError` whose `cause` is the last reason).
   */
  nack(id: string, token: string, reason?: Error): void {
    const entry = this.#outstanding(id, token);
    assertOptionalReason(reason);
    this.#requeue(entry, reason, false);
    this.#serveWaiters();
  }

  /**
   * Ends a delivery that did not fail (its work was canceled on request, or the engine is stopping): the evaluation
   * is ready again at once, in its place in its queue's order, keeping its job slot, and the delivery is not counted
   * against `deliveryLimit`. A delivery from `_failed` goes back to `_failed`.
   */
  giveBack(id: string, token: string, reason?: Error): void {
    const entry = this.#outstanding(id, token);
    assertOptionalReason(reason);
    const now = this.#clock.now();
    const queue = entry.queue!;
    this.#endDelivery(entry, now, 'given-back', reason);
    if (!queue.failed) entry.deliveries--;
    this.#makeReady(entry, queue, now);
    if (this.#logger.isLevelEnabled('debug')) this.#logger.debug({ evalId: entry.id, deliveries: entry.deliveries }, 'eval given back');
    if (this.#events.hasListeners('broker:give-back')) {
      this.#events.emit('broker:give-back', { evaluation: entry.evaluation, token, deliveries: entry.deliveries, reason });
    }
    this.#serveWaiters();
  }

  /**
   * Moves an outstanding evaluation straight to `_failed` with `reason` (no scheduler for its type, plan attempts
   * exhausted, …), whatever its delivery count.
   */
  fail(id: string, token: string, reason: Error): void {
    const entry = this.#outstanding(id, token);
    assertReason(reason);
    const now = this.#clock.now();
    this.#endDelivery(entry, now, 'failed', reason);
    entry.lastReason = reason;
    const canceled = this.#toFailed(entry, reason, now);
    if (canceled !== undefined) this.#emitCancelable(canceled);
    this.#serveWaiters();
  }

  /**
   * Takes an evaluation out of the broker, in whatever state it is, and rejects its `done` with `AbortedError`
   * (`cause` as its cause) unless its outcome is already known (failed, superseded). One in flight needs the token
   * of its current delivery, as ack and nack do (`TokenMismatchError`, `NackTimeoutReachedError`); one that is not
   * in flight takes no token (`EvalNotOutstandingError` when given one). If it held its job's slot, the job's best
   * pending evaluation is promoted; the job's other pending evaluations stay pending. Returns false when the broker
   * does not hold the id.
   */
  remove(id: string, token?: string, cause?: unknown): boolean {
    assertId('id', id);
    assertOptionalToken(token);
    const entry = this.#evals.get(id);
    if (entry === undefined) return false;
    const now = this.#clock.now();
    const state = stateOf(entry);
    if (token !== undefined && token !== '') {
      this.#outstanding(id, token);
      this.#endDelivery(entry, now, 'removed');
    } else if (entry.state === EntryState.Unacked) {
      throw new TokenMismatchError(id, token);
    }
    switch (entry.state) {
      case EntryState.Ready:
        entry.queue!.line.remove(entry);
        if (entry.queue!.failed) this.#totalFailed--;
        else this.#totalReady--;
        break;
      case EntryState.Pending:
        entry.slot!.pending!.remove(entry);
        entry.slot = undefined;
        this.#totalPending--;
        break;
      case EntryState.Waiting:
        this.#deadlines.cancel(entry);
        this.#totalWaiting--;
        break;
      case EntryState.Cancelable:
        // Rare (the engine never removes one: its outcome is known): a scan of the list is fine.
        this.#cancelable.splice(this.#cancelable.indexOf(entry), 1);
        break;
    }
    this.#evals.delete(id);
    entry.state = EntryState.Gone;
    entry.queue = undefined;
    // Newer pending evaluations are work nobody asked to drop: only the best is promoted, none is superseded.
    if (entry.holdsSlot) this.#releaseSlot(entry, now, false);
    entry.rejectedWith(() => new AbortedError(`evaluation ${JSON.stringify(id)}`, { cause }));
    if (this.#logger.isLevelEnabled('debug')) this.#logger.debug({ evalId: id, state }, 'eval removed');
    if (this.#events.hasListeners('broker:remove')) this.#events.emit('broker:remove', { evaluation: entry.evaluation, state });
    this.#serveWaiters();
    return true;
  }

  /**
   * Rejects the `done` of every evaluation the broker holds whose outcome is not known yet, with `reason(evaluation)`
   * (called only for the handles someone reads), and leaves the evaluations where they are. An engine that stops
   * calls it: nothing in this process will finish them.
   */
  rejectOutcomes(reason: (evaluation: Evaluation) => Error): void {
    assertOutcomeReason(reason);
    for (const entry of this.#evals.values()) {
      if (!entry.outcomeKnown) entry.rejectedWith(() => reason(entry.evaluation));
    }
  }

  /** The token of the evaluation's current delivery, or `undefined` if it is not outstanding. */
  outstanding(id: string): string | undefined {
    const entry = this.#evals.get(id);
    return entry !== undefined && entry.state === EntryState.Unacked ? entry.token : undefined;
  }

  /**
   * Registers who is asked when a nack deadline is about to fire (see `LeaseKeeper`), in place of the
   * `extendNackDeadline` option; `undefined` goes back to that option.
   */
  keepLeases(keeper: LeaseKeeper | undefined): void {
    const k: unknown = keeper;
    if (k !== undefined && (k === null || typeof k !== 'object' || typeof (k as LeaseKeeper).leaseProgress !== 'function')) {
      throw new InvalidArgumentError('keeper', 'a LeaseKeeper { leaseProgress(evaluationId, token) } or undefined', keeper);
    }
    this.#keeper = keeper;
  }

  /**
   * Throws the typed refusal (`TokenMismatchError`, `NackTimeoutReachedError`, `EvalNotOutstandingError`) unless
   * `token` is the evaluation's current delivery: the fence of a plan commit.
   */
  assertCurrent(id: string, token: string): void {
    this.#outstanding(id, token);
  }

  /** Restarts the nack deadline of a delivery (a heartbeat). No-op while its nack timeout is paused. */
  outstandingReset(id: string, token: string): void {
    const entry = this.#outstanding(id, token);
    if (!entry.nackPaused) this.#deadlines.schedule(entry, this.#clock.now() + this.#options.nackTimeoutMs);
  }

  /** Stops the nack deadline of a delivery that is making progress in an unbounded step (e.g. the plan queue). */
  pauseNackTimeout(id: string, token: string): void {
    const entry = this.#outstanding(id, token);
    this.#deadlines.cancel(entry);
    entry.nackPaused = true;
  }

  /** Restarts a paused nack deadline with a full `nackTimeoutMs`. */
  resumeNackTimeout(id: string, token: string): void {
    const entry = this.#outstanding(id, token);
    entry.nackPaused = false;
    this.#deadlines.schedule(entry, this.#clock.now() + this.#options.nackTimeoutMs);
  }

  /** Why an evaluation is in `_failed` (ready or dequeued from there), or `undefined`. */
  failedReason(id: string): Error | undefined {
    const entry = this.#evals.get(id);
    return entry !== undefined && entry.queue?.failed === true ? entry.failure : undefined;
  }

  /** Hands over (and forgets) the evaluations superseded by a newer one of their job. */
  drainCancelable(): Evaluation[] {
    const drained = this.#cancelable;
    if (drained.length === 0) return [];
    this.#cancelable = [];
    const evaluations = new Array<Evaluation>(drained.length);
    for (let i = 0; i < drained.length; i++) {
      const entry = drained[i]!;
      entry.state = EntryState.Gone;
      this.#evals.delete(entry.id);
      evaluations[i] = entry.evaluation;
    }
    return evaluations;
  }

  /**
   * Enables or disables the broker. Disabling flushes it: every evaluation it held (in any state) is returned to
   * the caller, every token becomes invalid, and every waiting dequeue rejects with `BrokerDisabledError`.
   */
  setEnabled(enabled: boolean): Evaluation[] {
    assertEnabled(enabled);
    if (enabled === this.#enabled) return [];
    this.#enabled = enabled;
    const flushed = enabled ? [] : this.#flush();
    if (this.#logger.isLevelEnabled('info')) this.#logger.info({ enabled, flushed: flushed.length }, enabled ? 'broker enabled' : 'broker disabled');
    if (this.#events.hasListeners('broker:enabled')) this.#events.emit('broker:enabled', { enabled, flushed });
    return flushed;
  }

  /** Holds dequeues (they wait, keeping their timeouts) without dropping anything; enqueues and deadlines go on. */
  pause(): void {
    if (this.#paused) return;
    this.#paused = true;
    this.#events.emit('broker:paused', { paused: true });
  }

  /** Ends a pause and serves the waiting dequeues in arrival order. */
  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.#events.emit('broker:paused', { paused: false });
    this.#readyAdded = true;
    this.#serveWaiters();
  }

  stats(): BrokerStats {
    // fromEntries defines own properties: a queue named `__proto__` is listed, not set as the prototype.
    const byScheduler: Record<string, SchedulerStats> = Object.fromEntries(
      Array.from(this.#queues, ([name, queue]) => [name, { ready: queue.line.size, unacked: queue.unacked }]),
    );
    return {
      totalReady: this.#totalReady,
      totalUnacked: this.#totalUnacked,
      totalPending: this.#totalPending,
      totalWaiting: this.#totalWaiting,
      totalCancelable: this.#cancelable.length,
      totalFailed: this.#totalFailed,
      byScheduler,
    };
  }

  /** For the metrics hub: the gauges read this at scrape time. */
  gaugeSnapshot(): BrokerGaugeSnapshot {
    return this.stats();
  }

  /** Where an evaluation is, or `undefined` if the broker does not hold it. */
  inspect(id: string): EvaluationInfo | undefined {
    const entry = this.#evals.get(id);
    if (entry === undefined) return undefined;
    return { state: stateOf(entry), queue: entry.queue?.name, deliveries: entry.deliveries, holdsJobSlot: entry.holdsSlot };
  }

  // ───────────────────────────── admin ─────────────────────────────

  /** A page of the evaluations in one state, in enqueue order (see `BrokerAdmin`). */
  listEvaluations(query: EvaluationQuery): EvaluationPage {
    const q = checkQuery(query, parseMemoryCursor);
    // A state with nothing in it needs no walk over the others.
    const held = { ready: this.#totalReady, failed: this.#totalFailed, unacked: this.#totalUnacked, pending: this.#totalPending, delayed: this.#totalWaiting }[q.state];
    return held === 0 ? { items: [], nextCursor: undefined } : pageOf(this.#evals.values(), q);
  }

  /** Exact counts, at most `cap` each (the broker keeps them: no walk). */
  depths(cap: number): QueueDepths {
    checkCap(cap);
    const at = (n: number): number => Math.min(n, cap);
    const byType: Record<string, { ready: number; unacked: number }> = {};
    for (const queue of this.#queues.values()) {
      if (!queue.failed) byType[queue.name] = { ready: at(queue.line.size), unacked: at(queue.unacked) };
    }
    return {
      totals: { ready: at(this.#totalReady), unacked: at(this.#totalUnacked), pending: at(this.#totalPending), delayed: at(this.#totalWaiting), failed: at(this.#totalFailed) },
      byType,
      cap,
    };
  }

  evaluationDetail(id: string): EvaluationDetail | undefined {
    assertId('id', id);
    const entry = this.#evals.get(id);
    return entry === undefined ? undefined : detailOf(entry);
  }

  /**
   * A failed evaluation that is not in flight goes back to its type's queue as if new: no deliveries counted, its
   * failure cleared, its job's slot asked for again (pending behind the holder, if the job has one). `done` read
   * from now on settles with its new outcome. False when the id is not such an evaluation.
   */
  replay(id: string): boolean {
    assertId('id', id);
    if (!this.#enabled) throw new BrokerDisabledError('replay');
    const entry = this.#evals.get(id);
    if (entry === undefined || entry.state !== EntryState.Ready || entry.queue?.failed !== true) return false;
    entry.queue.line.remove(entry);
    this.#totalFailed--;
    entry.queue = undefined;
    entry.deliveries = 0;
    entry.failure = undefined;
    entry.reopen();
    this.#admit(entry, this.#clock.now());
    if (this.#logger.isLevelEnabled('info')) this.#logger.info({ evalId: id, type: entry.type }, 'failed eval replayed');
    this.#serveWaiters();
    return true;
  }

  /** Ids of the failed evaluations of `type` that are not in flight, oldest first, up to `limit`. */
  failedIds(type: string, limit: number): string[] {
    assertId('type', type);
    if (!Number.isSafeInteger(limit) || limit < 1) throw new InvalidArgumentError('limit', 'an integer >= 1', limit);
    const ids: string[] = [];
    for (const entry of this.#evals.values()) {
      if (ids.length === limit) break;
      if (entry.type === type && entry.state === EntryState.Ready && entry.queue?.failed === true) ids.push(entry.id);
    }
    return ids;
  }

  /** Dequeues stop taking `type` (an unknown type is paused for when it comes); deliveries in flight go on. */
  pauseType(type: string): void {
    assertId('type', type);
    this.#queue(type).paused = true;
  }

  resumeType(type: string): void {
    assertId('type', type);
    const queue = this.#queues.get(type);
    if (queue === undefined || !queue.paused) return;
    queue.paused = false;
    this.#readyAdded = true;
    this.#serveWaiters();
  }

  pausedTypes(): string[] {
    return [...this.#queues.values()].filter((q) => q.paused).map((q) => q.name);
  }

  /** Number of dequeues currently waiting. */
  get waitingDequeues(): number {
    return this.#waiters.size;
  }

  // ───────────────────────────── internals ─────────────────────────────

  #queue(name: string): ReadyQueue {
    let queue = this.#queues.get(name);
    if (queue === undefined) {
      queue = new ReadyQueue(name, this.#metrics.latencies(name));
      this.#queues.set(name, queue);
    }
    return queue;
  }

  #slot(entry: Entry): JobSlot {
    let byJob = this.#jobs.get(entry.namespace);
    if (byJob === undefined) {
      byJob = new Map();
      this.#jobs.set(entry.namespace, byJob);
    }
    let slot = byJob.get(entry.jobId);
    if (slot === undefined) {
      slot = new JobSlot();
      byJob.set(entry.jobId, slot);
      this.#jobSlots++;
      this.#emptySlots++;
    }
    return slot;
  }

  /** Takes the (free) slot for `entry`. Invariant: a slot without a holder has no pending evaluations. */
  #hold(slot: JobSlot, entry: Entry): void {
    slot.holder = entry;
    entry.slot = slot;
    entry.holdsSlot = true;
    this.#emptySlots--;
  }

  #vacate(slot: JobSlot, entry: Entry): void {
    slot.holder = undefined;
    entry.slot = undefined;
    entry.holdsSlot = false;
    // Swept once the empty slots are at least as many as the live ones (and more than a few): a sweep visits every
    // slot, and at least as many vacates as there are slots came since the last one, so it is amortized O(1) per
    // vacate; and what an idle broker keeps for jobs with nothing in flight is bounded by SWEEP_FLOOR.
    const empty = ++this.#emptySlots;
    if (empty >= SWEEP_FLOOR && empty >= this.#jobSlots - empty) this.#sweepSlots();
  }

  /** Drops the empty slots (see #vacate for when). */
  #sweepSlots(): void {
    // forEach, not for-of over entries: an entries iterator makes a [key, value] pair per job.
    this.#jobs.forEach((byJob, namespace) => {
      byJob.forEach((slot, jobId) => {
        if (slot.holder === undefined) byJob.delete(jobId);
      });
      if (byJob.size === 0) this.#jobs.delete(namespace);
    });
    this.#jobSlots -= this.#emptySlots;
    this.#emptySlots = 0;
  }

  /** A new (or newly due) evaluation asks for its job's slot: ready if free, pending otherwise. */
  #admit(entry: Entry, now: number): void {
    const slot = this.#slot(entry);
    if (slot.holder === undefined) {
      this.#hold(slot, entry);
      this.#makeReady(entry, this.#queue(entry.type), now);
    } else {
      (slot.pending ??= new PriorityHeap<Entry>(pendingBefore)).push(entry);
      entry.slot = slot;
      entry.state = EntryState.Pending;
      this.#totalPending++;
    }
  }

  #makeReady(entry: Entry, queue: ReadyQueue, now: number): void {
    entry.state = EntryState.Ready;
    entry.queue = queue;
    entry.readyAt = now;
    queue.line.push(entry);
    if (queue.failed) this.#totalFailed++;
    else this.#totalReady++;
    this.#readyAdded = true;
  }

  /**
   * Frees the job slot `entry` held and promotes the best pending evaluation. On ack the other pending ones are
   * superseded and become cancelable (Nomad PR #14621); when the holder went to `_failed` they stay pending,
   * because they are newer work, not duplicates of finished work. Returns what became cancelable.
   */
  #releaseSlot(entry: Entry, now: number, onAck: boolean): Entry[] | undefined {
    const slot = entry.slot!;
    const pending = slot.pending;
    const best = pending?.pop();
    if (pending === undefined || best === undefined) {
      this.#vacate(slot, entry);
      return undefined;
    }
    this.#totalPending--;
    let canceled: Entry[] | undefined;
    if (onAck && pending.size > 0) {
      canceled = pending.drain();
      this.#totalPending -= canceled.length;
      const by = best.id;
      for (const c of canceled) {
        c.slot = undefined;
        c.state = EntryState.Cancelable;
        this.#cancelable.push(c);
        c.rejectedWith(() => new SupersededError(c.id, by));
      }
    }
    // The slot passes from entry to best directly: it never counts as empty.
    entry.holdsSlot = false;
    entry.slot = undefined;
    slot.holder = best;
    best.holdsSlot = true;
    this.#makeReady(best, this.#queue(best.type), now);
    return canceled;
  }

  /** Best ready queue across `types`, or undefined. Ties in head priority between queues are broken at random. */
  #pick(types: readonly string[]): ReadyQueue | undefined {
    let best: ReadyQueue | undefined;
    let bestPriority = 0;
    let ties = 0;
    const tied = this.#ties;
    for (let i = 0; i < types.length; i++) {
      const queue = this.#queues.get(types[i]!);
      if (queue === undefined || queue.paused) continue;
      // Compare the queue heads: the head is the queue's next evaluation (Nomad's Peek read the last slot instead).
      const head = queue.line.peek();
      if (head === undefined) continue;
      if (best === undefined || head.priority > bestPriority) {
        best = queue;
        bestPriority = head.priority;
        tied[0] = queue;
        ties = 1;
      } else if (head.priority === bestPriority) {
        // A type listed twice must not get two chances.
        let listed = false;
        for (let t = 0; t < ties && !listed; t++) listed = tied[t] === queue;
        if (!listed) tied[ties++] = queue;
      }
    }
    if (ties > 1) {
      const at = Math.floor(this.#random() * ties);
      // A `random` option out of [0, 1) (NaN included) must not leave `best` undefined and the queues stalled.
      best = tied[at >= ties ? ties - 1 : at > 0 ? at : 0];
    }
    // `tied` is not truncated (setting length is a runtime call); slots past `ties` are stale queues, never read.
    return best;
  }

  #deliver(queue: ReadyQueue): Delivery {
    const entry = this.#handOut(queue);
    const delivery = { evaluation: entry.evaluation, token: entry.token };
    this.#recordDelivery(entry, queue, entry.dequeuedAt - entry.readyAt, delivery.token);
    return delivery;
  }

  /**
   * The part of a delivery that must exist before the consumer sees it: the evaluation leaves its queue, is
   * unacked (so it counts once, and holds its job slot), and has its token.
   */
  #handOut(queue: ReadyQueue): Entry {
    const entry = queue.line.pop()!;
    const now = this.#clock.now();
    if (queue.failed) this.#totalFailed--;
    else {
      this.#totalReady--;
      entry.deliveries++;
    }
    queue.unacked++;
    this.#totalUnacked++;
    entry.state = EntryState.Unacked;
    entry.nackPaused = false;
    entry.dequeuedAt = now;
    entry.token = this.#tokenPrefix + (++this.#tokenCounter).toString(36);
    return entry;
  }

  /**
   * The rest of a delivery: its wait in the histogram, the log line and `broker:dequeue`, then its nack deadline,
   * from the clock as it reads after the listeners ran. A delivery the consumer already ended (acked, nacked or
   * failed from inside its callback) gets no deadline.
   */
  #recordDelivery(entry: Entry, queue: ReadyQueue, waitMs: number, token = entry.token): void {
    queue.latencies.wait.observeMs(waitMs);
    if (this.#logger.isLevelEnabled('debug')) {
      this.#logger.debug({ evalId: entry.id, queue: queue.name, deliveries: entry.deliveries }, 'eval dequeued');
    }
    if (this.#events.hasListeners('broker:dequeue')) {
      this.#events.emit('broker:dequeue', { evaluation: entry.evaluation, token, queue: queue.name, deliveries: entry.deliveries });
    }
    if (entry.state === EntryState.Unacked && entry.token === token && !entry.nackPaused) {
      this.#deadlines.schedule(entry, this.#clock.now() + this.#options.nackTimeoutMs);
    }
  }

  /** The entry of a current delivery, or the typed error Nomad's broker would return. */
  #outstanding(id: string, token: string): Entry {
    assertId('id', id);
    assertToken(token);
    const entry = this.#evals.get(id);
    if (entry === undefined) throw new EvalNotOutstandingError(id);
    if (entry.state !== EntryState.Unacked || entry.token !== token) {
      if (token !== '' && token === entry.timedOutToken) throw new NackTimeoutReachedError(id);
      if (entry.state !== EntryState.Unacked) throw new EvalNotOutstandingError(id);
      throw new TokenMismatchError(id, token);
    }
    return entry;
  }

  /** Bookkeeping shared by ack, nack, fail and timeout: the delivery is over, and its record says how. */
  #endDelivery(entry: Entry, now: number, end: DeliveryRecord['end'], reason?: Error): void {
    if (end !== 'acked') {
      const history = (entry.history ??= []);
      if (history.length === HISTORY_LIMIT) history.shift();
      history.push({ startedAt: entry.dequeuedAt, endedAt: now, end, error: errorView(reason), process: THIS_PROCESS });
    }
    this.#deadlines.cancel(entry);
    const queue = entry.queue!;
    queue.unacked--;
    this.#totalUnacked--;
    queue.latencies.process.observeMs(now - entry.dequeuedAt);
    queue.latencies.response.observeMs(now - entry.readyAt);
    entry.token = '';
    entry.nackPaused = false;
  }

  /** Nack or nack timeout: back to the queue after the delay for its delivery count, or to `_failed`. */
  #requeue(entry: Entry, reason: Error | undefined, timedOut: boolean): void {
    const now = this.#clock.now();
    const queue = entry.queue!;
    const token = entry.token;
    this.#endDelivery(entry, now, timedOut ? 'timed-out' : 'nacked', reason);
    if (reason !== undefined) entry.lastReason = reason;
    this.#metrics.nacks.inc({ type: queue.name });
    if (timedOut) this.#metrics.nackTimeouts.inc({ type: queue.name });
    let delayMs = 0;
    let failed = false;
    let canceled: Entry[] | undefined;
    if (queue.failed) {
      // A dead-lettered evaluation stays dead-lettered: straight back to `_failed`, no delay.
      this.#makeReady(entry, queue, now);
    } else if (entry.deliveries >= this.#options.deliveryLimit) {
      failed = true;
      const error = withCause(new DeliveryLimitError(entry.id, entry.deliveries, this.#options.deliveryLimit), entry.lastReason);
      canceled = this.#toFailed(entry, error, now);
    } else {
      delayMs = nackDelayMs(entry.deliveries, this.#options.initialNackDelayMs, this.#options.subsequentNackDelayMs);
      if (delayMs > 0) {
        // Keeps its job slot while it waits: the job stays serialized behind its own retry, as in Nomad.
        entry.state = EntryState.Waiting;
        entry.queue = undefined;
        this.#totalWaiting++;
        this.#deadlines.schedule(entry, now + delayMs);
      } else {
        this.#makeReady(entry, queue, now);
      }
    }
    if (this.#logger.isLevelEnabled('debug')) {
      this.#logger.debug({ evalId: entry.id, deliveries: entry.deliveries, delayMs, failed, timedOut }, 'eval nacked');
    }
    if (this.#events.hasListeners('broker:nack')) {
      this.#events.emit('broker:nack', { evaluation: entry.evaluation, token, timedOut, deliveries: entry.deliveries, delayMs, failed, reason });
    }
    if (canceled !== undefined) this.#emitCancelable(canceled);
  }

  /**
   * Dead-letters `entry`. It gives up its job slot: the job's best pending evaluation is promoted (the others stay
   * pending: they are newer work, not cancelable). Otherwise a dead-lettered evaluation, which waits in `_failed`
   * until someone reaps it, would block its job forever. The one-ready-or-unacked-per-job invariant is about the
   * scheduler queues, not `_failed`.
   */
  #toFailed(entry: Entry, reason: Error, now: number): Entry[] | undefined {
    entry.failure = reason;
    entry.rejected(reason);
    // Counted once per evaluation: one failed again while dequeued from `_failed` was counted when it got there.
    if (entry.queue?.failed !== true) this.#metrics.failed.inc({ type: entry.type });
    this.#makeReady(entry, this.#queue(FAILED_QUEUE), now);
    const canceled = entry.holdsSlot ? this.#releaseSlot(entry, now, false) : undefined;
    if (this.#logger.isLevelEnabled('warn')) {
      this.#logger.warn({ evalId: entry.id, jobId: entry.jobId, type: entry.type, deliveries: entry.deliveries, err: reason }, 'eval moved to _failed');
    }
    if (this.#events.hasListeners('broker:failed')) this.#events.emit('broker:failed', { evaluation: entry.evaluation, reason });
    return canceled;
  }

  #onDeadline(entry: Entry): void {
    const now = this.#clock.now();
    if (entry.state === EntryState.Waiting) {
      this.#totalWaiting--;
      // A nacked delivery comes back holding its slot; a wait/waitUntil evaluation asks for the slot now.
      if (entry.holdsSlot) this.#makeReady(entry, this.#queue(entry.type), now);
      else this.#admit(entry, now);
    } else if (entry.state === EntryState.Unacked) {
      const deadline = this.#extendedDeadline(entry, now);
      if (deadline !== undefined) {
        this.#deadlines.schedule(entry, deadline);
        if (this.#events.hasListeners('broker:extend')) {
          this.#events.emit('broker:extend', { evaluation: entry.evaluation, token: entry.token, deadline });
        }
        return;
      }
      entry.timedOutToken = entry.token;
      if (this.#logger.isLevelEnabled('info')) {
        this.#logger.info({ evalId: entry.id, deliveries: entry.deliveries }, 'eval nack deadline passed');
      }
      this.#requeue(entry, new NackTimeoutReachedError(entry.id), true);
    }
    this.#serveWaiters();
  }

  /** The deadline `extendNackDeadline` asks for, or undefined to let this one fire. */
  #extendedDeadline(entry: Entry, now: number): number | undefined {
    const keeper = this.#keeper;
    const extend = this.#options.extendNackDeadline;
    if (keeper === undefined && extend === undefined) return undefined;
    let answer: boolean | number;
    try {
      answer = keeper !== undefined ? keeper.leaseProgress(entry.id, entry.token) : extend!(entry.id, entry.token);
    } catch (error) {
      this.#logger.warn({ err: error, evalId: entry.id }, 'the lease keeper threw; nacking');
      return undefined;
    }
    if (answer === true) return now + this.#options.nackTimeoutMs;
    if (typeof answer !== 'number') return undefined;
    // NaN and progress longer than a nack timeout ago fail this test: the deadline fires.
    const deadline = answer + this.#options.nackTimeoutMs;
    return deadline > now ? deadline : undefined;
  }

  #emitCancelable(canceled: Entry[]): void {
    if (this.#events.hasListeners('broker:cancelable')) {
      this.#events.emit('broker:cancelable', { evaluations: canceled.map((c) => c.evaluation) });
    }
  }

  /**
   * One new ready evaluation wakes one waiter: waiters are served in arrival order, each taking the best ready
   * evaluation across its own types. A waiter exists only while all its queues were empty (or the broker paused),
   * so nothing needs serving unless something became ready since the last pass.
   */
  #serveWaiters(): void {
    if (!this.#readyAdded) return;
    if (this.#waiters.size === 0 || this.#paused || !this.#enabled) {
      if (!this.#paused) this.#readyAdded = false;
      return;
    }
    this.#readyAdded = false;
    for (const waiter of this.#waiters) {
      // Nothing left to hand out: the other waiters need not be asked (with hundreds of idle workers waiting,
      // asking each one cost microseconds per enqueue).
      if (this.#totalReady === 0 && this.#totalFailed === 0) break;
      // A callback served in this pass paused or disabled the broker: resume() or enable serves the rest.
      if (this.#paused || !this.#enabled) break;
      const queue = this.#pick(waiter.types);
      if (queue === undefined) continue;
      this.#dropWaiter(waiter);
      // The hand-off goes first: an idle worker posts the evaluation to an idle thread from inside its callback, and
      // the bookkeeping follows in the same synchronous turn, before any result of the delivery can come back.
      const entry = this.#handOut(queue);
      // Read before the callback, which may end the delivery and requeue the entry (a new readyAt).
      const waitMs = entry.dequeuedAt - entry.readyAt;
      const token = entry.token;
      this.#answer(waiter.callback, undefined, { evaluation: entry.evaluation, token });
      this.#recordDelivery(entry, queue, waitMs, token);
    }
  }

  #dropWaiter(waiter: Waiter): void {
    this.#unlinkWaiter(waiter);
    this.#waitDeadlines.cancel(waiter);
  }

  /** Takes a waiter out of the sets that could serve it again; its timeout is canceled separately. */
  #unlinkWaiter(waiter: Waiter): void {
    this.#waiters.delete(waiter);
    waiter.signalWaiters?.delete(waiter);
    waiter.signalWaiters = undefined;
  }

  /**
   * The set of dequeues waiting with `signal`, with the signal's one abort listener. A caller that reuses a signal
   * for many dequeues (the scheduling workers do) pays for the listener once, not per dequeue.
   */
  #signalWaiters(signal: AbortSignal): Set<Waiter> {
    let waiters = this.#bySignal.get(signal);
    if (waiters === undefined) {
      const mine = new Set<Waiter>();
      waiters = mine;
      this.#bySignal.set(signal, mine);
      signal.addEventListener(
        'abort',
        () => {
          this.#bySignal.delete(signal);
          for (const waiter of [...mine]) {
            this.#dropWaiter(waiter);
            this.#answer(waiter.callback, new AbortedError('dequeue'), undefined);
          }
        },
        { once: true },
      );
    }
    return waiters;
  }

  #flush(): Evaluation[] {
    const flushed: Evaluation[] = [];
    for (const entry of this.#evals.values()) {
      flushed.push(entry.evaluation);
      entry.rejectedWith(() => new BrokerDisabledError('the evaluations it held'));
      entry.state = EntryState.Gone;
      entry.queue = undefined;
      entry.holdsSlot = false;
      entry.token = '';
    }
    this.#evals.clear();
    this.#deadlines.clear();
    for (const queue of this.#queues.values()) queue.line.drain();
    this.#queues.clear();
    this.#jobs.clear();
    this.#jobSlots = 0;
    this.#emptySlots = 0;
    this.#cancelable = [];
    this.#totalReady = 0;
    this.#totalFailed = 0;
    this.#totalUnacked = 0;
    this.#totalPending = 0;
    this.#totalWaiting = 0;
    this.#readyAdded = false;
    const waiters = [...this.#waiters];
    for (const waiter of waiters) this.#unlinkWaiter(waiter);
    // Canceling a timeout leaves the queue's timer armed (it disarms when it fires): clear it, so that a disabled
    // broker keeps no timer. Before the answers: a waiter answered here may enable the broker and wait again.
    this.#waitDeadlines.clear();
    for (const waiter of waiters) this.#answer(waiter.callback, new BrokerDisabledError('dequeue'), undefined);
    return flushed;
  }
}
