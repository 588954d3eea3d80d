/**
 * Manual runs of claimed tasks (`forceRun`, InfluxDB's `RetryRun`): queued in the desired state ahead of scheduled
 * runs, with a `done` each that settles when the run ends. Making the task due, so that a free slot starts the run,
 * is the scheduler's (`due`).
 *
 * Invariant: a manual run's waiter exists before the run can start, since the scheduler may start it, and an
 * executor end it, within `due`.
 */
import { InvalidArgumentError, InvalidStateError, RunNotFoundError, TaskNotClaimedError } from '../errors.js';
import type { ClaimedTasks } from './claimed-tasks.js';
import { isPromiseLike } from './maybe-promise.js';
import { RunWaiters } from './run-waiters.js';
import type { ResolvedTaskSchedulerOptions } from './scheduler-options.js';
import type { FinalRunStatus, ForcedRun } from './types.js';

export interface ManualRunsOptions {
  readonly claims: ClaimedTasks;
  readonly options: Pick<ResolvedTaskSchedulerOptions, 'desiredState' | 'logWriter'>;
  /** The scheduler's latest time. */
  readonly latestNow: () => number;
  /** A manual run was queued for the task at claim `index` under `epoch`: it is due now. */
  readonly due: (index: number, epoch: number) => void;
}

export class ManualRuns {
  readonly #o: ManualRunsOptions;
  /** The outcomes of manual runs not yet ended. */
  readonly #waiters = new RunWaiters();

  constructor(options: ManualRunsOptions) {
    this.#o = options;
  }

  /**
   * Queues a manual run of a claimed task for `scheduledFor` (default: now). Rejects with `TaskNotClaimedError`,
   * `DuplicateRunError` (a run for that time is queued or in flight), or `InvalidStateError` when the desired state
   * has no `forceRun`.
   */
  forceRun(taskId: string, scheduledFor?: number): Promise<ForcedRun> {
    try {
      const { claims, options } = this.#o;
      const index = claims.claimedIndex(taskId);
      if (index < 0) throw new TaskNotClaimedError(taskId);
      if (scheduledFor !== undefined && (typeof scheduledFor !== 'number' || !Number.isFinite(scheduledFor))) {
        throw new InvalidArgumentError('scheduledFor', 'a finite time in epoch ms', scheduledFor);
      }
      const desiredState = options.desiredState;
      if (desiredState.forceRun === undefined) {
        throw new InvalidStateError('Expected a desired state with forceRun() for manual runs, but it has none');
      }
      const now = this.#o.latestNow();
      const epoch = claims.epoch(index);
      const queued = desiredState.forceRun(taskId, scheduledFor ?? now, now);
      if (isPromiseLike(queued)) {
        return Promise.resolve(queued).then((run) => {
          const forced = this.#waiters.add(run);
          this.#o.due(index, epoch);
          return forced;
        });
      }
      const forced = this.#waiters.add(queued);
      this.#o.due(index, epoch);
      return Promise.resolve(forced);
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }

  /**
   * Runs a logged run's scheduled time again, as a manual run. Rejects with `RunNotFoundError` when the log does not
   * know the run, `DuplicateRunError` while it is still in flight.
   */
  retryRun(taskId: string, runId: string): Promise<ForcedRun> {
    try {
      if (this.#o.claims.claimedIndex(taskId) < 0) throw new TaskNotClaimedError(taskId);
      const log = this.#o.options.logWriter;
      if (log.findRun === undefined) {
        throw new InvalidStateError('Expected a log writer with findRun() to retry runs, but it has none');
      }
      return Promise.resolve(log.findRun(taskId, runId)).then((record) => {
        if (record === undefined || !Number.isFinite(record.scheduledFor)) throw new RunNotFoundError(taskId, runId);
        return this.forceRun(taskId, record.scheduledFor);
      });
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }

  /** Rejects the `done` of every manual run (of `taskId`, or of every task) not yet ended; answers how many. */
  rejectAll(reason: Error | ((run: { readonly taskId: string; readonly runId: string }) => Error), taskId?: string): number {
    if (!(reason instanceof Error) && typeof reason !== 'function') {
      throw new InvalidArgumentError('reason', 'an Error or a function (run) => Error', reason);
    }
    if (taskId !== undefined && typeof taskId !== 'string') throw new InvalidArgumentError('taskId', 'a task id or undefined', taskId);
    return this.#waiters.rejectAll(reason instanceof Error ? () => reason : reason, taskId);
  }

  /** A run ended: its `done`, if it is a manual run's, settles. */
  ended(taskId: string, runId: string, status: FinalRunStatus, error: Error | undefined, value: unknown): void {
    if (this.#waiters.size > 0) this.#waiters.settle(taskId, runId, status, error, value);
  }
}
