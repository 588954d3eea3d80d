/** The engine's lifecycle states, events and stats shapes. */
import type { BrokerStats } from '../broker/broker-types.js';
import type { ModuleLoadError } from '../errors.js';
import type { ThreadExit, ThreadPoolStats } from '../pool/pool-types.js';
import type { TaskSchedulerStats } from '../tasks/scheduler-state.js';
import type { WorkerInfo } from './worker-set.js';

export type { WorkerInfo } from './worker-set.js';

export const EngineState = Object.freeze({
  CREATED: 'created',
  STARTING: 'starting',
  RUNNING: 'running',
  STOPPING: 'stopping',
  STOPPED: 'stopped',
});
export type EngineStateValue = (typeof EngineState)[keyof typeof EngineState];

export interface EngineEvents {
  'engine:start': { readonly threads: number; readonly workers: number };
  'engine:stop': { readonly requeued: number; readonly forced: boolean };
  /** A pool thread ended unexpectedly; the items it held were accounted for (redelivered or failed). */
  'engine:thread-exit': ThreadExit;
  /** A pool thread started after `start()` could not load a registered module (at `start()`, it rejects instead). */
  'engine:module-error': { readonly threadIndex: number; readonly error: ModuleLoadError };
}

/** `engine.stats()`. `S` is what its backend's `broker.stats()` answers (a shared broker may answer a promise). */
export interface EngineStats<S = BrokerStats> {
  readonly state: EngineStateValue;
  readonly broker: S;
  readonly pool: ThreadPoolStats;
  readonly workers: readonly WorkerInfo[];
  readonly plans: { readonly queueDepth: number; readonly stateIndex: number };
  readonly tasks: TaskSchedulerStats;
  readonly slots: { readonly allocated: number; readonly bytes: number };
}

export interface StopOptions {
  /** How long evaluations in hand may take to finish before they are canceled and given back, ms. Default 5000. */
  readonly graceMs?: number;
}
