/**
 * The broker seam: what the scheduling workers, the engine and the outcome handles need from an evaluation broker.
 * `EvalBroker` (in memory, synchronous) implements it; a durable broker shared by many processes (PostgreSQL)
 * implements it with promises where it must reach its database.
 *
 * Rules every implementation keeps (the Nomad rules; the broker tests state each one):
 * - At-least-once: every admitted evaluation ends acked once or failed with a reason (`_failed`, superseded,
 *   removed); a delivery whose lease (nack deadline) ends without an ack is redelivered and counts as a delivery,
 *   and at `deliveryLimit` deliveries it goes to `_failed` with `DeliveryLimitError`. A delivery given back
 *   (`giveBack`: canceled on request, or its process stopping) does not count.
 * - One per job: at most one evaluation per job key (`namespace` + `jobId`) is ready or unacked in the scheduler
 *   queues; newer ones wait pending, and an ack promotes the best pending one and makes the rest cancelable.
 * - Order: the highest priority first across the asked types, FIFO within a priority, ties between types at random.
 * - Tokens: each delivery has a fresh token; ack, nack, fail, remove and the lease calls take it and refuse a token
 *   that is not the current delivery's (`TokenMismatchError`; `NackTimeoutReachedError` when its lease ended;
 *   `EvalNotOutstandingError` when the evaluation is not unacked at all), changing nothing.
 *
 * Sync or async: a method typed `MaybePromise<T>` answers with the value itself when it has it (the in-memory broker
 * always does) or with a promise (a durable broker after its round trip). Callers check for a promise only on the
 * branch that needs it, so the in-memory path gains no `await`. Bad arguments are thrown synchronously either way
 * (typed `TickpoolError`s with codes); refusals that need the backend's state (a stale token) are thrown by a
 * synchronous implementation and rejected by an asynchronous one. A backend that cannot reach its store rejects with
 * a typed error of its own (PostgreSQL: `ERR_BACKEND_UNAVAILABLE`) and must not have applied the call twice.
 */
import type { TypedEmitter } from '../events.js';
import type { Evaluation, EvaluationInput } from '../broker/evaluation.js';
import type { AckResult, EvaluationHandle } from '../broker/outcome-waiters.js';
import type { BrokerEvents } from '../broker/broker-events.js';
import type { BrokerStats, Delivery, EvaluationInfo } from '../broker/broker-types.js';
import type { MaybePromise } from '../tasks/maybe-promise.js';

/** One delivery of one evaluation, as the fence of a plan commit or an ack names it. */
export interface DeliveryRef {
  readonly evaluationId: string;
  readonly token: string;
}

/**
 * How a dequeue that waited answers: exactly once, with an error, or with a delivery (`undefined` on timeout). An
 * implementation may call it synchronously inside the call that made an evaluation available (the in-memory broker
 * does, inside the enqueue or ack) or later from its own I/O (a long poll, a notification); the caller must not
 * depend on either.
 */
export type DequeueCallback = (error: Error | undefined, delivery: Delivery | undefined) => void;

/**
 * Asked by the broker when a delivery's lease is about to end (the engine's worker set answers, from shared memory):
 * `true` extends the lease from now, a number `t` (a time on the broker's clock: when the delivery's work started,
 * or last showed progress) extends it to `t + nackTimeoutMs` (ended if that is not after now), `false` lets it end.
 * It is called synchronously, must not call back into the broker, and a throw counts as `false`.
 */
export interface LeaseKeeper {
  leaseProgress(evaluationId: string, token: string): boolean | number;
}

export interface BrokerBackend {
  /**
   * Typed events. In memory: every broker event. A shared broker emits the events of what this process did (its
   * enqueues, its deliveries and their acks, nacks and lease ends), which is what the engine listens for: a
   * `broker:nack` with `timedOut` for a delivery this process holds tells its worker to stop working on it.
   */
  readonly events: TypedEmitter<BrokerEvents>;

  /** False once `setEnabled(false)`: enqueue and dequeue throw `BrokerDisabledError`. */
  readonly enabled: boolean;
  /** True while `pause()` holds this broker's dequeues. */
  readonly paused: boolean;

  /**
   * Admission: validates the evaluation synchronously (`InvalidEvaluationError`, `PayloadTooLargeError`: thrown,
   * nothing admitted) and returns its handle at once. `handle.accepted` resolves once the backend holds it (in memory
   * at once; a durable backend after its commit, and rejects if the commit failed); `handle.done` settles with its
   * outcome wherever it ran. An evaluation of a type outside the backend's known types is failed here, once
   * (`done` rejects with `UnknownSchedulerError`). An id the backend already holds returns a handle of that
   * evaluation (its id, the same `done`) and changes nothing. Throws `BrokerDisabledError` when disabled.
   */
  enqueue(input: EvaluationInput): EvaluationHandle;

  /**
   * The best ready delivery across `types` that this broker can hand out without waiting, or `undefined` (none, or
   * paused). Never does I/O: a durable broker answers from deliveries it already fetched (a prefetched batch) or says
   * `undefined`, and the caller then waits with `dequeueWith`. A delivery starts its lease. Throws
   * `InvalidArgumentError` for bad `types`, `BrokerDisabledError` when disabled.
   */
  tryDequeue(types: readonly string[]): Delivery | undefined;

  /**
   * Waits up to `timeoutMs` (0 = forever) for the best delivery across `types` and calls `callback` once (see
   * `DequeueCallback`): with `AbortedError` when `signal` aborts, `BrokerDisabledError` when disabled, `undefined`
   * on timeout. While paused it waits (its timeout runs). A durable broker may block in a long poll or a LISTEN and
   * may serve many waiting dequeues from one batched fetch (`FOR UPDATE SKIP LOCKED LIMIT <waiters>`); a delivery it
   * fetched for a waiter that went away (timeout, abort) must be given back, not left to its lease.
   */
  dequeueWith(types: readonly string[], timeoutMs: number, signal: AbortSignal | undefined, callback: DequeueCallback): void;

  /** `dequeueWith` as a promise: resolves a delivery or `undefined` on timeout, rejects as the callback's error. */
  dequeue(types: readonly string[], timeoutMs: number, signal?: AbortSignal): Promise<Delivery | undefined>;

  /**
   * Up to `max` deliveries at once (a batch): resolves with at least one, waiting up to `timeoutMs` (0 = forever) for
   * the first, or with none on timeout; the others are those ready at that moment, best first. Rejects as `dequeue`.
   * Each delivery has its own token and lease.
   */
  dequeueMany(types: readonly string[], max: number, timeoutMs: number, signal?: AbortSignal): Promise<Delivery[]>;

  /**
   * Completes a delivery: `done` resolves with `result` (value, the state index its plan committed at, scheduler
   * runs); the job's best pending evaluation is promoted and its other pending ones become cancelable (their `done`
   * rejects with `SupersededError`). Token refusals as in the rules above. A durable broker commits the ack once:
   * a lost connection mid-ack is resolved by re-reading, never by acking twice.
   */
  ack(id: string, token: string, result?: AckResult): MaybePromise<void>;

  /**
   * Fails a delivery: redelivered after the nack delay for its delivery count, or to `_failed` at `deliveryLimit`
   * (`DeliveryLimitError` whose `cause` is the last reason). Token refusals as above.
   */
  nack(id: string, token: string, reason?: Error): MaybePromise<void>;

  /**
   * Ends a delivery that did not fail: its work was canceled on request, or its process is stopping. The evaluation
   * is ready again at once in its queue (keeping its job's slot and its place in the queue's order), and the delivery
   * is not counted: `deliveries` goes back by one, so a give-back never brings an evaluation closer to `_failed`.
   * Whatever the delivery's scheduler returned is discarded. Token refusals as above.
   */
  giveBack(id: string, token: string, reason?: Error): MaybePromise<void>;

  /** Moves an unacked evaluation straight to `_failed` with `reason`, whatever its delivery count. */
  fail(id: string, token: string, reason: Error): MaybePromise<void>;

  /**
   * Takes an evaluation out in whatever state it is (its `done` rejects with `AbortedError`, `cause` as its cause,
   * unless its outcome is known). One in flight needs its current token; one not in flight takes none. Answers false
   * when the backend does not hold the id.
   */
  remove(id: string, token?: string, cause?: unknown): MaybePromise<boolean>;

  /** The token of the evaluation's current delivery, or `undefined` when it is not unacked. */
  outstanding(id: string): MaybePromise<string | undefined>;

  /** Where an evaluation is (state, queue, deliveries), or `undefined` when the backend does not hold it. */
  inspect(id: string): MaybePromise<EvaluationInfo | undefined>;

  /**
   * Lease extension pushed by the holder (a heartbeat): the lease of this delivery restarts from now (the database's
   * `now()` for a durable broker). A no-op while its nack timeout is paused. Token refusals as above.
   */
  outstandingReset(id: string, token: string): MaybePromise<void>;

  /**
   * The delivery waits in an unbounded step that is progress (the plan queue): its lease must not end meanwhile. A
   * broker whose holders can die (a shared one) keeps the lease alive with heartbeats of this process instead of
   * lifting it, so a dead process's delivery still ends. Token refusals as above: a delivery that is no longer
   * current must not submit its plan.
   */
  pauseNackTimeout(id: string, token: string): MaybePromise<void>;

  /** Restarts a paused lease with a full `nackTimeoutMs`. Token refusals as above. */
  resumeNackTimeout(id: string, token: string): MaybePromise<void>;

  /**
   * Registers who answers when a lease of a delivery handed out by this broker is about to end (see `LeaseKeeper`);
   * replaces an earlier keeper. Without one, leases end at their deadline unless pushed by `outstandingReset`.
   */
  keepLeases(keeper: LeaseKeeper | undefined): void;

  /**
   * Registers how long the engine's threads would stay busy on the work they hold and have not started (predicted
   * ms per thread; the pool answers). A broker that pays a round trip per fetch and per ack batch (a durable one)
   * lets them wait for company while that is several round trips' worth, so CPU-bound work is fetched and acked in
   * batches instead of one statement per evaluation; a broker with no round trips has nothing to pace and need not
   * implement it. Called synchronously and often: it must be cheap and must not call back into the broker. It may
   * stop counting past a second (the answer is then at least that).
   *
   * `threadsFree(withinMs)`, when given, answers how many threads could start another evaluation within `withinMs`
   * (the pool's `threadsFreeWithin`): a broker that leases for its process while other processes serve the same queue
   * takes nothing while it is 0, so that what it leases does not wait here behind work (an item running far past
   * its prediction, say) while another process's thread idles. The same rules for the call.
   */
  paceBy?(workAheadMs: () => number, threadsFree?: (withinMs: number) => number): void;

  /**
   * Counts by state. A shared broker reports the whole cluster's counts, and may answer with a promise.
   */
  stats(): MaybePromise<BrokerStats>;

  /** Holds this broker's dequeues (they wait, keeping their timeouts); enqueues and leases go on. */
  pause(): void;
  /** Ends a pause and serves the waiting dequeues in arrival order. */
  resume(): void;

  /**
   * Enables or disables. Disabling in memory flushes everything held and answers with it; a shared broker disables
   * this process's use of it (waiting dequeues reject with `BrokerDisabledError`) and answers with what this process
   * gave back. Throws `InvalidArgumentError` for a non-boolean.
   */
  setEnabled(enabled: boolean): MaybePromise<Evaluation[]>;

  /**
   * Rejects the `done` of every outcome this process waits for and that is not known yet, with `reason(evaluation)`,
   * leaving the evaluations where they are. An engine that stops calls it. In memory nothing will finish them any
   * more; in a shared broker another process may, but nobody here waits any longer.
   */
  rejectOutcomes(reason: (evaluation: Evaluation) => Error): void;
}
