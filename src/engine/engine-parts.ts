/**
 * The engine's own parts beside its backend: the thread pool and the scheduling workers, each built from the
 * resolved options and the backend's seams (the pool reads the state's change feed; a worker talks to the broker,
 * the plan committer and the state through their interfaces only).
 */
import type { Backend } from '../backend/backend.js';
import { Backoff } from '../backoff.js';
import type { EngineEvents } from './engine-types.js';
import type { TypedEmitter } from '../events.js';
import type { ResolvedEngineOptions } from './options.js';
import type { EngineTracing } from '../observability/tracing.js';
import { ThreadPool } from '../pool/thread-pool.js';
import type { SlotTable } from '../slots/slot-table.js';
import { SchedulingWorker, type DeliveryIndex } from './scheduling-worker.js';
import { WorkerMetrics } from './worker-metrics.js';

/** Work ahead past which the broker's pacing need not count (ms per thread). */
const WORK_AHEAD_COUNTED_MS = 1_000;

/**
 * The pool on `slots`, fed by `backend.state`, pacing the broker's round trips; thread exits and late module errors
 * become engine events.
 */
export function createPool(o: ResolvedEngineOptions, slots: SlotTable, backend: Backend, events: TypedEmitter<EngineEvents>): ThreadPool {
  const pool = new ThreadPool({
    minThreads: o.threads.min,
    maxThreads: o.threads.max,
    slots,
    state: backend.state,
    schedulers: o.schedulers,
    handlers: o.handlers,
    clock: o.clock,
    logger: o.logger,
    cancelGraceMs: o.cancelGraceMs,
    idleTimeoutMs: o.idleTimeoutMs,
    resourceLimits: o.resourceLimits,
    respawnBackoff: new Backoff(o.backoff, { clock: o.clock }),
    onThreadExit: (exit) => events.emit('engine:thread-exit', exit),
    onModuleError: (threadIndex, error) => events.emit('engine:module-error', { threadIndex, error }),
  });
  // A broker with round trips batches them while the threads have work queued, and leases only while a thread will be
  // free soon (see `BrokerBackend.paceBy`); it asks on every dequeue and ack, and a second of work ahead is more than
  // any round trip it paces.
  backend.broker.paceBy?.(
    () => pool.workAheadMs(WORK_AHEAD_COUNTED_MS),
    (withinMs) => pool.threadsFreeWithin(withinMs),
  );
  return pool;
}

/** What makes each scheduling worker (for `WorkerSet.serve`); `abortLost` reaches an abort its worker could not. */
export function workerFactory(
  o: ResolvedEngineOptions,
  parts: { readonly backend: Backend; readonly pool: ThreadPool; readonly slots: SlotTable; readonly tracing?: EngineTracing },
  abortLost: (evaluationId: string, cause: unknown) => void,
): (id: number, deliveries: DeliveryIndex) => SchedulingWorker {
  const metrics = new WorkerMetrics(o.registry);
  const types = Object.keys(o.schedulers);
  const { backend, pool, slots } = parts;
  return (id, deliveries) =>
    new SchedulingWorker({
      id,
      deliveries,
      broker: backend.broker,
      pool,
      applier: backend.plans,
      state: backend.state,
      slots,
      clock: o.clock,
      logger: o.logger,
      metrics,
      backoff: new Backoff(o.backoff, { clock: o.clock }),
      types,
      dequeueTimeoutMs: o.dequeueTimeoutMs,
      syncLimitMs: o.syncLimitMs,
      maxPlanAttempts: o.maxPlanAttempts,
      abortLost,
      ...(parts.tracing === undefined ? {} : { tracing: parts.tracing }),
    });
}
