/**
 * A scheduling worker: Nomad `worker.go` `Worker.run` on the main thread. Dequeue (backoff on errors, reset on
 * success) → on shutdown nack and exit → dispatch to the pool, where the thread waits for its replica to reach
 * the evaluation's index and runs the scheduler → submit the plan (`SubmitPlan`), fenced by the delivery; re-run
 * against the refreshed state while the plan is partly rejected → ack on success, nack on error. A worker holds one
 * slot of the slot table; the thread reads cancel and writes heartbeats there.
 *
 * It talks to the broker and the plan committer through the backend seams only. Their answers may be promises (a
 * durable backend); the worker waits on one only where it is one. The loop runs on callbacks (the broker's dequeue
 * callback, the pool's `dispatchWith`): on the in-memory path a delivery whose scheduler wrote nothing goes from the
 * thread's answer to its ack and the next dispatch in one call, with no promise made per evaluation.
 */
import type { BrokerBackend } from '../backend/broker-backend.js';
import type { ChangeFeed, PlanBackend, PlanOutcome } from '../backend/state-backend.js';
import { Backoff } from '../backoff.js';
import type { DeliveryEnd, EngineTracing, ProcessSpan } from '../observability/tracing.js';
import type { Delivery } from '../broker/broker-types.js';
import type { Evaluation } from '../broker/evaluation.js';
import type { Clock } from '../clock.js';
import {
  AbortedError,
  CanceledError,
  InvalidPlanError,
  InvalidStateError,
  PlanAttemptsExhaustedError,
  TickpoolError,
} from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Outcome, StartObserver, ThreadPool } from '../pool/thread-pool.js';
import type { WireEvaluation } from '../protocol/messages.js';
import { SlotState, ThreadPhase } from '../slots/slot-layout.js';
import type { SlotTable } from '../slots/slot-table.js';
import { isPromiseLike } from '../tasks/maybe-promise.js';
import type { SchedulerResult } from './user-functions.js';
import { sealedOf } from '../state/sealed.js';
import { adoptValue } from '../state/values.js';
import type { RefusedOperation, WorkerMetrics } from './worker-metrics.js';
import { WorkerActivity, WorkerStatus, workerTransitions, type WorkerActivityValue, type WorkerStatusValue } from './worker-status.js';

export interface WorkerDeps {
  readonly id: number;
  readonly broker: BrokerBackend;
  readonly pool: ThreadPool;
  readonly applier: PlanBackend;
  /** The state the applier commits to: its index is an outcome's `index` when the evaluation wrote nothing. */
  readonly state: Pick<ChangeFeed, 'index'>;
  readonly slots: SlotTable;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: WorkerMetrics;
  readonly backoff: Backoff;
  /** Evaluation types with a registered scheduler. */
  readonly types: readonly string[];
  readonly dequeueTimeoutMs: number;
  readonly syncLimitMs: number;
  readonly maxPlanAttempts: number;
  /**
   * An aborted delivery could not be removed because it is no longer current (its nack deadline fired and it went
   * back to the broker): the abort must reach the evaluation wherever it is now.
   */
  readonly abortLost?: (evaluationId: string, cause: unknown) => void;
  /** Told of each delivery the worker takes and lets go of (the engine's `WorkerSet` finds holders by token). */
  readonly deliveries?: DeliveryIndex;
  /** The engine's spans (`process`, `plan.apply`), when it has them. */
  readonly tracing?: EngineTracing;
}

/** Told by a worker when it takes a delivery and when it lets go of it. */
export interface DeliveryIndex {
  held(token: string, worker: SchedulingWorker): void;
  released(token: string): void;
}

/** The delivery a worker holds right now. */
export interface CurrentDelivery {
  readonly evaluation: Evaluation;
  readonly token: string;
  generation: number;
  /** Its caller gave up on it (`abortCurrent`): when the thread lets go it is removed, not redelivered. */
  aborted?: boolean;
  abortCause?: unknown;
  /** Heartbeats seen when the nack deadline was last extended. */
  heartbeatsSeen: number;
  /** When this attempt's scheduler was seen to start on a thread (clock ms), if it has. */
  startedAt: number | undefined;
  /** The delivery's `process` span, once its first attempt started while a provider records. */
  trace?: ProcessSpan | undefined;
  /** How it ended (set by the ack, nack, give-back, fail or remove that ended it), for its span. */
  end?: DeliveryEnd | undefined;
  /** Writes its plans committed and had refused, for its span. */
  committed?: number;
  refused?: number;
}

/** `#submit` sent the next attempt: the delivery goes on. */
const RETRY = Symbol('retry');

export class SchedulingWorker implements StartObserver {
  readonly #deps: WorkerDeps;
  readonly #slot: number;
  readonly #shutdown = new AbortController();
  /** Mirrors `#shutdown.signal.aborted`: the loop checks it per evaluation, and AbortSignal's getter is not free. */
  #shuttingDown = false;
  #status: WorkerStatusValue = WorkerStatus.STARTING;
  #activity: WorkerActivityValue = WorkerActivity.IDLE;
  #current: CurrentDelivery | undefined;
  #resume: (() => void) | undefined;
  /**
   * Aborted to interrupt the dequeue the worker is blocked in (on pause, so that it takes effect without taking one
   * more evaluation; and on stop). One controller serves every dequeue until it is used: creating one and wiring
   * listeners per dequeue cost microseconds on the dispatch path.
   */
  #interrupt = new AbortController();
  #done: Promise<void> | undefined;
  #loopEnded: (() => void) | undefined;
  #ended = false;
  /** The current delivery's attempt (1, plus one per plan refresh), the index it waits for, when its scheduling began. */
  #attempt = 0;
  #minIndex = 0;
  #schedulingStarted = 0;
  #processed = 0;
  #givenBack = 0;

  constructor(deps: WorkerDeps) {
    this.#deps = deps;
    this.#slot = deps.slots.allocate(1);
  }

  get id(): number {
    return this.#deps.id;
  }

  get status(): WorkerStatusValue {
    return this.#status;
  }

  /** What the worker is doing; while a thread runs its evaluation, read from the slot's phase in shared memory. */
  get activity(): WorkerActivityValue {
    if (this.#activity === WorkerActivity.SCHEDULING && this.#deps.slots.phase(this.#slot) === ThreadPhase.WAITING_FOR_INDEX) {
      return WorkerActivity.WAITING_FOR_INDEX;
    }
    return this.#activity;
  }

  get current(): CurrentDelivery | undefined {
    return this.#current;
  }

  get slot(): number {
    return this.#slot;
  }

  get processed(): number {
    return this.#processed;
  }

  /** Evaluations this worker gave or nacked back into the broker while stopping (the engine's `engine:stop` `requeued`). */
  get givenBack(): number {
    return this.#givenBack;
  }

  /** Starts the loop; resolves once it ended (after `stop()`). */
  start(): Promise<void> {
    if (this.#status === WorkerStatus.STOPPED) return Promise.resolve();
    if (this.#done === undefined) {
      this.#done = new Promise<void>((resolve) => (this.#loopEnded = resolve));
      if (this.#status === WorkerStatus.STARTING) this.#setStatus(WorkerStatus.RUNNING);
      this.#next();
    }
    return this.#done;
  }

  /** Takes effect at the next dequeue: the evaluation in hand is finished first. Before start, it starts paused. */
  pause(): void {
    if (this.#status !== WorkerStatus.RUNNING && this.#status !== WorkerStatus.STARTING) return;
    this.#setStatus(WorkerStatus.PAUSED);
    this.#interruptDequeue();
  }

  resume(): void {
    if (this.#status !== WorkerStatus.PAUSED) return;
    this.#setStatus(WorkerStatus.RUNNING);
    this.#resumeLoop();
  }

  /** A paused loop goes on (to find the worker stopping, or running again). */
  #resumeLoop(): void {
    const resume = this.#resume;
    this.#resume = undefined;
    resume?.();
  }

  /** Asks the loop to end; a waiting dequeue is aborted, the evaluation in hand is finished or nacked. */
  stop(): Promise<void> {
    if (this.#status !== WorkerStatus.STOPPING && this.#status !== WorkerStatus.STOPPED) this.#setStatus(WorkerStatus.STOPPING);
    this.#shuttingDown = true;
    this.#shutdown.abort();
    this.#interruptDequeue();
    this.#resumeLoop();
    if (this.#done === undefined) {
      // Never started (the engine stopped while its threads booted): there is no loop to wind down.
      if (this.#status !== WorkerStatus.STOPPED) this.#setStatus(WorkerStatus.STOPPED);
      return Promise.resolve();
    }
    return this.#done;
  }

  /**
   * Gives up the evaluation in hand for good: the thread sees a cancel in shared memory, and once it lets go the
   * evaluation is removed from the broker (its outcome rejects with `AbortedError`) instead of nacked. A plan already
   * submitted still commits, and then the evaluation is acked: the abort came too late. False when this worker
   * does not hold that delivery.
   */
  abortCurrent(token: string, cause?: unknown): boolean {
    const current = this.#current;
    if (current === undefined || current.token !== token) return false;
    current.aborted = true;
    current.abortCause = cause;
    if (current.generation >= 0) this.#deps.pool.cancel(this.#slot, current.generation);
    return true;
  }

  /**
   * Cancels the evaluation in hand (the thread sees it in shared memory): once its thread lets go, the delivery is
   * given back, whatever the scheduler returned. False when there is nothing to cancel: no delivery, or its
   * scheduler already returned and its plan is being committed (it then commits).
   */
  cancelCurrent(): boolean {
    const current = this.#current;
    if (current === undefined) return false;
    return this.#deps.pool.cancel(this.#slot, current.generation);
  }

  /**
   * The nack deadline of this delivery is due (the broker's `extendNackDeadline`): true to extend it from now, the
   * time its work started to count from there, false to let it fire. A deadline counts from the start of the work:
   * an attempt still waiting for a thread is not late, however long it waits, and one that started counts from
   * its start. A heartbeat since the last look is progress now.
   */
  deadlineProgress(token: string): boolean | number {
    const current = this.#current;
    if (current === undefined || current.token !== token) return false;
    if (this.consumeHeartbeat(token)) return true;
    const { slots, clock } = this.#deps;
    if (slots.generation(this.#slot) === current.generation) {
      if (slots.state(this.#slot) === SlotState.CLAIMED) return true;
      // Its scheduler has returned: the result waits in its thread's outbox, maybe behind a long item that blocks the
      // thread. It is no hang of its own; should that thread die, the pool runs the item again.
      if (slots.state(this.#slot) === SlotState.RUNNING && slots.phase(this.#slot) === ThreadPhase.FINISHED) return true;
    }
    // Started, and the pool has not told this worker yet: count from the thread's own stamp when the pool can read
    // it on this clock, else from now.
    current.startedAt ??= this.#deps.pool.startedAt(this.#slot, current.generation) ?? clock.now();
    return current.startedAt;
  }

  /** The pool saw this worker's item start on a thread. */
  itemStarted(at: number): void {
    const current = this.#current;
    if (current === undefined) return;
    current.startedAt = at;
    const tracing = this.#deps.tracing;
    if (tracing === undefined) return;
    if (current.trace !== undefined) current.trace.attempts++;
    else if (tracing.enabled) current.trace = tracing.startProcess(current.evaluation, at);
  }

  /** How the current delivery ended, for its span. */
  #ending(end: DeliveryEnd, error?: unknown): void {
    const current = this.#current;
    if (current === undefined) return;
    current.end = end;
    if (error !== undefined && current.trace !== undefined) current.trace.error = error;
  }

  /** Heartbeats the thread wrote since the deadline was last extended: true means "extend". */
  consumeHeartbeat(token: string): boolean {
    const current = this.#current;
    if (current === undefined || current.token !== token) return false;
    const seen = this.#deps.slots.heartbeats(this.#slot);
    if (seen <= current.heartbeatsSeen) return false;
    current.heartbeatsSeen = seen;
    return true;
  }

  /**
   * Looks for the next evaluation: the loop of Nomad's `Worker.run`, driven by callbacks instead of awaits. Every way
   * out of it ends where the loop continues: an evaluation taken (its processing calls `#next` again once it let go
   * of it), a dequeue waiting in the broker (its callback), a pause (`resume`), a backoff (its timer), or the end.
   * No promise is made per evaluation on the in-memory path: a delivery's end calls the next dequeue directly.
   */
  #next(): void {
    if (this.#shuttingDown) {
      this.#end();
      return;
    }
    if (this.#status === WorkerStatus.PAUSED) {
      this.#activity = WorkerActivity.IDLE;
      this.#resume = this.#continue;
      return;
    }
    const { broker, types, dequeueTimeoutMs } = this.#deps;
    if (types.length === 0) {
      // No scheduler is registered (an engine for tasks only): there is nothing to dequeue, ever. Asking the broker
      // would fail on every call (no types) and back off forever.
      this.#activity = WorkerActivity.IDLE;
      this.#shutdown.signal.addEventListener('abort', () => this.#end(), { once: true });
      return;
    }
    this.#activity = WorkerActivity.DEQUEUING;
    let ready: Delivery | undefined;
    try {
      ready = broker.tryDequeue(types);
    } catch (error) {
      this.#dequeueFailed(error);
      return;
    }
    if (ready !== undefined) {
      this.#deps.backoff.reset();
      this.#take(ready);
      return;
    }
    // When an evaluation comes, its processing starts inside the broker's callback: it is on its way to a thread
    // before the enqueue that made it available returns.
    broker.dequeueWith(types, dequeueTimeoutMs, this.#interrupt.signal, this.#onDequeued);
  }

  readonly #continue = (): void => this.#next();

  readonly #onDequeued = (error: Error | undefined, delivery: Delivery | undefined): void => {
    if (error !== undefined) {
      this.#dequeueFailed(error);
      return;
    }
    this.#deps.backoff.reset();
    if (delivery === undefined) this.#next();
    else this.#take(delivery);
  };

  #dequeueFailed(error: unknown): void {
    if (this.#shuttingDown) {
      this.#end();
      return;
    }
    // pause() aborted the wait (and resume() may have come since): nothing went wrong. The interrupt is the only
    // signal a dequeue here waits with, so an AbortedError can only be that.
    if (error instanceof AbortedError) {
      this.#next();
      return;
    }
    this.#deps.logger.warn({ err: error, worker: this.id }, 'failed to dequeue evaluation');
    this.#activity = WorkerActivity.BACKOFF;
    this.#deps.backoff.wait(this.#shutdown.signal).then(
      (stopped) => (stopped ? this.#end() : this.#next()),
      () => this.#end(),
    );
  }

  /** Starts processing a delivery at once, unless the worker is stopping: then it is given back and the loop ends. */
  #take(delivery: Delivery): void {
    if (!this.#shuttingDown) {
      this.#process(delivery.evaluation, delivery.token);
      return;
    }
    // As in Nomad `Worker.run`: a worker that finds shutdown after a dequeue gives the evaluation back (uncharged).
    const giving = this.#giveBack(delivery.evaluation, delivery.token, new CanceledError('Engine is stopping'));
    if (giving === undefined) this.#end();
    else giving.then(this.#endLoop, this.#endLoop);
  }

  readonly #endLoop = (): void => this.#end();

  #end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#activity = WorkerActivity.IDLE;
    if (this.#status !== WorkerStatus.STOPPING) this.#setStatus(WorkerStatus.STOPPING);
    this.#setStatus(WorkerStatus.STOPPED);
    this.#loopEnded?.();
  }

  /** Takes a delivery: its first attempt goes to the pool; `#onOutcome` goes on from the thread's answer. */
  #process(evaluation: Evaluation, token: string): void {
    // Only the registered `types` are dequeued, and the broker fails any other type at enqueue (`knownTypes`).
    this.#current = { evaluation, token, generation: -1, heartbeatsSeen: 0, startedAt: undefined };
    this.#deps.deliveries?.held(token, this);
    this.#attempt = 1;
    this.#minIndex = evaluation.modifyIndex ?? 0;
    this.#dispatchAttempt();
  }

  /** Sends the current attempt to the pool on this worker's slot. */
  #dispatchAttempt(): void {
    const current = this.#current!;
    const { slots } = this.#deps;
    const generation = slots.claim(this.#slot);
    if (generation < 0) {
      // An invariant broke (the slot of a worker between deliveries is idle): the evaluation goes back, not lost.
      const error = new InvalidStateError(`Expected worker ${this.id}'s slot to be idle before a dispatch`);
      this.#deps.logger.error({ err: error, worker: this.id, evalId: current.evaluation.id }, 'cannot dispatch');
      this.#endDelivery(this.#nack(current.evaluation, current.token, error));
      return;
    }
    current.generation = generation;
    // A new claim starts the slot's heartbeat count from zero: count this attempt's heartbeats from there.
    current.heartbeatsSeen = 0;
    current.startedAt = undefined;
    this.#activity = WorkerActivity.SCHEDULING;
    this.#schedulingStarted = this.#deps.metrics.startScheduling();
    this.#deps.pool.dispatchWith(
      {
        kind: 'eval',
        slot: this.#slot,
        generation,
        attempt: this.#attempt,
        evaluation: current.evaluation as unknown as WireEvaluation,
        minIndex: this.#minIndex,
        syncLimitMs: this.#deps.syncLimitMs,
      },
      this,
      this.#onOutcome,
    );
  }

  /**
   * The thread's answer to the current attempt. What ends the delivery here (no plan to commit) ends it in this call
   * on the in-memory path; a plan to commit goes on in `#submit`.
   */
  readonly #onOutcome = (outcome: Outcome): void => {
    const current = this.#current!;
    const { evaluation, token } = current;
    const { slots, metrics } = this.#deps;
    // Read before the slot is finished: a cancel of this attempt (`engine.cancel`, `stop()` past its grace, an abort)
    // left its word CANCEL, whether or not the thread saw it before it answered.
    const canceled = slots.isCanceled(this.#slot, current.generation);
    slots.finish(this.#slot, current.generation);
    metrics.endScheduling(evaluation.type, this.#schedulingStarted, outcome.status === 'ok' ? outcome.waitedMs : 0);
    // Whatever the thread answered after a cancel (it may have finished before it saw it, or ignored it and been
    // terminated), nothing of it is kept: a canceled delivery's plan never commits.
    if (this.#abortedCurrent()) return this.#endDelivery(this.#removeAborted());
    if (canceled || outcome.status === 'canceled') {
      return this.#endDelivery(this.#giveBack(evaluation, token, new CanceledError(`Evaluation ${JSON.stringify(evaluation.id)} was canceled`)));
    }
    if (outcome.status !== 'ok') return this.#endDelivery(this.#nack(evaluation, token, outcome.error));
    const plan = outcome.value;
    if (plan === undefined || plan === null) return this.#endDelivery(this.#ack(evaluation, token, undefined, this.#deps.state.index, this.#attempt));
    if (!isPlanShape(plan)) {
      return this.#endDelivery(this.#nack(evaluation, token, new InvalidPlanError('plan', 'undefined or { writes: PlanWrite[], allAtOnce?, value? }', plan)));
    }
    if (plan.writes.length === 0 && (plan.allAtOnce === undefined || typeof plan.allAtOnce === 'boolean')) {
      // Nothing to commit (a scheduler that only answers): its value is released at once, at the store's index.
      return this.#endDelivery(this.#ack(evaluation, token, plan.value, this.#deps.state.index, this.#attempt));
    }
    this.#submit(plan).then(
      (ending) => {
        if (ending !== RETRY) this.#endDelivery(ending);
      },
      (error: unknown) => {
        // #submit handles every failure of the backend; anything else is a bug, and the evaluation goes back.
        this.#deps.logger.error({ err: error, worker: this.id, evalId: evaluation.id }, 'plan submission failed');
        this.#endDelivery(this.#nack(evaluation, token, error as Error));
      },
    );
  };

  /**
   * Commits the plan of the current attempt (Nomad's `SubmitPlan`), fenced by its delivery: resolves with how the
   * delivery ends (an ack, nack, fail or remove, or nothing more to do), or `RETRY` once the next attempt was sent
   * (a partial commit: the scheduler runs again against the state that rejected it).
   */
  async #submit(plan: Exclude<SchedulerResult, undefined | void>): Promise<PromiseLike<void> | undefined | typeof RETRY> {
    const { evaluation, token } = this.#current!;
    const { metrics } = this.#deps;
    const attempt = this.#attempt;
    this.#activity = WorkerActivity.SUBMITTING;
    // Waiting in the plan queue is progress, not a hang, so the nack deadline stops meanwhile. A delivery that is no
    // longer outstanding (its deadline fired and it was redelivered, or the broker was flushed) must not commit its
    // plan at all: the evaluation belongs to its redelivery now.
    const paused = this.#holdLease('submit', evaluation, token, true);
    if (!(typeof paused === 'boolean' ? paused : await paused)) return undefined;
    // The plan is the worker's own (the pool hands out fresh copies): its values are adopted, not copied again.
    adoptWriteValues(plan.writes);
    const submitted = metrics.startSubmit();
    const trace = this.#current!.trace;
    const applySpan = trace === undefined ? undefined : this.#deps.tracing!.startPlanApply(trace, plan.writes.length);
    let result: PlanOutcome;
    try {
      result = await this.#deps.applier.submit(
        {
          writes: plan.writes,
          // Passed as returned: the applier refuses a non-boolean (a string "true" is not a partial-commit plan).
          allAtOnce: plan.allAtOnce as boolean | undefined,
          evalId: evaluation.id,
          priority: evaluation.priority,
        },
        // The commit is fenced by this delivery; a backend may ack it in the same commit.
        { evaluationId: evaluation.id, token, ack: { value: plan.value, attempts: attempt } },
      );
    } catch (error) {
      if (applySpan !== undefined) this.#deps.tracing!.endPlanApply(applySpan, undefined, error);
      if (isDeliveryRefusal(error)) {
        this.#refused('submit', evaluation, error);
        return undefined;
      }
      return this.#nack(evaluation, token, error as Error);
    } finally {
      metrics.endSubmit(submitted);
    }
    if (applySpan !== undefined) {
      const current = this.#current!;
      const counts = { committed: plan.writes.length - result.rejected.length, refused: result.rejected.length };
      current.committed = (current.committed ?? 0) + counts.committed;
      current.refused = (current.refused ?? 0) + counts.refused;
      this.#deps.tracing!.endPlanApply(applySpan, counts);
    }
    if (result.rejected.length === 0) {
      if (result.acked === true) return undefined;
      // The value of the attempt whose plan committed, released only now; an earlier attempt's is dropped.
      return this.#ack(evaluation, token, plan.value, result.index > 0 ? result.index : this.#deps.state.index, attempt);
    }
    if (this.#abortedCurrent()) return this.#removeAborted();
    if (attempt >= this.#deps.maxPlanAttempts) {
      const reason = `${result.rejected.length} of ${plan.writes.length} writes were rejected on the last attempt`;
      return this.#fail(evaluation, token, new PlanAttemptsExhaustedError(evaluation.id, attempt, reason));
    }
    // Partial commit: run the scheduler again once the thread's replica shows the state that rejected us. The re-run
    // is guarded by the nack deadline again (ack, nack and fail end the delivery without this).
    const resumed = this.#holdLease('resume', evaluation, token, false);
    if (!(typeof resumed === 'boolean' ? resumed : await resumed)) return undefined;
    this.#minIndex = Math.max(this.#minIndex, result.refreshIndex);
    metrics.planRefreshed();
    if (this.#shuttingDown) return this.#giveBack(evaluation, token, new CanceledError('Engine is stopping'));
    this.#attempt = attempt + 1;
    this.#dispatchAttempt();
    return RETRY;
  }

  /**
   * Lets go of the current delivery once its end (`ending`: the backend's answer to the ack, nack, fail or remove,
   * when it answered with a promise) is settled, then looks for the next one.
   */
  #endDelivery(ending: PromiseLike<void> | undefined): void {
    if (ending === undefined) this.#release();
    else ending.then(this.#releaseAfter, this.#releaseAfter);
  }

  readonly #releaseAfter = (): void => this.#release();

  #release(): void {
    this.#processed++;
    const { trace, evaluation, committed, refused, end } = this.#current!;
    this.#deps.tracing?.released(evaluation.id, end, trace, { committed: committed ?? 0, refused: refused ?? 0 });
    this.#deps.deliveries?.released(this.#current!.token);
    this.#current = undefined;
    this.#activity = WorkerActivity.IDLE;
    this.#next();
  }

  /**
   * Pauses (`pause`: before the plan queue) or resumes the delivery's nack deadline: true when held, false when the
   * broker refused because the delivery is no longer current (then nothing more may be done with it). A promise
   * only when the broker answered with one.
   */
  #holdLease(operation: 'submit' | 'resume', evaluation: Evaluation, token: string, pause: boolean): boolean | PromiseLike<boolean> {
    const { broker } = this.#deps;
    let answer;
    try {
      answer = pause ? broker.pauseNackTimeout(evaluation.id, token) : broker.resumeNackTimeout(evaluation.id, token);
    } catch (error) {
      this.#refused(operation, evaluation, error);
      return false;
    }
    if (!isPromiseLike(answer)) return true;
    return answer.then(
      () => true,
      (error: unknown) => {
        this.#refused(operation, evaluation, error);
        return false;
      },
    );
  }

  #ack(evaluation: Evaluation, token: string, value: unknown, index: number, attempts: number): PromiseLike<void> | undefined {
    this.#ending('acked');
    // An ack after the nack deadline fired loses to the nack: the evaluation was redelivered, nothing is lost.
    let answer;
    try {
      answer = this.#deps.broker.ack(evaluation.id, token, { value, index, attempts });
    } catch (error) {
      this.#refused('ack', evaluation, error);
      return undefined;
    }
    return isPromiseLike(answer) ? answer.then(undefined, (error: unknown) => this.#refused('ack', evaluation, error)) : undefined;
  }

  #nack(evaluation: Evaluation, token: string, reason: Error): PromiseLike<void> | undefined {
    this.#ending('nacked', reason);
    return this.#handBack('nack', evaluation, () => this.#deps.broker.nack(evaluation.id, token, reason));
  }

  /**
   * A nack or a give-back, told to the broker: a refusal is logged and counted, and one made while the engine stops
   * counts as given back once the broker took it.
   */
  #handBack(operation: 'nack' | 'give-back', evaluation: Evaluation, call: () => void | PromiseLike<void>): PromiseLike<void> | undefined {
    let answer;
    try {
      answer = call();
    } catch (error) {
      this.#refused(operation, evaluation, error);
      return undefined;
    }
    const stopping = this.#shuttingDown;
    if (!isPromiseLike(answer)) {
      if (stopping) this.#givenBack++;
      return undefined;
    }
    return answer.then(
      () => {
        if (stopping) this.#givenBack++;
      },
      (error: unknown) => this.#refused(operation, evaluation, error),
    );
  }

  /**
   * Gives the delivery back: it did not fail (canceled on request, or the engine is stopping), so the broker makes it
   * ready again at once without counting the delivery.
   */
  #giveBack(evaluation: Evaluation, token: string, reason: Error): PromiseLike<void> | undefined {
    this.#ending('given-back', reason);
    return this.#handBack('give-back', evaluation, () => this.#deps.broker.giveBack(evaluation.id, token, reason));
  }

  /** A method, not a field read: `abortCurrent` sets the flag while the delivery is out (on a thread, in the plan queue). */
  #abortedCurrent(): boolean {
    return this.#current?.aborted === true;
  }

  #removeAborted(): PromiseLike<void> | undefined {
    this.#ending('removed', this.#current?.abortCause);
    const { evaluation, token, abortCause } = this.#current!;
    const lost = (error: unknown): void => {
      this.#refused('remove', evaluation, error);
      this.#deps.abortLost?.(evaluation.id, abortCause);
    };
    let answer;
    try {
      answer = this.#deps.broker.remove(evaluation.id, token, abortCause);
    } catch (error) {
      lost(error);
      return undefined;
    }
    return isPromiseLike(answer) ? answer.then(() => undefined, lost) : undefined;
  }

  #fail(evaluation: Evaluation, token: string, reason: Error): PromiseLike<void> | undefined {
    this.#ending('failed', reason);
    // The broker logs the move to `_failed` with the reason at warn; once is enough.
    this.#deps.logger.debug({ evalId: evaluation.id, err: reason }, 'failing evaluation');
    let answer;
    try {
      answer = this.#deps.broker.fail(evaluation.id, token, reason);
    } catch (error) {
      this.#refused('fail', evaluation, error);
      return undefined;
    }
    return isPromiseLike(answer) ? answer.then(undefined, (error: unknown) => this.#refused('fail', evaluation, error)) : undefined;
  }

  /** The broker refused to end or hold a delivery (it is no longer current, or the backend failed): logged and counted. */
  #refused(operation: RefusedOperation, evaluation: Evaluation, error: unknown): void {
    this.#deps.logger.debug({ err: error, evalId: evaluation.id }, `${operation} refused`);
    this.#deps.metrics.refused(operation, (error as TickpoolError | undefined)?.code);
  }

  #interruptDequeue(): void {
    this.#interrupt.abort();
    this.#interrupt = new AbortController();
  }

  #setStatus(next: WorkerStatusValue): void {
    if (!workerTransitions[this.#status].includes(next)) {
      throw new InvalidStateError(`Expected a worker status change allowed from ${this.#status}, got ${next}`);
    }
    this.#status = next;
  }
}

/** The broker's refusals of a delivery that is no longer current: the plan of such a delivery is dropped, not nacked. */
const REFUSAL_CODES: ReadonlySet<string> = new Set(['ERR_EVAL_NOT_OUTSTANDING', 'ERR_TOKEN_MISMATCH', 'ERR_NACK_TIMEOUT_REACHED']);

function isDeliveryRefusal(error: unknown): boolean {
  return error instanceof TickpoolError && REFUSAL_CODES.has(error.code);
}

function isPlanShape(value: unknown): value is Exclude<SchedulerResult, undefined | void> {
  return value !== null && typeof value === 'object' && Array.isArray((value as { writes?: unknown }).writes);
}

/**
 * Takes ownership of the values of a plan's writes (frozen in place, not copied): see `adoptValue`. A sealed value
 * (the usual case: a plan from a pool thread) is owned already, and read only where someone reads it.
 */
function adoptWriteValues(writes: readonly unknown[]): void {
  for (let i = 0; i < writes.length; i++) {
    const write = writes[i];
    if (write !== null && typeof write === 'object' && sealedOf(write) === undefined) adoptValue((write as { value?: unknown }).value);
  }
}
