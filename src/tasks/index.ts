// `tickpool/tasks`: InfluxDB's task scheduler as a building block, with its store, run log and executor interfaces,
// for those who compose their own (a durable store, a remote executor). The engine's `engine.tasks` is one of these
// on the engine's pool.
export { TaskScheduler } from './task-scheduler.js';
export { SchedulerState, type SchedulerStateValue, type TaskSchedulerStats, type TaskStats } from './scheduler-state.js';
export { taskSchedulerDefaults, type TaskSchedulerOptions } from './scheduler-options.js';
export type { TaskSchedulerEvents } from './scheduler-events.js';
export { MemoryDesiredState, type MemoryDesiredStateOptions, type TaskProgress } from './memory-desired-state.js';
export { MemoryRunLog, memoryRunLogDefaults, type MemoryRunLogOptions } from './memory-run-log.js';
export type { CatchUpPolicy, Task, TaskInput, TaskMeta } from './task.js';
export {
  isFinalStatus,
  RunStatus,
  type DesiredState,
  type ExecuteContext,
  type Executor,
  type FinalRunStatus,
  type ForcedRun,
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
export { parseEvery, parseSchedule, type Schedule, type ScheduleSpec } from './schedule/index.js';
// What a desired state, a log writer or an executor raises or meets.
export {
  DuplicateRunError,
  RunCanceledError,
  RunNotFoundError,
  RunNotYetDueError,
  TaskAlreadyClaimedError,
  TaskNotClaimedError,
  TaskNotFoundError,
} from '../errors.js';
