/**
 * The life of one run once it has been created: execute an attempt, wait for it, retry it with backoff, cancel it,
 * and end it in exactly one final status (`finishRun`, logged once, and only once the execution has physically
 * stopped is its slot freed). The scheduler keeps claims, the due calendar, the work cycle and the ticker, and
 * answers what a run needs of them through `RunHost`.
 */
import { Backoff } from '../backoff.js';
import type { Clock } from '../clock.js';
import { describeValue, InvalidStateError, RunCanceledError, UserCodeError } from '../errors.js';
import type { TypedEmitter } from '../events.js';
import type { SlotTable } from '../slots/slot-table.js';
import { RunPhase, type ActiveRun } from './active-run.js';
import { isPromiseLike, settle, type MaybePromise } from './maybe-promise.js';
import type { TaskSchedulerEvents } from './scheduler-events.js';
import type { SchedulerMetrics, SchedulerOperation } from './scheduler-metrics.js';
import type { ResolvedTaskSchedulerOptions } from './scheduler-options.js';
import { taskDefaults } from './task.js';
import { RunStatus, type FinalRunStatus, type RunEnding, type RunPromise, type RunResult } from './types.js';

/** What a run needs of its scheduler. */
export interface RunHost {
  readonly events: TypedEmitter<TaskSchedulerEvents>;
  readonly options: ResolvedTaskSchedulerOptions;
  readonly clock: Clock;
  readonly slots: SlotTable;
  readonly metrics: SchedulerMetrics;
  /** For a settle callback that threw: an internal error, reported. */
  readonly internalHandler: (error: unknown) => void;
  internal(error: unknown): void;
  latestNow(): number;
  write(run: ActiveRun, status: RunStatus, when: number, error: Error | undefined, value: unknown, attempt?: number): void;
  canceledError(run: ActiveRun): RunCanceledError;
  reportError(taskId: string, operation: SchedulerOperation, error: unknown, facts: Record<string, unknown>): void;
  /** The run is still its task's under the current claim. */
  isCurrent(run: ActiveRun): boolean;
  /** The scheduler may start work (not stopping or stopped). */
  canRun(): boolean;
  freeSlot(run: ActiveRun): void;
  /** A retry claimed the run's slot again. */
  slotReclaimed(): void;
  /** The run has ended and stopped: the scheduler's bookkeeping, and the runner's next due run. */
  runStopped(run: ActiveRun, status: FinalRunStatus, error: Error | undefined, value: unknown): void;
}

/** `wait()` rejected with `RunCanceledError`. */
const CANCELED = Symbol('canceled');
type AttemptOutcome = RunResult | typeof CANCELED;

export class RunLifecycle {
  readonly #host: RunHost;

  constructor(host: RunHost) {
    this.#host = host;
  }

  /** Hands one attempt to the executor. */
  execute(run: ActiveRun): void {
    run.phase = RunPhase.EXECUTING;
    run.attempt++;
    const queued = run.run!;
    const now = this.#host.latestNow();
    let delayMs = 0;
    if (run.attempt === 1) {
      run.handedAt = now;
      delayMs = now - queued.runAt;
    }
    this.#host.write(run, RunStatus.STARTED, now, undefined, undefined);
    if (this.#host.events.hasListeners('task:run:start')) {
      this.#host.events.emit('task:run:start', {
        taskId: queued.taskId,
        runId: queued.runId,
        scheduledFor: queued.scheduledFor,
        runAt: queued.runAt,
        attempt: run.attempt,
        slot: run.slot,
        delayMs,
      });
    }
    if (run.canceled) {
      // A listener canceled it before it reached the executor.
      this.end(run, RunStatus.CANCELED, this.#host.canceledError(run), undefined, undefined);
      return;
    }
    const desiredState = this.#host.options.desiredState;
    if (desiredState.startRun === undefined) {
      this.#handOver(run);
      return;
    }
    // A shared store records the start (fenced by the claim) before the attempt may begin: a start it refuses never
    // runs, and one it recorded is known to whoever settles the run after this process is lost.
    let gate: MaybePromise<void>;
    try {
      gate = desiredState.startRun(queued.taskId, queued.runId, run.attempt, now);
    } catch (error) {
      this.#executeFailed(run, error);
      return;
    }
    const attempt = run.attempt;
    settle(
      gate,
      () => {
        if (run.phase !== RunPhase.EXECUTING || run.attempt !== attempt) return;
        if (run.canceled) this.end(run, RunStatus.CANCELED, this.#host.canceledError(run), undefined, undefined);
        else this.#handOver(run);
      },
      (error) => {
        if (run.phase === RunPhase.EXECUTING && run.attempt === attempt) this.#executeFailed(run, error);
      },
      this.#host.internalHandler,
    );
  }

  /** The attempt goes to the executor. */
  #handOver(run: ActiveRun): void {
    const queued = run.run!;
    let answer: RunPromise | PromiseLike<RunPromise>;
    try {
      answer = this.#host.options.executor.execute(queued, {
        task: run.task,
        slot: { table: this.#host.slots, slot: run.slot, generation: run.generation },
        attempt: run.attempt,
        ...(run.attempt === 1 ? { started: (at: number) => this.#runStarted(run, at) } : {}),
      });
    } catch (error) {
      this.#executeFailed(run, error);
      return;
    }
    if (isPromiseLike(answer) && !isRunPromise(answer)) {
      const attempt = run.attempt;
      settle(
        answer,
        (promise) => {
          // Only this answer can end the attempt while it is pending; the check keeps a late answer harmless.
          if (run.phase === RunPhase.EXECUTING && run.attempt === attempt) this.#executing(run, promise);
          else if (isRunPromise(promise)) this.#cancelPromise(run, promise);
        },
        (error) => {
          if (run.phase === RunPhase.EXECUTING && run.attempt === attempt) this.#executeFailed(run, error);
        },
        this.#host.internalHandler,
      );
      return;
    }
    this.#executing(run, answer);
  }

  /** Could not even begin: as a failed attempt, retryable (InfluxDB's scheduler left a "TODO(mr): retry?" here). */
  #executeFailed(run: ActiveRun, error: unknown): void {
    const queued = run.run!;
    this.#host.reportError(queued.taskId, 'execute', error, { runId: queued.runId });
    this.#attemptEnded(run, { error: toError(error), retryable: true }, undefined);
  }

  /** The executor's `RunPromise` for the current attempt: wait for it (cancel it first if the run was canceled). */
  #executing(run: ActiveRun, promise: unknown): void {
    if (!isRunPromise(promise)) {
      this.#executeFailed(run, new InvalidStateError(`Expected execute() to return a RunPromise, got ${describeValue(promise)}`));
      return;
    }
    run.promise = promise;
    // Canceled from inside execute() (a release by re-entrant code), or while its answer was on its way: the cancel
    // could not reach the promise yet.
    if (run.canceled) this.#cancelPromise(run, promise);
    let waiting: Promise<RunResult>;
    try {
      waiting = promise.wait();
    } catch (error) {
      waiting = Promise.reject(error as Error);
    }
    settle(
      waiting,
      (result) => this.#attemptEnded(run, normalizeResult(result), promise),
      (error) => this.#attemptEnded(run, isRunCanceled(error) ? CANCELED : { error: toError(error), retryable: true }, promise),
      this.#host.internalHandler,
    );
  }

  /** The first attempt's code began: the schedule delay is how late that was. */
  #runStarted(run: ActiveRun, at: number): void {
    if (run.startedAt !== undefined || run.run === undefined) return;
    run.startedAt = at;
    this.#host.metrics.scheduleDelay.observe(Math.max(0, at - run.run.runAt) / 1000);
  }

  /** An attempt's `wait()` settled: end the run, or retry it. */
  #attemptEnded(run: ActiveRun, outcome: AttemptOutcome, promise: RunPromise | undefined): void {
    if (run.phase !== RunPhase.EXECUTING) return;
    const stopped = this.#physicalStop(promise);
    if (outcome === CANCELED || (run.canceled && outcome.error !== undefined)) {
      this.end(run, RunStatus.CANCELED, this.#host.canceledError(run), stopped, undefined);
    } else if (outcome.error === undefined) {
      this.end(run, RunStatus.SUCCESS, undefined, stopped, outcome.value);
    } else if (
      outcome.retryable === true &&
      run.attempt <= (run.task.retry ?? taskDefaults.retry) &&
      this.#host.isCurrent(run) &&
      this.#host.canRun()
    ) {
      run.phase = RunPhase.STOPPING_ATTEMPT;
      const error = outcome.error;
      this.#afterStop(stopped, () => this.#retryAfterStop(run, error));
    } else {
      this.end(run, RunStatus.FAILED, outcome.error, stopped, undefined);
    }
  }

  /** The failed attempt has stopped: free its slot generation, claim the slot again and wait out the backoff. */
  #retryAfterStop(run: ActiveRun, error: Error): void {
    this.#host.freeSlot(run);
    if (run.canceled || !this.#host.isCurrent(run) || !this.#host.canRun()) {
      this.end(run, RunStatus.CANCELED, this.#host.canceledError(run), undefined, undefined);
      return;
    }
    const generation = this.#host.slots.claim(run.slot);
    if (generation < 0) {
      const taken = new InvalidStateError(`Expected runner slot ${run.slot} to be idle between attempts, but it was taken`);
      this.end(run, RunStatus.FAILED, taken, undefined, undefined);
      return;
    }
    run.generation = generation;
    run.holdsSlot = true;
    this.#host.slotReclaimed();
    run.backoff ??= new Backoff(this.#host.options.backoff, { clock: this.#host.clock });
    const delayMs = run.backoff.nextDelay();
    run.phase = RunPhase.BACKOFF;
    this.#host.write(run, RunStatus.SCHEDULED, this.#host.latestNow(), error, undefined, run.attempt + 1);
    this.#host.metrics.retries.inc();
    if (this.#host.events.hasListeners('task:run:retry')) {
      this.#host.events.emit('task:run:retry', { taskId: run.task.id, runId: run.run!.runId, attempt: run.attempt + 1, delayMs, error });
    }
    if (run.phase !== RunPhase.BACKOFF) return; // canceled by a listener
    run.timer = this.#host.clock.setTimer(() => {
      run.timer = undefined;
      if (run.phase !== RunPhase.BACKOFF || run.canceled) return;
      try {
        this.execute(run);
      } catch (inner) {
        this.#host.internal(inner);
      }
    }, delayMs);
  }

  cancel(run: ActiveRun): void {
    if (run.canceled || run.phase === RunPhase.ENDING) return;
    run.canceled = true;
    // The thread sees this in shared memory, without a message.
    if (run.holdsSlot) this.#host.slots.cancel(run.slot, run.generation);
    if (run.phase === RunPhase.EXECUTING) {
      if (run.promise !== undefined) this.#cancelPromise(run, run.promise);
    } else if (run.phase === RunPhase.BACKOFF) {
      if (run.timer !== undefined) this.#host.clock.clearTimer(run.timer);
      run.timer = undefined;
      this.end(run, RunStatus.CANCELED, this.#host.canceledError(run), undefined, undefined);
    }
    // CREATING and STOPPING_ATTEMPT see `canceled` when they continue.
  }

  #cancelPromise(run: ActiveRun, promise: RunPromise): void {
    try {
      promise.cancel();
    } catch (error) {
      this.#host.reportError(run.task.id, 'cancel', error, { runId: run.run?.runId });
    }
  }

  /**
   * The final status is decided: `finishRun`, log it (once), then free the slot when the execution has stopped.
   * A `finishRun` failure turns a success into `failed`, as InfluxDB `scheduler.go` `executeAndWait` does: the run
   * could not be recorded.
   */
  end(run: ActiveRun, status: FinalRunStatus, error: Error | undefined, stopped: PromiseLike<void> | undefined, value: unknown): void {
    if (run.phase === RunPhase.ENDING) return;
    run.phase = RunPhase.ENDING;
    const queued = run.run!;
    const done = (finishFailed: boolean, finishError: unknown): void => {
      let final = status;
      let cause = error;
      if (finishFailed) {
        this.#host.reportError(queued.taskId, 'finish_run', finishError, { runId: queued.runId });
        if (final === RunStatus.SUCCESS) {
          final = RunStatus.FAILED;
          cause = toError(finishError);
        }
      }
      const now = this.#host.latestNow();
      this.#host.write(run, final, now, cause, value);
      // An executor that never said when the run began: it began when it was handed over.
      if (run.startedAt === undefined && run.handedAt !== undefined) this.#runStarted(run, run.handedAt);
      this.#host.metrics.runEnded(final, run.startedAt === undefined ? undefined : now - run.startedAt);
      this.#afterStop(stopped, () => this.#host.runStopped(run, final, cause, value));
    };
    let finishing: MaybePromise<void>;
    const ending: RunEnding =
      error === undefined && value === undefined
        ? { status, when: this.#host.latestNow(), attempt: run.attempt }
        : { status, when: this.#host.latestNow(), attempt: run.attempt, error, value };
    try {
      finishing = this.#host.options.desiredState.finishRun(queued.taskId, queued.runId, ending);
    } catch (finishError) {
      done(true, finishError);
      return;
    }
    settle(finishing, () => done(false, undefined), (finishError) => done(true, finishError), this.#host.internalHandler);
  }

  #physicalStop(promise: RunPromise | undefined): PromiseLike<void> | undefined {
    if (promise?.finished === undefined) return undefined;
    try {
      const finished = promise.finished();
      return isPromiseLike(finished) ? finished : undefined;
    } catch (error) {
      this.#host.internal(error);
      return undefined;
    }
  }

  /** Runs `next` once the execution has physically stopped (at once when there is nothing to wait for). */
  #afterStop(stopped: PromiseLike<void> | undefined, next: () => void): void {
    // A rejected `finished()` still means the execution is over.
    settle<void>(stopped, next, next, this.#host.internalHandler);
  }
}

function isRunPromise(value: unknown): value is RunPromise {
  return value !== null && typeof value === 'object' && typeof (value as { wait?: unknown }).wait === 'function';
}

function isRunCanceled(error: unknown): boolean {
  return error instanceof RunCanceledError || (error as { code?: unknown } | null)?.code === 'ERR_RUN_CANCELED';
}

export function toError(value: unknown): Error {
  if (value instanceof Error) return value;
  return new UserCodeError(`Expected an Error, got ${describeValue(value)}`, { cause: value });
}

function normalizeResult(result: unknown): RunResult {
  if (result === null || typeof result !== 'object') return {};
  const { error, retryable, value } = result as RunResult;
  if (error === undefined || error === null) return value === undefined ? {} : { value };
  return { error: toError(error), retryable: retryable === true };
}
