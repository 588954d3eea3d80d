/**
 * The task store seam: where the engine's task scheduler keeps its tasks, their desired runs (`DesiredState`) and
 * the run log (`LogWriter`). `MemoryDesiredState` and `MemoryRunLog` are the in-memory implementations. The
 * scheduler already takes either answer form (`MaybePromise`) from `DesiredState` and `LogWriter`, and calls into
 * one task serially; what it adds here is the catalogue of tasks that `engine.tasks.add`/`remove` write.
 */
import type { Task } from '../tasks/task.js';
import type { DesiredState, LogWriter } from '../tasks/types.js';
import type { MaybePromise } from '../tasks/maybe-promise.js';

/** A task put into the store, and what puts the store back as it was before (a claim after it may fail). */
export interface StoredTask {
  /** The validated, frozen task (hand this one to the scheduler: both share one copy). */
  readonly task: Task;
  /**
   * Removes the task if the put added it, or puts back the task (with its schedule and progress) it replaced; does
   * nothing once the store's entry for it has changed again.
   */
  undo(): void;
}

export interface TaskBackend<S extends DesiredState = DesiredState, L extends LogWriter = LogWriter> {
  /** Creates and finishes runs (InfluxDB's `CreateNextRun`/`FinishRun`, manual runs), per task serially. */
  readonly desiredState: S;
  /** Every run's state changes; `findRun` makes `retryRun` possible. */
  readonly runLog: L;
  /**
   * Stores (or replaces) a task, validated synchronously (`InvalidTaskError` naming the field: thrown, nothing
   * stored). A new task starts after `meta.latestCompleted` (default: now); a replaced one keeps its progress, which
   * `meta` can only move forward.
   */
  storeTask(task: unknown, meta?: unknown): StoredTask;
  /**
   * Deletes a task with its queued manual runs. Runs of it still in flight may finish afterwards: finishing a run of
   * a deleted task changes nothing.
   */
  deleteTask(taskId: string): MaybePromise<void>;
}
