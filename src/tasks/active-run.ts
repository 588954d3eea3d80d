import type { Backoff } from '../backoff.js';
import type { TimerHandle } from '../clock.js';
import type { Task } from './task.js';
import type { QueuedRun, RunPromise } from './types.js';

/** Where a run is in its life. Guarded transitions live in the scheduler; this names the states. */
export const RunPhase = Object.freeze({
  /** The slot is claimed and `createNextRun` is pending (async desired state). */
  CREATING: 0,
  /** An attempt is executing. */
  EXECUTING: 1,
  /** An attempt failed retryably; waiting for it to stop physically before the slot is reused. */
  STOPPING_ATTEMPT: 2,
  /** Waiting out the backoff before the next attempt. */
  BACKOFF: 3,
  /** The final status is decided; finishing, logging, and waiting for the execution to stop physically. */
  ENDING: 4,
} as const);
export type RunPhaseValue = (typeof RunPhase)[keyof typeof RunPhase];

/** One run in flight: created (or being created) and not yet stopped. Exists only while the run does. */
export class ActiveRun {
  readonly index: number;
  /** The claim epoch the run was started under; a different current epoch means its claim was released. */
  readonly epoch: number;
  readonly task: Task;
  readonly slot: number;
  generation: number;
  /** The slot is claimed by this run (false once freed). */
  holdsSlot = true;
  phase: RunPhaseValue = RunPhase.CREATING;
  run: QueuedRun | undefined;
  attempt = 0;
  promise: RunPromise | undefined;
  timer: TimerHandle | undefined;
  backoff: Backoff | undefined;
  canceled = false;
  /** When the first attempt's code began (the executor said so), or when it was handed over if it never said. */
  startedAt: number | undefined;
  /** When the first attempt was handed to the executor. */
  handedAt: number | undefined;

  constructor(index: number, epoch: number, task: Task, slot: number, generation: number) {
    this.index = index;
    this.epoch = epoch;
    this.task = task;
    this.slot = slot;
    this.generation = generation;
  }
}

/** Waiters of `releaseTask`: resolved once no run of an epoch before `epoch` remains. */
export interface DrainWaiter {
  readonly epoch: number;
  readonly resolve: () => void;
}

/** A task's busy state: exists only while it has runs, a pending error backoff, retired slots or waiters. */
export class TaskActivity {
  readonly runs: ActiveRun[] = [];
  /** A `createNextRun` is pending: the task asks the desired state one run at a time. */
  creating = false;
  /** `forceRun` arrived while a creation was pending: its answer about the next due time is stale. */
  forced = false;
  /** Backoff after desired-state errors (not `RunNotYetDueError`). */
  errorBackoff: Backoff | undefined;
  /** Slot ranges of an earlier claim with a different `maxConcurrency`, released once idle. */
  retired: Array<{ readonly base: number; readonly count: number }> | undefined;
  waiters: DrainWaiter[] | undefined;

  isIdle(): boolean {
    return this.runs.length === 0 && !this.creating && this.errorBackoff === undefined && this.retired === undefined && this.waiters === undefined;
  }
}
