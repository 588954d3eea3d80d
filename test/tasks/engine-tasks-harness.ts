/**
 * `EngineTasks` without threads: a stand-in pool whose queue depth the test sets, a slot table the test sizes, a
 * ManualClock. Runs are never dispatched here (the tasks these tests add are not due), so `dispatch` throws.
 */
import { resolveBackoffOptions } from '../../src/backoff.js';
import { ManualClock } from '../../src/clock.js';
import { Registry } from '../../src/observability/metrics.js';
import type { ThreadPool } from '../../src/pool/thread-pool.js';
import { SlotTable } from '../../src/slots/slot-table.js';
import { EngineTasks } from '../../src/engine/engine-tasks.js';
import { MemoryTaskStore } from '../../src/tasks/memory-task-store.js';
import { quietLogger } from './fixtures.js';

/** The part of a `ThreadPool` the executor reads outside `execute`. */
export class StandInPool {
  queued = 0;
  stats(): { queued: number } {
    return { queued: this.queued };
  }
  dispatch(): never {
    throw new Error('StandInPool: nothing is dispatched in these tests');
  }
}

export interface EngineTasksHarness {
  readonly clock: ManualClock;
  readonly pool: StandInPool;
  readonly slots: SlotTable;
  readonly registry: Registry;
  readonly tasks: EngineTasks;
}

export function engineTasks(options: { maxSlots?: number; registry?: Registry; start?: number; store?: (clock: ManualClock) => MemoryTaskStore } = {}): EngineTasksHarness {
  const clock = new ManualClock(options.start ?? 0);
  const pool = new StandInPool();
  const maxSlots = options.maxSlots ?? 64;
  const slots = SlotTable.create({ initialSlots: Math.min(64, maxSlots), maxSlots });
  const registry = options.registry ?? new Registry();
  const tasks = new EngineTasks({
    store: options.store?.(clock) ?? new MemoryTaskStore({ clock }),
    pool: pool as unknown as ThreadPool,
    slots,
    handlers: ['h'],
    clock,
    logger: quietLogger,
    registry,
    backoff: resolveBackoffOptions(undefined),
    tickMs: 0,
    claimTtlMs: 10_000,
    cancelGraceMs: 1_000,
  });
  return { clock, pool, slots, registry, tasks };
}
