/**
 * The in-memory backend, every engine's default: the broker, the state store, the plan applier and the task store
 * live in this process's memory and answer synchronously. Nothing survives the process; `npm start` needs no
 * database.
 */
import { EvalBroker } from '../broker/eval-broker.js';
import { PlanApplier } from '../state/plan-applier.js';
import { StateStore } from '../state/state-store.js';
import { MemoryTaskStore } from '../tasks/memory-task-store.js';
import type { Backend, BackendContext, BackendFactory } from '../backend/backend.js';

/** The in-memory backend's parts, with their own types (`engine.broker` is an `EvalBroker`, and so on). */
export interface MemoryBackend extends Backend {
  readonly broker: EvalBroker;
  readonly state: StateStore;
  readonly plans: PlanApplier;
  readonly tasks: MemoryTaskStore;
  open(): void;
  close(): void;
}

/** The factory of in-memory backends (`createEngine`'s default `backend`). */
export function memoryBackend(): BackendFactory<MemoryBackend> {
  return MEMORY;
}

const MEMORY: BackendFactory<MemoryBackend> = Object.freeze({
  name: 'memory',
  create(context: BackendContext): MemoryBackend {
    const { clock, logger, registry } = context;
    const state = new StateStore({ tables: context.tables, logger });
    const broker = new EvalBroker({ ...context.broker, clock, logger, registry });
    const plans = new PlanApplier({
      state,
      registry,
      logger,
      clock,
      // A plan commits only while its delivery is current: the broker says, in the same synchronous apply.
      fence: broker,
      ...(context.evaluatePlan === undefined ? {} : { evaluatePlan: context.evaluatePlan }),
    });
    const tasks = new MemoryTaskStore({ clock });
    return {
      broker,
      state,
      plans,
      tasks,
      open: () => undefined,
      // Queued plans are rejected; what the broker holds stays there (the engine rejects the outcomes it waits for).
      close: () => plans.stop(),
    };
  },
});
