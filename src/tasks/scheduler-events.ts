import type { FinalRunStatus } from './types.js';

/**
 * Events of `TaskScheduler.events`, named `task:<verb>`. Payloads are built only when someone listens. Listeners
 * run synchronously once the scheduler's state is consistent; a throwing listener is logged and ignored.
 */
export interface TaskSchedulerEvents {
  /** A task was claimed; `nextDue` is when its first run is due. */
  'task:claim': { readonly taskId: string; readonly nextDue: number };
  /** A task was released; `canceledRuns` of its runs were in flight and are being canceled. */
  'task:release': { readonly taskId: string; readonly canceledRuns: number };
  /** An attempt of a run is about to be handed to the executor. `delayMs` is due → start (first attempt). */
  'task:run:start': {
    readonly taskId: string;
    readonly runId: string;
    readonly scheduledFor: number;
    readonly runAt: number;
    readonly attempt: number;
    readonly slot: number;
    readonly delayMs: number;
  };
  /** An attempt failed retryably; attempt `attempt` starts after `delayMs`. */
  'task:run:retry': {
    readonly taskId: string;
    readonly runId: string;
    readonly attempt: number;
    readonly delayMs: number;
    readonly error: Error;
  };
  /** A run ended with its final status, and its slot is free again. */
  'task:run:finish': {
    readonly taskId: string;
    readonly runId: string;
    readonly scheduledFor: number;
    readonly status: FinalRunStatus;
    readonly attempts: number;
    readonly error: Error | undefined;
    readonly value: unknown;
  };
  /** The desired state, the executor or the log writer failed for a task; the scheduler carried on. */
  'task:error': { readonly taskId: string; readonly operation: string; readonly error: Error };
  /** A tick ran; `due` tasks were worked. */
  'task:tick': { readonly now: number; readonly due: number };
  /** The scheduler changed state (see `SchedulerState`). */
  'task:state': { readonly state: string };
}
