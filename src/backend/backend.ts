/**
 * A backend: the broker, the state store, its plan committer and the task store an engine runs on, made by a
 * `BackendFactory` from the engine's settings. `createEngine({ backend })` takes the factory (default
 * `memoryBackend()`: everything in this process's memory, synchronous, no database); the PostgreSQL backend
 * (`tickpool/postgres`) is another factory, shared by any number of engine processes.
 */
import type { Clock } from '../clock.js';
import type { EvalBrokerOptions } from '../broker/broker-options.js';
import type { Logger } from '../observability/logger.js';
import type { Registry } from '../observability/metrics.js';
import type { EvaluatePlan } from '../state/types.js';
import type { MaybePromise } from '../tasks/maybe-promise.js';
import type { BrokerBackend } from './broker-backend.js';
import type { PlanBackend, StateBackend } from './state-backend.js';
import type { ClaimSettings, TaskBackend } from './task-backend.js';

/** The broker settings an engine hands its backend: the user's `broker` options, its known types and payload limit. */
export interface BrokerSettings extends Omit<EvalBrokerOptions, 'clock' | 'logger' | 'registry' | 'extendNackDeadline' | 'validatePayload'> {
  /** The registered schedulers' types: any other is failed at admission (`UnknownSchedulerError`). */
  readonly knownTypes: readonly string[];
  /** Largest payload admitted, bytes of its structured-clone serialization (`PayloadTooLargeError`). */
  readonly maxPayloadBytes: number;
}

/** What an engine gives its backend to build the parts with. */
export interface BackendContext {
  readonly clock: Clock;
  readonly logger: Logger;
  /** Where the parts register their metrics (the engine's registry). */
  readonly registry: Registry;
  /** The state store's tables, fixed for its lifetime. */
  readonly tables: readonly string[];
  /** The user's plan check, run by the plan committer after the version check. */
  readonly evaluatePlan: EvaluatePlan | undefined;
  readonly broker: BrokerSettings;
  /** The engine's claim settings, for a backend whose task store is shared (checked when it is created). */
  readonly claims?: ClaimSettings;
}

/**
 * The parts, built and not yet opened. The engine talks to them only through these interfaces. Lifecycle: `open()`
 * once, in `engine.start()` before the pool threads are seeded from `state.full()` (a shared backend connects,
 * migrates and loads its replica there); `close()` once, last in `engine.stop()` (rejects queued plans, gives back
 * what this process holds, disconnects), also for an engine stopped without having started. Either may answer with
 * a promise; the in-memory backend answers at once.
 */
export interface Backend {
  readonly broker: BrokerBackend;
  readonly state: StateBackend;
  readonly plans: PlanBackend;
  readonly tasks: TaskBackend;
  open(): MaybePromise<void>;
  close(): MaybePromise<void>;
}

/**
 * Makes a backend for one engine. `create` is called once, synchronously, by `createEngine` (no I/O there: options
 * are checked, connections wait for `open()`); it throws typed errors for settings it cannot serve.
 */
export interface BackendFactory<B extends Backend = Backend> {
  /** A name for logs and errors (`memory`, `postgres`). */
  readonly name: string;
  create(context: BackendContext): B;
}
