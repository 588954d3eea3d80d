/**
 * `engine.tasks`: the engine's task scheduler, on the engine's pool and slot table, with an in-memory task store
 * (`MemoryDesiredState`), a queryable run log (`MemoryRunLog`) and the `PoolExecutor`. Adds `add`/`remove`, which
 * store and claim (or release and delete) in one call.
 */
import type { ResolvedBackoffOptions } from '../backoff.js';
import type { Clock } from '../clock.js';
import { TaskAlreadyClaimedError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { Registry } from '../observability/metrics.js';
import type { ThreadPool } from '../pool/thread-pool.js';
import type { SlotTable } from '../slots/slot-table.js';
import { MemoryDesiredState, putTaskUndoably } from './memory-desired-state.js';
import { MemoryRunLog } from './memory-run-log.js';
import { PoolExecutor } from './pool-executor.js';
import type { Task, TaskInput, TaskMeta } from './task.js';
import { TaskScheduler } from './task-scheduler.js';

export interface EngineTasksOptions {
  readonly pool: ThreadPool;
  readonly slots: SlotTable;
  readonly handlers: readonly string[];
  readonly clock: Clock;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly backoff: ResolvedBackoffOptions;
  readonly tickMs: number;
}

export class EngineTasks extends TaskScheduler {
  readonly desiredState: MemoryDesiredState;
  readonly runLog: MemoryRunLog;

  constructor(options: EngineTasksOptions) {
    const desiredState = new MemoryDesiredState({ clock: options.clock });
    const runLog = new MemoryRunLog();
    super({
      desiredState,
      executor: new PoolExecutor({ pool: options.pool, handlers: options.handlers, registry: options.registry }),
      logWriter: runLog,
      clock: options.clock,
      logger: options.logger,
      registry: options.registry,
      slots: options.slots,
      backoff: options.backoff,
      tickMs: options.tickMs,
    });
    this.desiredState = desiredState;
    this.runLog = runLog;
  }

  /**
   * Stores the task (validated synchronously) and claims it. Returns the validated task. When the claim fails (the
   * slot table cannot hold `maxConcurrency` more slots) the store is left as it was: a task that was not stored is
   * removed, one that was (unclaimed) is put back with its progress. Typed as `TaskInput` for callers; checked at run
   * time all the same (`InvalidTaskError`), for callers the compiler does not see.
   */
  add(task: TaskInput, meta?: TaskMeta): Task {
    const id = (task as { id?: unknown } | null | undefined)?.id;
    if (typeof id === 'string' && this.taskStats(id)?.state === 'claimed') throw new TaskAlreadyClaimedError(id);
    const put = putTaskUndoably(this.desiredState, task, meta);
    try {
      this.claimTask(put.task, meta);
    } catch (error) {
      // A claim that took effect before something after it threw (a throwing clock) needs its task stored.
      if (this.taskStats(put.task.id)?.state !== 'claimed') put.undo();
      throw error;
    }
    return put.task;
  }

  /**
   * Releases the task (canceling its runs in flight) and deletes it from the store. Resolves once its canceled
   * runs have stopped. Throws `TaskNotClaimedError` when it is not claimed.
   */
  remove(taskId: string): Promise<void> {
    const stopped = this.releaseTask(taskId);
    this.desiredState.deleteTask(taskId);
    return stopped;
  }
}
