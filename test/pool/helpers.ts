/**
 * A `ThreadPool` on real threads with a manual clock on main (idle timeouts, cancel grace, respawn delays move only
 * when the test says), and helpers to dispatch items the way the engine does: claim a slot, dispatch, finish the
 * slot when the outcome arrives.
 */
import { MessagePort } from 'node:worker_threads';
import { pino } from 'pino';
import { Backoff } from '../../src/backoff.js';
import { WatchedClock } from '../helpers/watched-clock.js';
import type { ThreadExit } from '../../src/pool/pool-types.js';
import type { Outcome } from '../../src/pool/thread-pool.js';
import { ThreadPool } from '../../src/pool/thread-pool.js';
import { SlotTable } from '../../src/slots/slot-table.js';
import { StateStore } from '../../src/state/state-store.js';

export { WatchedClock };

export const fixture = (name: string): URL => new URL(`../fixtures/${name}.js`, import.meta.url);
const ref = (name: string): { url: string; exportName: string } => ({ url: fixture(name).href, exportName: 'default' });

export interface PoolHarness {
  readonly pool: ThreadPool;
  readonly clock: WatchedClock;
  readonly slots: SlotTable;
  readonly state: StateStore;
  readonly exits: ThreadExit[];
  /** Dispatches an evaluation of `type` on a fresh slot. */
  evaluate(type: string, payload?: unknown, extra?: { minIndex?: number; priority?: number; fields?: Record<string, unknown> }): Dispatched;
  /** Dispatches a task run of `handler` on a fresh slot. */
  run(handler: string, payload: unknown): Dispatched;
}

export interface Dispatched {
  readonly slot: number;
  readonly generation: number;
  readonly outcome: Promise<Outcome>;
}

export const POOL_DEFAULTS = Object.freeze({ cancelGraceMs: 200, idleTimeoutMs: 100 });

export function poolHarness(options: { minThreads: number; maxThreads: number; monotonicNow?: () => number }): PoolHarness {
  const logger = pino({ level: 'silent' });
  const clock = new WatchedClock(0);
  const slots = SlotTable.create({ initialSlots: 1024 });
  const state = new StateStore({ tables: ['t'], logger });
  const exits: ThreadExit[] = [];
  const pool = new ThreadPool({
    ...options,
    slots,
    state,
    schedulers: {
      gated: ref('gated'),
      noop: ref('noop'),
      ordered: ref('ordered'),
      hostile: ref('hostile-throw'),
      held: ref('held-boot'),
      spin: ref('spin-ms'),
    },
    handlers: { noop: ref('noop') },
    clock,
    logger,
    cancelGraceMs: POOL_DEFAULTS.cancelGraceMs,
    idleTimeoutMs: POOL_DEFAULTS.idleTimeoutMs,
    respawnBackoff: new Backoff({}, { clock }),
    onThreadExit: (exit) => exits.push(exit),
  });
  let next = 0;
  const claim = (): { slot: number; generation: number } => {
    const slot = slots.allocate(1);
    return { slot, generation: slots.claim(slot) };
  };
  const settle = (slot: number, generation: number, outcome: Promise<Outcome>): Promise<Outcome> =>
    outcome.then((o) => {
      slots.finish(slot, generation);
      return o;
    });
  return {
    pool,
    clock,
    slots,
    state,
    exits,
    evaluate(type, payload, extra = {}) {
      const { slot, generation } = claim();
      const id = `e${next++}`;
      const evaluation = { id, type, priority: extra.priority ?? 50, modifyIndex: 0, payload, ...extra.fields };
      // Frozen: the pool keeps its own record of an item and never writes into the caller's object.
      const outcome = pool.dispatch(Object.freeze({
        kind: 'eval',
        slot,
        generation,
        attempt: 1,
        evaluation,
        minIndex: extra.minIndex ?? 0,
        syncLimitMs: 60_000,
      }));
      return { slot, generation, outcome: settle(slot, generation, outcome) };
    },
    run(handler, payload) {
      const { slot, generation } = claim();
      const runId = `r${next++}`;
      const outcome = pool.dispatch(Object.freeze({
        kind: 'run',
        slot,
        generation,
        attempt: 1,
        run: { taskId: 'task', runId, scheduledFor: 0, runAt: 0 },
        handler,
        payload,
      }));
      return { slot, generation, outcome: settle(slot, generation, outcome) };
    },
  };
}

/**
 * Fails with `what` unless `promise` settles first. Only for outcomes that the code under test must deliver on its
 * own (a held or lost message would otherwise hang the file): never a pause, the test goes on as soon as it settles.
 */
export function within<T>(promise: Promise<T>, what: string, ms = 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const watchdog = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Expected ${what} within ${ms} ms, but it did not happen`)), ms);
  });
  return Promise.race([promise, watchdog]).finally(() => clearTimeout(timer));
}

/** Yields event-loop turns until `condition` holds (for state that changes without an event, e.g. a thread ending). */
export async function until(condition: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`Expected ${what} within ${ms} ms, but it did not happen`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** Counts `{ type: 'stop' }` messages main posts to pool threads (the idle shrink's only trace until a thread ends). */
export function countStops(): { readonly count: number; restore(): void } {
  const original = MessagePort.prototype.postMessage;
  const counter = {
    count: 0,
    restore(): void {
      MessagePort.prototype.postMessage = original;
    },
  };
  MessagePort.prototype.postMessage = function (this: MessagePort, message: unknown, ...rest: unknown[]): void {
    if (message !== null && typeof message === 'object' && (message as { type?: unknown }).type === 'stop') counter.count++;
    return (original as (...args: unknown[]) => void).call(this, message, ...rest);
  };
  return counter;
}
