/**
 * `engine.tasks`: the engine's task scheduler, on the engine's pool and slot table, with the backend's task store
 * (in memory: `MemoryDesiredState` and the queryable `MemoryRunLog`) and the `PoolExecutor`. A face over a
 * `TaskScheduler` it owns rather than a subclass of one: tasks come and go only through `add`/`remove`, which store
 * and claim (or release and delete) in one call, so a claim without a stored task (or the reverse) cannot happen,
 * and the scheduler's lifecycle (`tick`, `start`, `stop`) stays the engine's.
 */
import type { TaskBackend } from '../backend/task-backend.js';
import type { ResolvedBackoffOptions } from '../backoff.js';
import type { Clock } from '../clock.js';
import type { TypedEmitter } from '../events.js';
import { RunCanceledError, TaskAlreadyClaimedError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Registry } from '../observability/metrics.js';
import type { ThreadPool } from '../pool/thread-pool.js';
import type { SlotTable } from '../slots/slot-table.js';
import type { MemoryTaskStore } from './memory-task-store.js';
import { PoolExecutor } from './pool-executor.js';
import type { TaskSchedulerEvents } from './scheduler-events.js';
import type { Task, TaskInput, TaskMeta } from './task.js';
import { TaskScheduler } from './task-scheduler.js';
import type { SchedulerStateValue, TaskSchedulerStats, TaskStats } from './scheduler-state.js';
import type { ForcedRun } from './types.js';
import { isPromiseLike } from './maybe-promise.js';

export interface EngineTasksOptions<T extends TaskBackend> {
  /** Where tasks, their runs and the run log are kept. */
  readonly store: T;
  readonly pool: ThreadPool;
  readonly slots: SlotTable;
  readonly handlers: readonly string[];
  readonly clock: Clock;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly backoff: ResolvedBackoffOptions;
  readonly tickMs: number;
}

/** The scheduler behind each `EngineTasks`, for the engine that drives its lifecycle. */
const schedulers = new WeakMap<EngineTasks<TaskBackend>, TaskScheduler>();

/** The `TaskScheduler` an `EngineTasks` composes (the engine starts and stops it). */
export function taskSchedulerOf(tasks: EngineTasks<TaskBackend>): TaskScheduler {
  return schedulers.get(tasks)!;
}

export class EngineTasks<T extends TaskBackend = MemoryTaskStore> {
  readonly #scheduler: TaskScheduler;
  readonly #store: T;
  /** The task store: what `add` stored, with each task's progress. */
  readonly desiredState: T['desiredState'];
  /** Every run's history (in memory: `runLog.runs(taskId)`). */
  readonly runLog: T['runLog'];

  constructor(options: EngineTasksOptions<T>) {
    const store = options.store;
    this.#scheduler = new TaskScheduler({
      desiredState: store.desiredState,
      executor: new PoolExecutor({ pool: options.pool, handlers: options.handlers, registry: options.registry }),
      logWriter: store.runLog,
      clock: options.clock,
      logger: options.logger,
      registry: options.registry,
      slots: options.slots,
      backoff: options.backoff,
      tickMs: options.tickMs,
    });
    this.#store = store;
    this.desiredState = store.desiredState;
    this.runLog = store.runLog;
    schedulers.set(this, this.#scheduler);
  }

  /** Typed events: `task:run:finish`, `task:run:retry`, `task:error`, … */
  get events(): TypedEmitter<TaskSchedulerEvents> {
    return this.#scheduler.events;
  }

  /** `idle` before the engine starts, `running`, then `stopping` and `stopped`. */
  get state(): SchedulerStateValue {
    return this.#scheduler.state;
  }

  /** The scheduler's current time (the engine's clock once started). */
  now(): number {
    return this.#scheduler.now();
  }

  /**
   * Stores the task (validated synchronously) and claims it. Returns the validated task. When the claim fails (the
   * slot table cannot hold `maxConcurrency` more slots) the store is left as it was: a task that was not stored is
   * removed, one that was (unclaimed) is put back with its progress. Typed as `TaskInput` for callers; checked at run
   * time all the same (`InvalidTaskError`), for callers the compiler does not see.
   */
  add(task: TaskInput, meta?: TaskMeta): Task {
    const id = (task as { id?: unknown } | null | undefined)?.id;
    if (typeof id === 'string' && this.#scheduler.taskStats(id)?.state === 'claimed') throw new TaskAlreadyClaimedError(id);
    const put = this.#store.storeTask(task, meta);
    try {
      this.#scheduler.claimTask(put.task, meta);
    } catch (error) {
      // A claim that took effect before something after it threw (a throwing clock) needs its task stored.
      if (this.#scheduler.taskStats(put.task.id)?.state !== 'claimed') put.undo();
      throw error;
    }
    return put.task;
  }

  /**
   * Releases the task (canceling its runs in flight) and deletes it from the store. Resolves once its canceled
   * runs have stopped. Its manual runs that had not ended reject their `done` with `RunCanceledError`. Throws
   * `TaskNotClaimedError` when it is not claimed.
   */
  remove(taskId: string): Promise<void> {
    const stopped = this.#scheduler.releaseTask(taskId);
    const deleted = this.#store.deleteTask(taskId);
    this.#scheduler.rejectForcedRuns((run) => new RunCanceledError(run.taskId, run.runId), taskId);
    // A store that deletes asynchronously: resolved once both the runs stopped and the task is gone.
    return isPromiseLike(deleted) ? Promise.all([stopped, deleted]).then(() => undefined) : stopped;
  }

  /**
   * Queues a manual run for `scheduledFor` (default: now), ahead of scheduled runs, and resolves with the run and
   * its `done`: resolved with the run's `RunResult` on success, rejected with its error on failure and with
   * `RunCanceledError` when canceled. Rejects with `TaskNotClaimedError` or `DuplicateRunError`.
   */
  forceRun(taskId: string, scheduledFor?: number): Promise<ForcedRun> {
    return this.#scheduler.forceRun(taskId, scheduledFor);
  }

  /** Runs a logged run's scheduled time again as a manual run (with its `done`); `RunNotFoundError` if unknown. */
  retryRun(taskId: string, runId: string): Promise<ForcedRun> {
    return this.#scheduler.retryRun(taskId, runId);
  }

  stats(): TaskSchedulerStats {
    return this.#scheduler.stats();
  }

  /** One task's view: claimed or draining (removed, runs still stopping); `undefined` when neither. */
  taskStats(taskId: string): TaskStats | undefined {
    return this.#scheduler.taskStats(taskId);
  }
}
