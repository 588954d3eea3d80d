/**
 * The task store seam: where the engine's task scheduler keeps its tasks, their desired runs (`DesiredState`) and
 * the run log (`LogWriter`). The scheduler takes either answer form (`MaybePromise`) from `DesiredState` and
 * `LogWriter`, and calls into one task serially; what a store adds is the catalogue of tasks that
 * `engine.tasks.add`/`remove` write, and who decides which tasks this process runs:
 * - a local store (`MemoryTaskStore`): this process runs every task it holds; `add` stores and claims in one
 *   synchronous call;
 * - a shared store (PostgreSQL): many engine processes share one catalogue; `add` declares a task into it, and the
 *   store's claim keeper decides which of the tasks this process claims (leases with a fencing epoch), claiming them
 *   into, and releasing them from, the scheduler it is attached to.
 */
import type { Task, TaskMeta } from '../tasks/task.js';
import type { TaskScheduler } from '../tasks/task-scheduler.js';
import type { DesiredState, LogWriter, RunRecord } from '../tasks/types.js';
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

interface TaskStoreParts<S extends DesiredState, L extends LogWriter> {
  /** Creates and finishes runs (InfluxDB's `CreateNextRun`/`FinishRun`, manual runs), per task serially. */
  readonly desiredState: S;
  /** Every run's state changes; `findRun` makes `retryRun` possible. */
  readonly runLog: L;
}

/** A store of this process alone: every task it holds is claimed here. */
export interface LocalTaskBackend<S extends DesiredState = DesiredState, L extends LogWriter = LogWriter> extends TaskStoreParts<S, L> {
  readonly shared?: false;
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

/** What the engine tells a shared store's claim keeper. */
export interface ClaimSettings {
  /**
   * Lease of a claim, ms: a process that dies loses its claims this long after its last renewal, and one that
   * cannot renew cancels its runs at half of it.
   */
  readonly claimTtlMs: number;
  /** The engine's task tick, ms: the claim keeper looks at the catalogue at least this often. */
  readonly tickMs: number;
  /** How long canceled work may run before its thread is terminated, ms: it must fit in half the lease. */
  readonly cancelGraceMs: number;
  /** The engine's live thread count, recorded with this process's membership for the other processes to see. */
  readonly threads?: () => number;
}

/** A live engine process of a shared store, as the store records it. */
export interface StoreProcess {
  readonly host: string;
  readonly pid: number;
  readonly threads: number;
  /** Its last lease renewal, epoch ms. */
  readonly lastSeen: number;
  /** The tasks it claims, by id. */
  readonly claimedTasks: readonly string[];
}

/** A task of a shared store's catalogue. */
export interface CatalogueTask {
  readonly task: Task;
  /** False while disabled for the whole cluster. */
  readonly enabled: boolean;
  /** The live process that claims it, if one does. */
  readonly claimedBy: { readonly host: string; readonly pid: number } | undefined;
  /** Its runs created and not yet ended, wherever they run. */
  readonly runsActive: number;
  /** Its newest logged run. */
  readonly lastRun: RunRecord | undefined;
}

/** A store shared by many engine processes: the catalogue is the database's, the claims are leases. */
export interface SharedTaskBackend<S extends DesiredState = DesiredState, L extends LogWriter = LogWriter> extends TaskStoreParts<S, L> {
  readonly shared: true;
  /**
   * Declares a validated task, idempotently: a new id is stored (starting after `meta.latestCompleted`, default:
   * now); the same id with the same definition changes nothing; a changed definition replaces the stored one from
   * its next run on, wherever it runs (its progress kept; `meta` only moves it forward). Resolves after the commit.
   */
  declareTask(task: Task, meta: TaskMeta): Promise<void>;
  /**
   * Deletes a task everywhere, its runs (queued and logged) with it; resolves false when there was none. The process
   * that runs it cancels its runs in flight within one tick; when that is this process, the promise resolves once
   * they have stopped.
   */
  removeTask(taskId: string): Promise<boolean>;
  /**
   * Hands the store the scheduler to claim tasks into (once, before the engine starts). The store claims while the
   * scheduler runs, and gives back what it holds when it is closed.
   */
  attach(scheduler: TaskScheduler, settings: ClaimSettings): void;
  /** Every live process of the store (each with what it claims). */
  clusterProcesses?(): Promise<StoreProcess[]>;
  /** The whole catalogue by id, or the one task `taskId` (empty when there is none). */
  catalogue?(taskId?: string): Promise<CatalogueTask[]>;
  /**
   * Disables a task everywhere: no process claims it, so none creates runs of it; it keeps its definition. The
   * process holding it lets its runs in flight finish and gives it back; when that is this process, the promise
   * resolves once they have. Resolves false when there is no such task.
   */
  disableTask?(taskId: string): Promise<boolean>;
  /** Enables a disabled task again from `now` on (the times it was disabled do not run); false when there is none. */
  enableTask?(taskId: string, now: number): Promise<boolean>;
}

export type TaskBackend<S extends DesiredState = DesiredState, L extends LogWriter = LogWriter> = LocalTaskBackend<S, L> | SharedTaskBackend<S, L>;
