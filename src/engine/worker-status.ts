/** Lifecycle of a scheduling worker; changed only through `SchedulingWorker`'s guarded `#setStatus`. */
export const WorkerStatus = Object.freeze({
  STARTING: 'starting',
  RUNNING: 'running',
  PAUSED: 'paused',
  STOPPING: 'stopping',
  STOPPED: 'stopped',
});
export type WorkerStatusValue = (typeof WorkerStatus)[keyof typeof WorkerStatus];

/** What a worker is doing right now (Nomad's workload status). */
export const WorkerActivity = Object.freeze({
  IDLE: 'idle',
  DEQUEUING: 'dequeuing',
  WAITING_FOR_INDEX: 'waiting for index',
  SCHEDULING: 'scheduling',
  SUBMITTING: 'submitting',
  BACKOFF: 'backoff',
});
export type WorkerActivityValue = (typeof WorkerActivity)[keyof typeof WorkerActivity];

/** Allowed status changes; anything else is a bug and throws. */
export const workerTransitions: Readonly<Record<WorkerStatusValue, readonly WorkerStatusValue[]>> = Object.freeze({
  starting: ['running', 'paused', 'stopping'],
  running: ['paused', 'stopping'],
  paused: ['running', 'stopping'],
  stopping: ['stopped'],
  stopped: [],
});
