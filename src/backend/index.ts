// The backend seams: what the engine needs from a broker, a state store, a plan committer and a task store, and
// the factory that makes them. Internal to the package (the PostgreSQL backend implements them from `src/postgres/`);
// users pick a backend with `createEngine({ backend })`.
export type { Backend, BackendContext, BackendFactory, BrokerSettings } from './backend.js';
export type { BrokerBackend, DeliveryRef, DequeueCallback, LeaseKeeper } from './broker-backend.js';
export type { ChangeFeed, PlanBackend, PlanDelivery, PlanOutcome, StateBackend } from './state-backend.js';
export type { ClaimSettings, LocalTaskBackend, SharedTaskBackend, StoredTask, TaskBackend } from './task-backend.js';
export type { MaybePromise } from '../tasks/maybe-promise.js';
