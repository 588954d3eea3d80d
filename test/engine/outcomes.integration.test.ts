/**
 * Outcomes through the whole engine, on real pool threads: `engine.run()` resolves the scheduler's value once its
 * plan committed, and rejects with the typed error of every way an evaluation can end without an ack. Concurrency
 * is driven by shared-memory gates and events, never by sleeps.
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { after, test } from 'node:test';
import { pino } from 'pino';
import { createEngine, type Engine } from '../../src/engine/engine.js';
import {
  AbortedError,
  DeliveryLimitError,
  InvalidStateError,
  PlanAttemptsExhaustedError,
  SupersededError,
  TickpoolError,
  UnknownSchedulerError,
} from '../../src/errors.js';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';

const fixture = (name: string): URL => new URL(`../fixtures/${name}.js`, import.meta.url);
const logger = pino({ level: 'silent' });
const engines: Engine[] = [];
after(async () => {
  await Promise.all(engines.map((e) => e.stop({ graceMs: 100 })));
});

async function started(options: Parameters<typeof createEngine>[0] = {}): Promise<Engine> {
  const engine = createEngine({
    threads: 2,
    workers: 4,
    logger,
    tables: ['t', 'counters'],
    schedulers: { echo: fixture('plan-echo'), noop: fixture('noop'), gated: fixture('gated'), inc: fixture('conflict') },
    ...options,
  });
  engines.push(engine);
  await engine.start();
  return engine;
}

function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => assert.fail(`expected a rejection, got ${JSON.stringify(value)}`),
    (error: unknown) => error,
  );
}

const turns = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

test("run() resolves the scheduler's value with the index its plan committed at", async () => {
  const engine = await started();
  const plan = { writes: [{ table: 't', key: 'k', value: 1, readIndex: 0 }], value: { placed: ['k'] } };
  const outcome = await engine.run({ type: 'echo', payload: { plan } });
  assert.match(outcome.id, /^[0-9a-f-]{36}$/, 'a random id when none is given');
  assert.deepEqual(outcome, { id: outcome.id, status: 'acked', value: { placed: ['k'] }, index: 1, attempts: 1, deliveries: 1 });
  assert.equal(engine.state.snapshot().get('t', 'k')?.modifyIndex, 1);
  const submitted = async (): Promise<number> => (await engine.options.registry.getSingleMetric('tickpool_plan_submitted_total')!.get()).values[0]?.value ?? 0;
  const plansBefore = await submitted();
  const nothing = await engine.run({ type: 'echo', payload: { plan: { writes: [], value: 'read only' } } });
  assert.equal(nothing.value, 'read only');
  assert.equal(nothing.index, 1, 'it wrote nothing: the store index at ack');
  assert.equal(await submitted(), plansBefore, 'a plan without writes has nothing to commit: it skips the plan queue');
  const undefinedPlan = await engine.run({ id: 'n1', type: 'noop' });
  assert.deepEqual(undefinedPlan, { id: 'n1', status: 'acked', value: undefined, index: 1, attempts: 1, deliveries: 1 });
});

test("enqueue() returns the handle; done resolves the same outcome run() would", async () => {
  const engine = await started();
  const handle = engine.enqueue({ id: 'h', type: 'echo', payload: { plan: { writes: [], value: 42 } } });
  assert.equal(handle.id, 'h');
  await handle.accepted;
  const again = engine.enqueue({ id: 'h', type: 'echo' });
  assert.equal(again.id, 'h', 'an id the broker holds: a handle of that evaluation');
  assert.equal(again.done, handle.done, '… with the same outcome');
  assert.equal((await handle.done).value, 42);
});

test('after a plan refresh, the value of the attempt that committed wins', async () => {
  const engine = await started();
  const gate = newGate();
  const [a, b] = await Promise.all([
    engine.run({ id: 'a', type: 'inc', payload: { gate, key: 'k' } }),
    engine.run({ id: 'b', type: 'inc', payload: { gate, key: 'k' } }),
  ]);
  const [first, second] = a.attempts === 1 ? [a, b] : [b, a];
  assert.deepEqual(first.value, { by: first.id, attempt: 1, count: 1 });
  assert.equal(second.attempts, 2);
  assert.deepEqual(second.value, { by: second.id, attempt: 2, count: 2 }, 'not the first attempt’s value, whose plan was rejected');
  assert.ok(second.index > first.index);
  assert.equal(second.index, engine.state.snapshot().get('counters', 'k')?.modifyIndex);
});

test('past the delivery limit run() rejects with DeliveryLimitError, the last failure as its cause', async () => {
  const engine = await started({ broker: { deliveryLimit: 2, initialNackDelayMs: 0, subsequentNackDelayMs: 0 } });
  const error = await rejection(engine.run({ type: 'echo', payload: { plan: 'not a plan' } }));
  assert.ok(error instanceof DeliveryLimitError, String(error));
  assert.equal((error.cause as TickpoolError).code, 'ERR_INVALID_PLAN');
  assert.equal(error.details?.['deliveries'], 2);
});

test('a plan still rejected after maxPlanAttempts rejects with PlanAttemptsExhaustedError', async () => {
  const engine = await started({ maxPlanAttempts: 1 });
  const gate = newGate();
  const settled = await Promise.allSettled([
    engine.run({ id: 'a', type: 'inc', payload: { gate, key: 'k' } }),
    engine.run({ id: 'b', type: 'inc', payload: { gate, key: 'k' } }),
  ]);
  assert.deepEqual(settled.map((s) => s.status).sort(), ['fulfilled', 'rejected']);
  const lost = settled.find((s) => s.status === 'rejected') as PromiseRejectedResult;
  assert.ok(lost.reason instanceof PlanAttemptsExhaustedError, String(lost.reason));
});

test('an evaluation of an unregistered type rejects with UnknownSchedulerError', async () => {
  const engine = await started();
  const error = await rejection(engine.run({ type: 'nope' }));
  assert.ok(error instanceof UnknownSchedulerError);
});

test('an evaluation superseded by a newer one of its job rejects with SupersededError naming it', async () => {
  const engine = await started();
  const gate = newGate();
  const holder = engine.run({ id: 'holder', jobId: 'job', type: 'gated', payload: { gate } });
  await waitFor(gate, Gate.STARTED, 1);
  const older = engine.run({ id: 'older', jobId: 'job', type: 'noop' });
  // Pending evaluations of a job are ordered newest first (no modifyIndex here: the later enqueue).
  const newer = engine.run({ id: 'newer', jobId: 'job', type: 'noop' });
  set(gate, Gate.RELEASE, 1);
  await holder;
  const error = await rejection(older);
  assert.ok(error instanceof SupersededError);
  assert.equal(error.supersededBy, 'newer');
  assert.equal((await newer).id, 'newer');
});

test('stop() rejects the outcome of what is still in the broker with InvalidStateError, and keeps it there', async () => {
  const idle = createEngine({ threads: 1, logger, schedulers: { noop: fixture('noop') } });
  engines.push(idle);
  const never = idle.enqueue({ id: 'before-start', type: 'noop' });
  await idle.stop();
  assert.ok((await rejection(never.done)) instanceof InvalidStateError);

  const engine = await started();
  engine.pauseWorkers();
  const waiting = engine.run({ id: 'w', type: 'noop' });
  await engine.stop();
  const error = await rejection(waiting);
  assert.ok(error instanceof InvalidStateError);
  assert.match(error.message, /"w"/);
  assert.equal(engine.broker.inspect('w')?.state, 'ready');
});

test('abort before dequeue: removed from the broker, AbortedError, and the job’s next evaluation is promoted', async () => {
  const engine = await started();
  engine.pauseWorkers();
  const controller = new AbortController();
  const aborted = engine.run({ id: 'a', jobId: 'job', type: 'noop' }, { signal: controller.signal });
  const next = engine.run({ id: 'b', jobId: 'job', type: 'noop' });
  assert.equal(engine.broker.inspect('b')?.state, 'pending');
  controller.abort(new Error('caller left'));
  const error = await rejection(aborted);
  assert.ok(error instanceof AbortedError);
  assert.equal((error.cause as Error).message, 'caller left');
  assert.equal(engine.broker.inspect('a'), undefined);
  assert.equal(engine.broker.inspect('b')?.state, 'ready');
  engine.resumeWorkers();
  assert.equal((await next).id, 'b');
});

test('abort during the run: the scheduler sees the cancel, the evaluation is not redelivered', async () => {
  const engine = await started({ broker: { initialNackDelayMs: 0, subsequentNackDelayMs: 0 } });
  const gate = newGate();
  const controller = new AbortController();
  const run = engine.run({ id: 'busy', type: 'gated', payload: { gate } }, { signal: controller.signal });
  await waitFor(gate, Gate.STARTED, 1);
  controller.abort();
  assert.ok((await rejection(run)) instanceof AbortedError);
  assert.equal(Atomics.load(gate, Gate.SAW_CANCEL), 1, 'the scheduler saw ctx.canceled');
  assert.equal(engine.broker.inspect('busy'), undefined, 'removed, not nacked for redelivery');
  await turns(5);
  assert.equal(Atomics.load(gate, Gate.CALLS), 1, 'never delivered again');
  assert.equal(engine.stats().pool.threadExits, 0);
  // The engine carries on.
  assert.equal((await engine.run({ type: 'noop' })).status, 'acked');
});

test('run() refuses bad options and an aborted signal without enqueueing anything', async () => {
  const engine = await started();
  engine.pauseWorkers();
  const codes = await Promise.all(
    [
      engine.run({ type: 'noop' }, { signal: 'soon' } as never),
      engine.run({ type: 'noop' }, { timeout: 5 } as never),
      engine.run({ type: 'noop' }, null as never),
      engine.run({ type: 'noop', priority: 0 }),
      engine.run({ type: 'noop' }, { signal: AbortSignal.abort() }),
    ].map(async (p) => ((await rejection(p)) as TickpoolError).code),
  );
  assert.deepEqual(codes, ['ERR_INVALID_ARGUMENT', 'ERR_INVALID_ARGUMENT', 'ERR_INVALID_ARGUMENT', 'ERR_INVALID_EVALUATION', 'ERR_ABORTED']);
  assert.equal(engine.broker.stats().totalReady, 0);
});

test('many runs on one signal share one abort listener, which is gone once they settle', async () => {
  const engine = await started();
  const controller = new AbortController();
  const runs = Array.from({ length: 50 }, () => engine.run({ type: 'noop' }, { signal: controller.signal }));
  assert.ok(getEventListeners(controller.signal, 'abort').length <= 1);
  await Promise.all(runs);
  await turns(2);
  assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
});

test('no unhandled rejection when nobody awaits an outcome', async () => {
  const engine = await started();
  const seen: unknown[] = [];
  const listener = (reason: unknown): void => void seen.push(reason);
  process.on('unhandledRejection', listener);
  try {
    const failed = new Promise<void>((resolve) => engine.broker.events.on('broker:failed', () => resolve()));
    engine.enqueue({ type: 'nope' });
    void engine.run({ type: 'nope-too' });
    await failed;
    await turns(5);
  } finally {
    process.off('unhandledRejection', listener);
  }
  assert.deepEqual(seen, []);
});
