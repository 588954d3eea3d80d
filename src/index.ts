// The public API of tickpool: what a service needs to run evaluations and tasks on an engine. Building blocks for
// those who compose their own have entry points of their own (`tickpool/broker`, `tickpool/tasks`); everything
// else is internal. Thread-side code (src/thread/) is never exported. test/api/exports.test.ts pins the names and
// kinds of every entry point, so a change here is always deliberate.

// Engine
export { createEngine, Engine, type EngineEvents, type EngineStats } from './engine/engine.js';
export type { EngineOptions } from './engine/options.js';
// The backend an engine runs on (`createEngine({ backend })`): the in-memory default; `tickpool/postgres` has another.
export { memoryBackend } from './memory/memory-backend.js';
export type { EvaluationInput } from './broker/evaluation.js';
export type { EvaluationHandle, EvaluationOutcome } from './broker/outcome-waiters.js';

// The functions a user writes for the pool threads, their inputs, and what runs them
export type { Scheduler, SchedulerEvaluation, SchedulerResult, TaskHandler, TaskRunInput } from './engine/user-functions.js';
export type { WorkContext } from './thread/context.js';

// Plans, snapshots and records
export type { EvaluatePlan, Plan, PlanWrite, Snapshot, StoredRecord } from './state/types.js';

// Tasks
export type { TaskInput } from './tasks/task.js';
export type { RunRecord, RunResult } from './tasks/types.js';

// Time and backoff
export { ManualClock, systemClock, type Clock } from './clock.js';
export type { BackoffOptions } from './backoff.js';

// Errors: every class a call of this API can throw or reject with (as itself or as a `cause`), and the codes.
// The broker's delivery errors come with `tickpool/broker`, the task store's with `tickpool/tasks`.
export {
  AbortedError,
  CanceledError,
  DeliveryLimitError,
  DuplicateRunError,
  InvalidArgumentError,
  InvalidEvaluationError,
  InvalidOptionError,
  InvalidPlanError,
  InvalidStateError,
  InvalidTaskError,
  ModuleLoadError,
  PayloadTooLargeError,
  PlanAttemptsExhaustedError,
  RemoteError,
  ReplicaGapError,
  ResourceLimitError,
  RunCanceledError,
  RunNotFoundError,
  SupersededError,
  SyncLimitError,
  TaskAlreadyClaimedError,
  TaskNotClaimedError,
  ThreadExitedError,
  TickpoolError,
  UnknownHandlerError,
  UnknownSchedulerError,
  UnknownTableError,
  UserCodeError,
  type ErrorCode,
} from './errors.js';
