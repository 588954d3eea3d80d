// The public API of tickpool: named re-exports only. Thread-side code (src/thread/) is never exported.

// Engine
export { createEngine, Engine, EngineState, type EngineEvents, type EngineStats, type EngineStateValue, type StopOptions, type WorkerInfo } from './engine.js';
export { engineDefaults, defaultThreads, type EngineOptions, type ModuleSpec, type ResolvedEngineOptions } from './options.js';
export { WorkerActivity, WorkerStatus, type WorkerActivityValue, type WorkerStatusValue } from './workers/worker-status.js';
export type { WorkContext } from './thread/context.js';
export type { ResourceLimits, ThreadExit, ThreadPoolStats } from './pool/thread-pool.js';

// Time, backoff, errors, events, observability
export { ManualClock, systemClock, sleep, type Clock, type TimerHandle, type TimerOptions } from './clock.js';
export { Backoff, backoffDefaults, type BackoffOptions, type BackoffJitter } from './backoff.js';
export * from './errors.js';
export { TypedEmitter } from './events.js';
export { createDefaultLogger, type Logger } from './observability/logger.js';
export { Registry } from './observability/metrics.js';

// Evaluation broker
export { EvalBroker, type BrokerStats, type Delivery, type EvaluationInfo, type EvaluationState, type SchedulerStats } from './broker/eval-broker.js';
export { evalBrokerDefaults, type EvalBrokerOptions } from './broker/broker-options.js';
export { FAILED_QUEUE, DEFAULT_NAMESPACE, type Evaluation } from './broker/evaluation.js';
export type { BrokerEvents } from './broker/broker-events.js';

// State store and plans
export { StateStore, stateStoreDefaults, type StateStoreOptions } from './state/state-store.js';
export { PlanApplier, type PlanApplierOptions } from './state/plan-applier.js';
export type { ChangeSet, EvaluatePlan, Plan, PlanResult, PlanWrite, RecordChange, Snapshot, StoredRecord, WriteTxn } from './state/types.js';

// Shared-memory slots
export { SlotTable } from './slots/slot-table.js';
export { SlotState, ThreadPhase, type SlotStateValue, type ThreadPhaseValue } from './slots/slot-layout.js';

// Task schedules
export { parseSchedule, parseEvery, ScheduleCache, type Schedule, type ScheduleSpec } from './tasks/schedule/index.js';

// Tasks
export * from './tasks/index.js';
export { PoolExecutor, type PoolExecutorOptions } from './tasks/pool-executor.js';
export { EngineTasks, type EngineTasksOptions } from './tasks/engine-tasks.js';

// Types of the user functions run on pool threads, and their inputs (issue 15).
export type { Scheduler, SchedulerEvaluation, SchedulerResult, TaskHandler, TaskRunInput } from './user-functions.js';
