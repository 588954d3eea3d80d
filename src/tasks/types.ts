/**
 * The interfaces of the task scheduler, after InfluxDB's `task/backend/scheduler.go` (names camelCased, times in
 * epoch milliseconds). The scheduler is "dumb": it tells the desired state what time it thinks it is, and the
 * desired state creates the run that is due (or says when the next one will be).
 */
import type { SlotTable } from '../slots/slot-table.js';
import type { MaybePromise } from './maybe-promise.js';
import type { Task } from './task.js';

export type { MaybePromise } from './maybe-promise.js';

/** A run that has been assigned an id, but whose execution has not necessarily started. */
export interface QueuedRun {
  readonly taskId: string;
  readonly runId: string;
  /** The scheduled time: the "now" the run computes for. */
  readonly scheduledFor: number;
  /** When it is due for dispatch: `scheduledFor + offset` for a scheduled run, the request time for a manual one. */
  readonly runAt: number;
  /**
   * Attempts the run made before it was handed out: a run resumed after the process that ran it was lost (a shared
   * store), whose lost attempt counts against its `retry`. Absent: 0, the run has not started yet.
   */
  readonly attempts?: number;
}

/** How a run ended, as the scheduler tells `finishRun` (a store may record the final status with it, at once). */
export interface RunEnding {
  readonly status: FinalRunStatus;
  /** The scheduler's time of the end. */
  readonly when: number;
  /** Attempts started. */
  readonly attempt: number;
  readonly error?: Error;
  /** The result value of a successful run. */
  readonly value?: unknown;
}

/** What `createNextRun` made: the run, and when the next one is due (`<= now` while a backlog remains). */
export interface RunCreation {
  readonly created: QueuedRun;
  readonly nextDue: number;
}

/**
 * Persists the desired state of runs. Either method may return a value or a promise; the scheduler handles both,
 * and calls into one task serially (never two `createNextRun` of one task at once).
 */
export interface DesiredState {
  /**
   * Creates the next run of the task that is due at `now`, applying the task's catch-up policy; manual runs come
   * before scheduled ones. Throws (or rejects with) `RunNotYetDueError` carrying `dueAt` when none is due.
   */
  createNextRun(taskId: string, now: number): MaybePromise<RunCreation>;
  /**
   * The run is no longer intended to be executed: called once after every run ends (success, failure or cancel),
   * before its final status is logged. `ending` says how it ended, so that a shared store can record the end and
   * move its progress in one write; the final `updateRunState` follows either way.
   */
  finishRun(taskId: string, runId: string, ending?: RunEnding): MaybePromise<void>;
  /**
   * Optional: records that attempt `attempt` of a run begins, before it is handed to the executor, which waits for
   * the answer (a shared store fences it by its claim: a start it refuses never runs). A rejection is a failed
   * attempt, retried like one while the task is still claimed. Absent: attempts begin at once.
   */
  startRun?(taskId: string, runId: string, attempt: number, now: number): MaybePromise<void>;
  /**
   * Optional: queues a manual run for `scheduledFor`, ahead of scheduled runs (`TaskScheduler.forceRun`). Throws
   * `DuplicateRunError` when a run for that time is queued or in flight.
   */
  forceRun?(taskId: string, scheduledFor: number, now: number): MaybePromise<QueuedRun>;
}

/** How an attempt ended. `error` absent means success. */
export interface RunResult {
  readonly error?: Error;
  /** The failure is transient: the scheduler retries it while the task's `retry` allows. */
  readonly retryable?: boolean;
  readonly value?: unknown;
}

/** An execution in progress. */
export interface RunPromise {
  run(): QueuedRun;
  /** Same result for every caller; rejects with `RunCanceledError` after `cancel()`. */
  wait(): Promise<RunResult>;
  /** Idempotent; a no-op once `wait()` settled. */
  cancel(): void;
  /**
   * Optional: resolves when the execution has physically stopped (its thread returned or was terminated). Absent:
   * `wait()` settling means stopped. The scheduler frees the run's slot only then, so a thread that ignores a
   * cancel for a while still counts against `maxConcurrency`.
   */
  finished?(): Promise<void>;
}

/** The runner slot a run holds, for the executor's thread: `start(slot, generation)`, then poll `isCanceled`. */
export interface RunSlot {
  readonly table: SlotTable;
  readonly slot: number;
  readonly generation: number;
}

export interface ExecuteContext {
  readonly task: Task;
  readonly slot: RunSlot;
  /** 1 for the first attempt, 2 for the first retry, … */
  readonly attempt: number;
  /**
   * An executor that queues runs (the pool executor: a run may wait for a free thread) calls this when the run's
   * code begins, with the scheduler clock's time, so that the schedule delay and the run's duration count from the
   * start of the work rather than from the hand-off. An executor that never calls it has its runs start at the
   * hand-off.
   */
  readonly started?: (at: number) => void;
}

/**
 * Begins executing runs. A user's executor may ignore `context`. It may answer with the `RunPromise` or with a
 * promise of one (a durable or remote executor is async); the run counts as executing, and a cancel reaches the
 * `RunPromise` as soon as it comes. An answer that rejects is a failed attempt, retried like one.
 */
export interface Executor {
  execute(run: QueuedRun, context: ExecuteContext): RunPromise | PromiseLike<RunPromise>;
}

/**
 * A manual run (`forceRun`, `retryRun`) and its outcome. `done` resolves with the run's `RunResult` when it ends
 * `success`, and rejects with its error when it ends `failed` (the last attempt's) and with `RunCanceledError` when
 * it ends `canceled`. Reading `done` and never awaiting it is safe: its rejection is not reported as unhandled.
 * `done` is not enumerable: a copy of the run (`{ ...run }`, JSON) has the `QueuedRun` fields only.
 */
export interface ForcedRun extends QueuedRun {
  readonly done: Promise<RunResult>;
}

/** Run statuses as logged. A run logs exactly one final status: `success`, `failed` or `canceled`. */
export const RunStatus = Object.freeze({
  SCHEDULED: 'scheduled',
  STARTED: 'started',
  SUCCESS: 'success',
  FAILED: 'failed',
  CANCELED: 'canceled',
} as const);
export type RunStatus = (typeof RunStatus)[keyof typeof RunStatus];
export type FinalRunStatus = typeof RunStatus.SUCCESS | typeof RunStatus.FAILED | typeof RunStatus.CANCELED;

export function isFinalStatus(status: RunStatus): status is FinalRunStatus {
  return status === RunStatus.SUCCESS || status === RunStatus.FAILED || status === RunStatus.CANCELED;
}

/**
 * Facts that come with a state change. `scheduled` is logged when a run is created and again before each retry
 * (with the `attempt` about to start and the `error` of the one before); `started` once per attempt.
 */
export interface RunStateDetails {
  readonly scheduledFor: number;
  readonly runAt: number;
  readonly attempt: number;
  readonly error?: Error;
  /** The result value of a successful run. */
  readonly value?: unknown;
}

/** One entry of a run's history. */
export interface RunStateChange {
  readonly status: RunStatus;
  readonly when: number;
  readonly attempt: number;
  readonly error?: Error;
  /** The engine process that made the change (a shared run log: the process that ran the attempt). */
  readonly process?: string;
}

/** What a queryable run log knows about one run. */
export interface RunRecord {
  readonly taskId: string;
  readonly runId: string;
  readonly scheduledFor: number;
  readonly runAt: number;
  /** The latest status. */
  readonly status: RunStatus;
  /** The final status, once the run has ended. */
  readonly finalStatus: FinalRunStatus | undefined;
  /** Attempts started. */
  readonly attempts: number;
  /** The error of the final failure, or of the latest failed attempt. */
  readonly error: Error | undefined;
  readonly history: readonly RunStateChange[];
  /** The value the handler returned (a shared run log keeps it; the in-memory one does not). */
  readonly value?: unknown;
  /** The process that ran each attempt, in attempt order (a shared run log). */
  readonly processes?: readonly string[];
}

/** Records run state changes. Either method may return a value or a promise; a failing write is logged, not fatal. */
export interface LogWriter {
  updateRunState(task: Task, runId: string, when: number, status: RunStatus, details?: RunStateDetails): MaybePromise<void>;
  /** Optional: looks a run up (`TaskScheduler.retryRun` needs it). */
  findRun?(taskId: string, runId: string): MaybePromise<RunRecord | undefined>;
}
