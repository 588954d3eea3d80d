/** The task scheduler's lifecycle states and the shapes of its stats (apart from the scheduler, so its metrics can read them). */

/** The scheduler's lifecycle; `setState` is the only writer. */
export const SchedulerState = Object.freeze({
  /** Constructed: `tick(now)` drives it by hand (the model of `scheduler.go` `Tick`). */
  IDLE: 'idle',
  /** `start()`ed: the ticker wakes at due times on the clock. */
  RUNNING: 'running',
  /** `stop()` is canceling runs and waiting for them to stop. */
  STOPPING: 'stopping',
  /** Stopped: no run starts until `start()`. Claims are kept. */
  STOPPED: 'stopped',
} as const);
export type SchedulerStateValue = (typeof SchedulerState)[keyof typeof SchedulerState];

export interface TaskSchedulerStats {
  readonly state: SchedulerStateValue;
  readonly claimedTasks: number;
  /** Released tasks whose canceled runs have not stopped yet. */
  readonly drainingTasks: number;
  /** Runs in flight, canceled-but-not-stopped ones included. */
  readonly runsActive: number;
  /** Runner slots held by runs. */
  readonly slotsBusy: number;
  /** Claimed tasks waiting in the calendar for their next due time. */
  readonly scheduledTasks: number;
  /** Earliest due time in the calendar (Infinity when none). */
  readonly nextDue: number;
}

export interface TaskStats {
  readonly state: 'claimed' | 'draining';
  readonly nextDue: number;
  readonly runs: number;
  readonly slotsBusy: number;
}
