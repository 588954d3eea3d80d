/**
 * `SchedulingWorker`'s processing on its own: a real broker, state store, plan applier, slot table and backoff on a
 * manual clock, and in place of the thread pool a scripted one the test answers item by item. What a pool thread
 * would do to the slot word (start the item, heartbeat, mark it finished) the test does in shared memory itself.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { Backoff } from '../../src/backoff.js';
import { EvalBroker } from '../../src/broker/eval-broker.js';
import type { EvaluationInput } from '../../src/broker/evaluation.js';
import { AbortedError, CanceledError, InvalidPlanError, PlanAttemptsExhaustedError, UserCodeError } from '../../src/errors.js';
import { Registry } from '../../src/observability/metrics.js';
import type { Outcome, StartObserver } from '../../src/pool/outcome.js';
import type { ThreadPool } from '../../src/pool/thread-pool.js';
import type { EvalItem, WorkItem } from '../../src/protocol/messages.js';
import { SlotState, ThreadPhase } from '../../src/slots/slot-layout.js';
import { SlotTable } from '../../src/slots/slot-table.js';
import { PlanApplier } from '../../src/state/plan-applier.js';
import { StateStore } from '../../src/state/state-store.js';
import { SchedulingWorker, type DeliveryIndex } from '../../src/engine/scheduling-worker.js';
import { WorkerMetrics } from '../../src/engine/worker-metrics.js';
import { WatchedClock } from '../pool/helpers.js';

const logger = pino({ level: 'silent' });
const NACK_TIMEOUT_MS = 1000;

/** One item the worker dispatched, waiting for the test to answer it as a thread would. */
interface Dispatch {
  readonly item: EvalItem;
  readonly observer: StartObserver | undefined;
  answer(outcome: Outcome): void;
}

/** The pool's two entry points the worker uses, answered by the test. `cancel` sets the slot word as the pool does. */
class ScriptedPool implements Pick<ThreadPool, 'dispatchWith' | 'cancel' | 'startedAt'> {
  readonly cancels: Array<readonly [number, number]> = [];
  readonly #slots: SlotTable;
  readonly #waiting: Dispatch[] = [];
  #taker: ((dispatch: Dispatch) => void) | undefined;

  constructor(slots: SlotTable) {
    this.#slots = slots;
  }

  dispatchWith(item: WorkItem, observer: StartObserver | undefined, answer: (outcome: Outcome) => void): void {
    assert.equal(item.kind, 'eval');
    const dispatch: Dispatch = { item: item as EvalItem, observer, answer };
    const taker = this.#taker;
    this.#taker = undefined;
    if (taker !== undefined) taker(dispatch);
    else this.#waiting.push(dispatch);
  }

  cancel(slot: number, generation: number): boolean {
    this.cancels.push([slot, generation]);
    return this.#slots.cancel(slot, generation);
  }

  /** No thread stamps starts here: the worker counts from when it looks. */
  startedAt(): number | undefined {
    return undefined;
  }

  /** The next item the worker dispatches. */
  next(): Promise<Dispatch> {
    const waiting = this.#waiting.shift();
    if (waiting !== undefined) return Promise.resolve(waiting);
    return new Promise((resolve) => (this.#taker = resolve));
  }

  get pending(): number {
    return this.#waiting.length;
  }
}

interface Harness {
  readonly clock: WatchedClock;
  readonly broker: EvalBroker;
  readonly state: StateStore;
  readonly slots: SlotTable;
  readonly pool: ScriptedPool;
  readonly worker: SchedulingWorker;
  readonly held: string[];
  /** Timed-out nacks and explicit nacks (with their reasons), in order. */
  readonly nacks: Array<{ id: string; timedOut: boolean; reason: Error | undefined }>;
  enqueue(id: string, extra?: Partial<EvaluationInput>): ReturnType<EvalBroker['enqueue']>;
}

function harness(t: { after(fn: () => unknown): void }, options: { types?: string[]; maxPlanAttempts?: number } = {}): Harness {
  const clock = new WatchedClock(0);
  const slots = SlotTable.create({ initialSlots: 16 });
  const state = new StateStore({ tables: ['t'], logger });
  const applier = new PlanApplier({ state, logger, clock });
  let worker: SchedulingWorker | undefined;
  const broker = new EvalBroker({
    clock,
    logger,
    nackTimeoutMs: NACK_TIMEOUT_MS,
    initialNackDelayMs: 0,
    subsequentNackDelayMs: 0,
    deliveryLimit: 5,
    knownTypes: ['s'],
    // As the engine's WorkerSet does for the worker holding the token.
    extendNackDeadline: (_id, token) => worker?.deadlineProgress(token) ?? false,
  });
  const pool = new ScriptedPool(slots);
  const held: string[] = [];
  const deliveries: DeliveryIndex = { held: (token) => held.push(`held ${token}`), released: (token) => held.push(`released ${token}`) };
  worker = new SchedulingWorker({
    id: 0,
    broker,
    pool: pool as unknown as ThreadPool,
    applier,
    state,
    slots,
    clock,
    logger,
    metrics: new WorkerMetrics(new Registry()),
    backoff: new Backoff({}, { clock }),
    types: options.types ?? ['s'],
    dequeueTimeoutMs: 0,
    syncLimitMs: 5000,
    maxPlanAttempts: options.maxPlanAttempts ?? 3,
    deliveries,
  });
  const nacks: Harness['nacks'] = [];
  broker.events.on('broker:nack', ({ evaluation, timedOut, reason }) => nacks.push({ id: evaluation.id, timedOut, reason }));
  t.after(() => worker.stop());
  return {
    clock,
    broker,
    state,
    slots,
    pool,
    worker,
    held,
    nacks,
    enqueue: (id, extra = {}) => broker.enqueue({ id, jobId: id, type: 's', priority: 50, ...extra }),
  };
}

/** Lets promise jobs and `setImmediate` callbacks queued so far run (no timers). */
const turns = async (n = 3): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

const ok = (value: unknown = undefined): Outcome => ({ status: 'ok', value, waitedMs: 0 });

/** What a pool thread does when it starts the item: the start CAS, and the pool tells the observer. */
function startOnThread(h: Harness, d: Dispatch): void {
  assert.ok(h.slots.start(d.item.slot, d.item.generation, 1));
  d.observer?.itemStarted(h.clock.now());
}

test('dequeue → dispatch → ack: the evaluation goes out on the worker\'s slot at its index, and is acked with the store\'s index', async (t) => {
  const h = harness(t);
  void h.worker.start();
  const handle = h.enqueue('a', { modifyIndex: 0 });
  // The evaluation is on its way to a thread within the enqueue: the worker waited in the broker.
  assert.equal(h.pool.pending, 1);
  const d = await h.pool.next();
  assert.equal(d.item.slot, h.worker.slot);
  assert.equal(d.item.evaluation.id, 'a');
  assert.equal(d.item.attempt, 1);
  assert.equal(d.item.minIndex, 0);
  assert.equal(d.item.syncLimitMs, 5000);
  assert.equal(d.observer, h.worker, 'the worker hears when its item starts');
  assert.equal(h.slots.state(d.item.slot), SlotState.CLAIMED);
  assert.equal(h.slots.generation(d.item.slot), d.item.generation);
  assert.equal(h.worker.activity, 'scheduling');
  assert.equal(h.worker.current?.evaluation.id, 'a');
  h.state.write((txn) => txn.put('t', 'other', 1));
  d.answer(ok());
  const outcome = await handle.done;
  assert.deepEqual({ value: outcome.value, index: outcome.index, attempts: outcome.attempts }, { value: undefined, index: 1, attempts: 1 });
  assert.equal(h.slots.state(d.item.slot), SlotState.IDLE, 'the slot is finished');
  assert.equal(h.worker.current, undefined);
  assert.equal(h.worker.processed, 1);
  const token = h.held[0]!.slice('held '.length);
  assert.deepEqual(h.held, [`held ${token}`, `released ${token}`]);
  await turns();
  assert.equal(h.worker.activity, 'dequeuing', 'back in the broker');
});

test('an evaluation at a later index is dispatched to wait for it on the thread', async (t) => {
  const h = harness(t);
  void h.worker.start();
  h.enqueue('a', { modifyIndex: 7 });
  const d = await h.pool.next();
  assert.equal(d.item.minIndex, 7);
  d.answer(ok());
});

test('a failed scheduler is nacked with its reason, a canceled one given back; the redelivery goes out on a new generation', async (t) => {
  const h = harness(t);
  const givenBack: Array<Error | undefined> = [];
  h.broker.events.on('broker:give-back', ({ reason }) => givenBack.push(reason));
  void h.worker.start();
  const handle = h.enqueue('a');
  const first = await h.pool.next();
  const failure = new UserCodeError('scheduler threw');
  first.answer({ status: 'error', error: failure, retryable: false });
  const second = await h.pool.next();
  assert.deepEqual(h.nacks, [{ id: 'a', timedOut: false, reason: failure }]);
  assert.ok(second.item.generation > first.item.generation);
  assert.equal(h.worker.cancelCurrent(), true);
  second.answer({ status: 'canceled' });
  const third = await h.pool.next();
  assert.equal(h.nacks.length, 1, 'a canceled delivery is not nacked');
  assert.equal(givenBack.length, 1);
  assert.ok(givenBack[0] instanceof CanceledError);
  third.answer({ status: 'lost', error: failure });
  const fourth = await h.pool.next();
  assert.equal(h.nacks[1]!.reason, failure, 'a lost item is nacked with its thread\'s reason');
  fourth.answer(ok());
  assert.equal((await handle.done).deliveries, 3, 'the given-back delivery is not counted');
});

test('whatever a canceled attempt answers is given back, a plan included: it never commits', async (t) => {
  const h = harness(t);
  void h.worker.start();
  const handle = h.enqueue('a');
  const first = await h.pool.next();
  assert.equal(h.worker.cancelCurrent(), true);
  first.answer(ok({ writes: [{ table: 't', key: 'k', value: 'canceled', readIndex: 0 }], value: 'canceled' }));
  const second = await h.pool.next();
  assert.equal(h.state.index, 0, 'the canceled attempt\'s plan did not commit');
  second.answer(ok({ writes: [{ table: 't', key: 'k', value: 'kept', readIndex: 0 }], value: 'kept' }));
  const outcome = await handle.done;
  assert.deepEqual({ value: outcome.value, deliveries: outcome.deliveries }, { value: 'kept', deliveries: 1 });
  assert.equal(h.state.snapshot().get('t', 'k')?.value, 'kept');
});

test('a plan commits through the plan applier, and the evaluation is acked with its value at the commit\'s index', async (t) => {
  const h = harness(t);
  void h.worker.start();
  const handle = h.enqueue('a');
  const d = await h.pool.next();
  d.answer(ok({ writes: [{ table: 't', key: 'k', value: 'v', readIndex: 0 }], value: 'planned' }));
  const outcome = await handle.done;
  assert.deepEqual({ value: outcome.value, index: outcome.index, attempts: outcome.attempts }, { value: 'planned', index: 1, attempts: 1 });
  assert.equal(h.state.snapshot().get('t', 'k')?.value, 'v');
});

test('a plan with no writes releases its value at once; something that is not a plan is nacked with InvalidPlanError', async (t) => {
  const h = harness(t);
  void h.worker.start();
  const answered = h.enqueue('a');
  (await h.pool.next()).answer(ok({ writes: [], value: 42 }));
  assert.equal((await answered.done).value, 42);
  h.enqueue('b');
  (await h.pool.next()).answer(ok('not a plan'));
  const redelivered = await h.pool.next();
  assert.ok(h.nacks[0]!.reason instanceof InvalidPlanError);
  redelivered.answer(ok());
});

test('a partly rejected plan re-runs the scheduler at the refresh index as the next attempt; past maxPlanAttempts the evaluation fails', async (t) => {
  const h = harness(t, { maxPlanAttempts: 3 });
  h.state.write((txn) => txn.put('t', 'k', 'taken'));
  void h.worker.start();
  const handle = h.enqueue('a');
  // Each attempt plans against index 0: the record was written at 1, so the write is rejected.
  const stale = { writes: [{ table: 't', key: 'k', value: 'mine', readIndex: 0 }] };
  const attempts: EvalItem[] = [];
  for (let attempt = 1; attempt <= 3; attempt++) {
    const d = await h.pool.next();
    attempts.push(d.item);
    d.answer(ok(stale));
  }
  await assert.rejects(handle.done, PlanAttemptsExhaustedError);
  assert.deepEqual(attempts.map((a) => [a.attempt, a.minIndex]), [[1, 0], [2, 1], [3, 1]]);
  assert.equal(new Set(attempts.map((a) => a.generation)).size, 3, 'each attempt on a fresh claim');
  assert.deepEqual(h.nacks, [], 'failed, not nacked');
  assert.equal(h.state.snapshot().get('t', 'k')?.value, 'taken');
});

test('a worker that stops between plan attempts gives the evaluation back instead of running it again', async (t) => {
  const h = harness(t);
  h.state.write((txn) => txn.put('t', 'k', 'taken'));
  void h.worker.start();
  h.enqueue('a');
  const d = await h.pool.next();
  const stopped = h.worker.stop();
  d.answer(ok({ writes: [{ table: 't', key: 'k', value: 'mine', readIndex: 0 }] }));
  await stopped;
  assert.equal(h.worker.status, 'stopped');
  assert.equal(h.nacks.length, 0, 'given back, not nacked');
  assert.deepEqual(h.broker.inspect('a'), { state: 'ready', queue: 's', deliveries: 0, holdsJobSlot: true });
  assert.equal(h.worker.givenBack, 1);
  assert.equal(h.pool.pending, 0, 'no second attempt');
});

test('a failing dequeue backs off 20 ms, then 80 ms; a dequeue that works resets the backoff', async (t) => {
  const h = harness(t);
  h.broker.setEnabled(false);
  const first = h.clock.nextArmed(20);
  void h.worker.start();
  await first;
  assert.equal(h.worker.activity, 'backoff');
  const second = h.clock.nextArmed(80);
  h.clock.advance(19);
  await turns();
  assert.equal(h.worker.activity, 'backoff', 'not retried before its delay');
  h.clock.advance(1);
  await second;
  h.broker.setEnabled(true);
  h.clock.advance(80);
  await turns();
  assert.equal(h.worker.activity, 'dequeuing');
  const handle = h.enqueue('a');
  (await h.pool.next()).answer(ok());
  await handle.done;
  await turns();
  // Disabling the broker now fails the dequeue the worker waits in: the backoff starts over from its baseline.
  const again = h.clock.nextArmed(20);
  h.broker.setEnabled(false);
  await again;
  assert.equal(h.worker.activity, 'backoff');
});

test('a worker without scheduler types never asks the broker: it waits for stop', async (t) => {
  const h = harness(t, { types: [] });
  h.broker.setEnabled(false);
  const started = h.worker.start();
  await turns();
  assert.equal(h.worker.activity, 'idle');
  assert.equal(h.clock.pendingTimers, 0, 'no backoff: nothing failed');
  await h.worker.stop();
  await started;
  assert.equal(h.worker.status, 'stopped');
});

test('pause takes effect at the next dequeue and holds evaluations in the broker; resume serves them', async (t) => {
  const h = harness(t);
  void h.worker.start();
  await turns();
  h.worker.pause();
  await turns();
  h.enqueue('a');
  await turns();
  assert.equal(h.pool.pending, 0, 'paused: nothing dispatched');
  assert.equal(h.worker.status, 'paused');
  h.worker.resume();
  const d = await h.pool.next();
  assert.equal(d.item.evaluation.id, 'a');
  d.answer(ok());
});

test('abortCurrent cancels the item through the pool, and when the thread lets go the evaluation is removed, not redelivered', async (t) => {
  const h = harness(t);
  void h.worker.start();
  const handle = h.enqueue('a');
  const d = await h.pool.next();
  startOnThread(h, d);
  const token = h.held[0]!.slice('held '.length);
  assert.equal(h.worker.abortCurrent('not-the-token'), false);
  assert.equal(h.worker.abortCurrent(token, 'caller gave up'), true);
  assert.deepEqual(h.pool.cancels, [[d.item.slot, d.item.generation]]);
  assert.equal(h.slots.state(d.item.slot), SlotState.CANCEL);
  d.answer({ status: 'canceled' });
  await assert.rejects(handle.done, AbortedError);
  await turns();
  assert.equal(h.pool.pending, 0);
  assert.deepEqual(h.nacks, []);
});

test('nack deadline: waiting for a thread is never late, a started attempt counts from its start, a heartbeat extends it', async (t) => {
  const h = harness(t);
  const extensions: number[] = [];
  h.broker.events.on('broker:extend', ({ deadline }) => extensions.push(deadline));
  void h.worker.start();
  const handle = h.enqueue('a');
  const d = await h.pool.next();
  h.clock.advance(NACK_TIMEOUT_MS); // 1000: not started, still claimed
  h.clock.advance(NACK_TIMEOUT_MS); // 2000: however long it waits
  h.clock.advance(500);
  startOnThread(h, d); // 2500
  h.clock.advance(500); // 3000: counts from 2500
  h.clock.advance(400);
  h.slots.heartbeat(d.item.slot, d.item.generation); // 3400
  h.clock.advance(100); // 3500: the heartbeat is progress
  assert.deepEqual(extensions, [2000, 3000, 3500, 4500]);
  assert.equal(h.nacks.length, 0);
  h.clock.advance(1000); // 4500: started at 2500, no heartbeat since: late
  assert.deepEqual(h.nacks.map((n) => [n.id, n.timedOut]), [['a', true]]);
  // The thread's answer comes after its delivery timed out: the ack is refused and the redelivery runs.
  d.answer(ok());
  const again = await h.pool.next();
  assert.equal(again.item.evaluation.id, 'a');
  again.answer(ok());
  assert.equal((await handle.done).deliveries, 2);
});

test('nack deadline: an attempt whose scheduler has returned, its result still on the way from its thread, is not timed out', async (t) => {
  const h = harness(t);
  void h.worker.start();
  const handle = h.enqueue('a');
  const d = await h.pool.next();
  startOnThread(h, d); // 0
  h.clock.advance(300);
  // What the thread loop does before a result waits in its outbox (a long item behind it may hold it there).
  h.slots.setPhase(d.item.slot, d.item.generation, ThreadPhase.FINISHED);
  assert.equal(h.slots.state(d.item.slot), SlotState.RUNNING);
  for (let i = 0; i < 5; i++) h.clock.advance(NACK_TIMEOUT_MS);
  assert.deepEqual(h.nacks, [], 'five nack timeouts after its start, the finished attempt is still not late');
  d.answer(ok({ writes: [], value: 'late but fine' }));
  const outcome = await handle.done;
  assert.deepEqual({ value: outcome.value, deliveries: outcome.deliveries }, { value: 'late but fine', deliveries: 1 });
});

test('an answer that ends the delivery acks it and sends the next evaluation within the same call: no promise per evaluation', async (t) => {
  const h = harness(t);
  const acked: string[] = [];
  h.broker.events.on('broker:ack', ({ evaluation }) => acked.push(evaluation.id));
  for (const id of ['a', 'b', 'c']) h.enqueue(id);
  void h.worker.start();
  const first = await h.pool.next();
  assert.equal(first.item.evaluation.id, 'a');
  // Answered as the pool does after a results message; nothing else runs in between (no await, no promise job).
  first.answer(ok());
  assert.deepEqual(acked, ['a'], 'acked inside the answer');
  assert.equal(h.pool.pending, 1, 'and the next evaluation already dispatched');
  const second = await h.pool.next();
  assert.equal(second.item.evaluation.id, 'b');
  let givenBack = 0;
  h.broker.events.on('broker:give-back', () => givenBack++);
  second.answer({ status: 'canceled' });
  assert.equal(givenBack, 1, 'a cancel is given back inside the answer too');
  assert.equal(h.pool.pending, 1);
  const third = await h.pool.next();
  assert.equal(third.item.evaluation.id, 'b', 'the given-back one is ready again at once, ahead of c');
  third.answer(ok({ writes: [], value: 7 }));
  assert.deepEqual(acked, ['a', 'b'], 'a plan without writes is acked at once');
  const fourth = await h.pool.next();
  assert.equal(fourth.item.evaluation.id, 'c');
  fourth.answer(ok());
  assert.deepEqual(acked, ['a', 'b', 'c']);
  assert.equal(h.worker.processed, 4);
});
