/**
 * `engine.tasks`: the engine's task scheduler, on the engine's pool and slot table, with the backend's task store
 * (in memory: `MemoryDesiredState` and the queryable `MemoryRunLog`; PostgreSQL: tasks shared by every engine
 * process) and the `PoolExecutor`. A face over a `TaskScheduler` it owns rather than a subclass of one: tasks come
 * and go only through `add`/`remove`, and the scheduler's lifecycle (`tick`, `start`, `stop`) stays the engine's.
 *
 * With a local store `add` stores and claims in one synchronous call, so a claim without a stored task (or the
 * reverse) cannot happen. With a shared store `add` declares the task into the shared catalogue (a promise) and the
 * store's claim keeper decides which tasks this process claims.
 */
import type { LocalTaskBackend, SharedTaskBackend, TaskBackend } from '../backend/task-backend.js';
import type { ResolvedBackoffOptions } from '../backoff.js';
import type { Clock } from '../clock.js';
import type { TypedEmitter } from '../events.js';
import { InvalidStateError, RunCanceledError, TaskNotFoundError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Registry } from '../observability/metrics.js';
import type { ThreadPool } from '../pool/thread-pool.js';
import type { SlotTable } from '../slots/slot-table.js';
import type { MemoryTaskStore } from '../tasks/memory-task-store.js';
import { PoolExecutor } from './pool-executor.js';
import type { TaskSchedulerEvents } from '../tasks/scheduler-events.js';
import { sameTaskDefinition } from '../tasks/task-definition.js';
import { validateTask, validateTaskMeta, type Task, type TaskInput, type TaskMeta } from '../tasks/task.js';
import { TaskScheduler } from '../tasks/task-scheduler.js';
import type { SchedulerStateValue, TaskSchedulerStats, TaskStats } from '../tasks/scheduler-state.js';
import type { ForcedRun } from '../tasks/types.js';
import { isPromiseLike } from '../tasks/maybe-promise.js';

/** What `add` answers: the task itself with a local store, a promise of it (resolved after the commit) with a shared one. */
export type AddedTask<T extends TaskBackend> = T extends SharedTaskBackend ? Promise<Task> : Task;

/** What `enable` answers: nothing with a local store, a promise (resolved after the commit) with a shared one. */
export type EnabledTask<T extends TaskBackend> = T extends SharedTaskBackend ? Promise<void> : void;

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
  /** Lease of a shared store's claims, ms (`createEngine({ claimTtlMs })`). */
  readonly claimTtlMs: number;
  /** How long canceled work may run before its thread is terminated, ms (`createEngine({ cancelGraceMs })`). */
  readonly cancelGraceMs: number;
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
  /** Tasks disabled here: released by the scheduler, their definitions kept for `enable`. */
  readonly #disabled = new Map<string, Task>();
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
    if (store.shared === true) {
      store.attach(this.#scheduler, {
        claimTtlMs: options.claimTtlMs,
        tickMs: options.tickMs,
        cancelGraceMs: options.cancelGraceMs,
        threads: () => options.pool.threadCount,
      });
    }
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
   * Adds a task, idempotently: the same id with the same definition changes nothing (every process of a service may
   * declare its tasks at start-up), a changed definition replaces the task from its next run on (runs in flight end
   * with the one they started with). Validated synchronously (`InvalidTaskError`, thrown: nothing stored); typed as
   * `TaskInput` for callers and checked at run time all the same, for callers the compiler does not see.
   *
   * A local store stores and claims here and returns the validated task. When the claim fails (the slot table
   * cannot hold `maxConcurrency` more slots) the store is left as it was: a task that was not stored is removed, one
   * that was is put back with its progress. A shared store declares it in the shared catalogue and resolves with the
   * task after the commit; which process runs it is the store's claim keeper's decision.
   */
  add(task: TaskInput, meta?: TaskMeta): AddedTask<T> {
    const store = this.#store as TaskBackend;
    if (store.shared === true) {
      const valid = validateTask(task);
      const progress = validateTaskMeta(meta);
      return store.declareTask(valid, progress).then(() => valid) as AddedTask<T>;
    }
    return this.#addLocally(store, task, meta) as AddedTask<T>;
  }

  #addLocally(store: LocalTaskBackend, task: TaskInput, meta: TaskMeta | undefined): Task {
    const valid = validateTask(task);
    const claimed = this.#scheduler.claimedTask(valid.id);
    if (claimed !== undefined && sameTaskDefinition(claimed, valid)) return claimed;
    const put = store.storeTask(valid, meta);
    try {
      if (claimed === undefined) this.#scheduler.claimTask(put.task, meta);
      else this.#scheduler.replaceTask(put.task);
    } catch (error) {
      // A claim that took effect before something after it threw (a throwing clock) needs its task stored.
      if (this.#scheduler.claimedTask(put.task.id) !== put.task) put.undo();
      throw error;
    }
    return put.task;
  }

  /**
   * Deletes the task, canceling its runs in flight. Its manual runs that had not ended reject their `done` with
   * `RunCanceledError`. A local store releases it here and resolves once its canceled runs have stopped (throws
   * `TaskNotClaimedError` when it is not claimed). A shared store deletes it everywhere: the process that runs it
   * cancels its runs within one tick; the promise resolves after the commit, and once the runs here have stopped
   * when this process ran it; it rejects with `TaskNotFoundError` when the catalogue has no such task.
   */
  remove(taskId: string): Promise<void> {
    const store = this.#store as TaskBackend;
    if (store.shared === true) {
      return store.removeTask(taskId).then((found) => {
        this.#scheduler.rejectForcedRuns((run) => new RunCanceledError(run.taskId, run.runId), taskId);
        if (!found) throw new TaskNotFoundError(taskId);
      });
    }
    if (this.#disabled.delete(taskId)) {
      const deleted = store.deleteTask(taskId);
      return isPromiseLike(deleted) ? Promise.resolve(deleted).then(() => undefined) : Promise.resolve();
    }
    const stopped = this.#scheduler.releaseTask(taskId);
    const deleted = store.deleteTask(taskId);
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

  /**
   * Stops the task creating runs and keeps its definition and progress (runs in flight finish); resolves once they
   * have stopped. `TaskNotFoundError` when no such task runs here. A shared store disables it for the whole
   * cluster (`TaskNotFoundError` when its catalogue has no such task): the process running it lets its runs in
   * flight finish and gives it back, and no process claims it until it is enabled; resolves after the commit, and
   * once the runs here have stopped when this process ran it. A shared store that cannot disable tasks rejects
   * with `InvalidStateError`.
   */
  disable(taskId: string): Promise<void> {
    const store = this.#store as TaskBackend;
    if (store.shared === true) {
      if (store.disableTask === undefined) return Promise.reject(new InvalidStateError('Expected a task store that can disable a task, but this shared one cannot'));
      return Promise.resolve()
        .then(() => store.disableTask!(taskId))
        .then((found) => {
          if (!found) throw new TaskNotFoundError(taskId);
        });
    }
    const task = this.#scheduler.claimedTask(taskId);
    if (task === undefined) return this.#disabled.has(taskId) ? Promise.resolve() : Promise.reject(new TaskNotFoundError(taskId));
    this.#disabled.set(taskId, task);
    return this.#scheduler.releaseTask(taskId, { cancel: false });
  }

  /**
   * Schedules a disabled task again, from now on (the times it was disabled do not run). A shared store enables it
   * for the whole cluster and resolves after the commit (`TaskNotFoundError` when its catalogue has no such task).
   */
  enable(taskId: string): EnabledTask<T> {
    const store = this.#store as TaskBackend;
    if (store.shared === true) {
      if (store.enableTask === undefined) return Promise.reject(new InvalidStateError('Expected a task store that can enable a task, but this shared one cannot')) as EnabledTask<T>;
      return Promise.resolve()
        .then(() => store.enableTask!(taskId, this.#scheduler.now()))
        .then((found) => {
          if (!found) throw new TaskNotFoundError(taskId);
        }) as EnabledTask<T>;
    }
    this.#enableLocally(taskId);
    return undefined as EnabledTask<T>;
  }

  #enableLocally(taskId: string): void {
    const task = this.#disabled.get(taskId);
    if (task === undefined) {
      if (this.#scheduler.claimedTask(taskId) !== undefined) return;
      throw new TaskNotFoundError(taskId);
    }
    this.#scheduler.claimTask(task, { latestCompleted: this.#scheduler.now() });
    this.#disabled.delete(taskId);
  }

  /** The disabled tasks' definitions. */
  disabledTasks(): Task[] {
    return [...this.#disabled.values()];
  }

  stats(): TaskSchedulerStats {
    return this.#scheduler.stats();
  }

  /** One task's view: claimed or draining (removed, runs still stopping); `undefined` when neither. */
  taskStats(taskId: string): TaskStats | undefined {
    return this.#scheduler.taskStats(taskId);
  }
}
