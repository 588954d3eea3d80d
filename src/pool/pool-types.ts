/**
 * The thread pool's options, its report of a thread that ended, and its stats: what the engine configures and reads.
 */
import type { Backoff } from '../backoff.js';
import type { Clock } from '../clock.js';
import type { ModuleLoadError, TickpoolError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { ModuleRef } from '../protocol/messages.js';
import type { SlotTable } from '../slots/slot-table.js';
import type { ChangeFeed } from '../backend/state-backend.js';

/** Priority of a task run's item in the work queue: a default evaluation's. */
export const TASK_RUN_PRIORITY = 50;

export interface ResourceLimits {
  readonly maxOldGenerationSizeMb?: number;
  readonly maxYoungGenerationSizeMb?: number;
  readonly codeRangeSizeMb?: number;
  readonly stackSizeMb?: number;
}

export interface ThreadPoolOptions {
  readonly minThreads: number;
  readonly maxThreads: number;
  readonly slots: SlotTable;
  /** The state's change stream: this process's replica, which seeds and feeds the threads' replicas. */
  readonly state: ChangeFeed;
  readonly schedulers: Readonly<Record<string, ModuleRef>>;
  readonly handlers: Readonly<Record<string, ModuleRef>>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** How long a canceled item may keep running before its thread is terminated. */
  readonly cancelGraceMs: number;
  /** A thread above `minThreads` idle this long is stopped. */
  readonly idleTimeoutMs: number;
  readonly resourceLimits?: ResourceLimits | undefined;
  /** Size of the shared change log, bytes (a power of two); default `DEFAULT_CHANGE_LOG_BYTES`. */
  readonly changeLogBytes?: number;
  /**
   * Spaces the replacements of a thread that keeps dying before it is ready (a module that fails to import, limits
   * too small to boot): without it the pool would spawn threads in a loop as fast as they die.
   */
  readonly respawnBackoff: Backoff;
  /** Told when a thread ended unexpectedly (crash, resource limit, termination) and how many items it held. */
  readonly onThreadExit?: (exit: ThreadExit) => void;
  /**
   * Told when a thread started after `start()` could not load a registered module (during `start()`, the first
   * such failure rejects it instead).
   */
  readonly onModuleError?: (threadIndex: number, error: ModuleLoadError) => void;
  /** Monotonic milliseconds for how long items have run (default `performance.now`; tests move it by hand). */
  readonly monotonicNow?: () => number;
}

export interface ThreadExit {
  readonly threadIndex: number;
  readonly reason: TickpoolError;
  /** Items the thread held when it ended: the one it ran, and those pinned to it. */
  readonly heldItems: number;
  /** Of those, the ones it had not started (or had finished without sending their results): dispatched again. */
  readonly requeuedItems: number;
}

export interface ThreadPoolStats {
  readonly threads: number;
  /** Items dispatched and not settled: waiting in the queue, or running. */
  readonly inflight: number;
  /** Of those, waiting for a thread. */
  readonly queued: number;
  readonly dispatched: number;
  readonly settled: number;
  readonly threadExits: number;
  /** Times a thread woke main for its results (each costs main a turn of its event loop: fewer per item is cheaper). */
  readonly doorbells: number;
  /** Each live thread: `ready` once main has its ready message (a thread may park before main reads it). */
  readonly perThread: ReadonlyArray<{ readonly index: number; readonly ready: boolean; readonly parked: boolean; readonly appliedIndex: number }>;
}

/** What one thread runs now, as the admin API shows it. */
export interface RunningItem {
  readonly threadIndex: number;
  readonly kind: 'eval' | 'run';
  /** The evaluation's id, or the task run's id. */
  readonly id: string;
  /** The evaluation's type, or the task's id. */
  readonly name: string;
  /** When it started, on the pool's clock. */
  readonly startedAt: number | undefined;
  /** What the pool predicts it takes, ms (the type's or handler's recent mean). */
  readonly predictedMs: number;
  readonly slot: number;
  readonly generation: number;
}
