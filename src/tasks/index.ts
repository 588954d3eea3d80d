// The task scheduler's public names (re-exported by `src/index.ts`). Internals (the due calendar, claim table,
// active runs) stay private to this folder.
export { TaskScheduler, SchedulerState, type SchedulerStateValue, type TaskSchedulerStats, type TaskStats } from './task-scheduler.js';
export { taskSchedulerDefaults, type TaskSchedulerOptions } from './scheduler-options.js';
export type { TaskSchedulerEvents } from './scheduler-events.js';
export { MemoryDesiredState, type MemoryDesiredStateOptions, type TaskProgress } from './memory-desired-state.js';
export { MemoryRunLog, memoryRunLogDefaults, type MemoryRunLogOptions } from './memory-run-log.js';
export {
  CatchUp,
  isValidatedTask,
  parseOffset,
  taskDefaults,
  taskLimits,
  validateTask,
  validateTaskMeta,
  type CatchUpPolicy,
  type Task,
  type TaskInput,
  type TaskMeta,
} from './task.js';
export {
  isFinalStatus,
  RunStatus,
  type DesiredState,
  type ExecuteContext,
  type Executor,
  type FinalRunStatus,
  type LogWriter,
  type MaybePromise,
  type QueuedRun,
  type RunCreation,
  type RunPromise,
  type RunRecord,
  type RunResult,
  type RunSlot,
  type RunStateChange,
  type RunStateDetails,
} from './types.js';
export { planNextRun, type PlannedRun } from './catch-up.js';
