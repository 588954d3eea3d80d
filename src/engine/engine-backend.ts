/** The backend an engine runs on: made by the `backend` option's factory from the engine's settings. */
import type { Backend } from '../backend/backend.js';
import { assertBackend } from './backend-checks.js';
import type { ResolvedEngineOptions } from './options.js';

/**
 * Asks the factory for the engine's backend: the engine's clock, logger and registry, its tables and plan check,
 * and for the broker the user's `broker` options, the registered schedulers' types (any other is failed at
 * admission) and `maxPayloadBytes` (checked by the broker at every enqueue, through the engine or not).
 */
export function createBackend(o: ResolvedEngineOptions): Backend {
  const factory = o.backend;
  const backend: unknown = factory.create({
    clock: o.clock,
    logger: o.logger,
    registry: o.registry,
    tables: o.tables,
    evaluatePlan: o.evaluatePlan,
    broker: { ...o.broker, knownTypes: Object.keys(o.schedulers), maxPayloadBytes: o.maxPayloadBytes },
    claims: { claimTtlMs: o.claimTtlMs, tickMs: o.tickMs, cancelGraceMs: o.cancelGraceMs },
  });
  assertBackend(factory.name, backend);
  return backend;
}
