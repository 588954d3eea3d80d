/**
 * The engine on a backend whose every `MaybePromise` answer is a promise (test/backend/async-backend.ts): the worker
 * loop, the plan path, the abort path and the lifecycle must work when the broker, the plan committer and the
 * backend's open/close are asynchronous, as a durable backend's are. Real pool threads; concurrency through
 * shared-memory gates and events, never sleeps.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { pino } from 'pino';
import type { EvalBroker } from '../../src/broker/eval-broker.js';
import { ManualClock } from '../../src/clock.js';
import { createEngine, type Engine } from '../../src/engine/engine.js';
import { AbortedError } from '../../src/errors.js';
import type { EngineOptions } from '../../src/engine/options.js';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { asyncBackend, type AsyncBackend, type AsyncBackendOptions } from './async-backend.js';

const fixture = (name: string): URL => new URL(`../fixtures/${name}.js`, import.meta.url);
const logger = pino({ level: 'silent' });
const engines: Engine<AsyncBackend>[] = [];
after(async () => {
  await Promise.all(engines.map((e) => e.stop({ graceMs: 100 })));
});

function engineOn(backend: AsyncBackendOptions = {}, options: Omit<EngineOptions, 'backend'> = {}) {
  const factory = asyncBackend(backend);
  const engine = createEngine({
    backend: factory,
    threads: 2,
    workers: 4,
    logger,
    tables: ['t', 'counters'],
    schedulers: { noop: fixture('noop'), echo: fixture('plan-echo'), inc: fixture('conflict'), gated: fixture('gated'), faulty: fixture('faulty') },
    broker: { initialNackDelayMs: 0 },
    ...options,
  });
  engines.push(engine);
  return { engine, log: factory.log, inner: factory.made!.inner };
}

async function started(backend: AsyncBackendOptions = {}, options: Omit<EngineOptions, 'backend'> = {}) {
  const made = engineOn(backend, options);
  await made.engine.start();
  return made;
}

const turns = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

/** Until the workers have let go of `n` deliveries: an outcome can settle before its worker is done with it. */
async function processed(engine: Engine<AsyncBackend>, n: number): Promise<void> {
  while (engine.workers.reduce((sum, w) => sum + w.processed, 0) < n) await turns(1);
}

// Compile-time: the engine is typed after its backend, and the in-memory engine keeps the in-memory types.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const typedAfterBackend: Same<Engine<AsyncBackend>['broker'], AsyncBackend['broker']> = true;
const memoryByDefault: Same<ReturnType<typeof createEngine>['broker'], EvalBroker> = true;
void typedAfterBackend;
void memoryByDefault;

test('evaluations reach their outcome when every broker answer is a promise', async () => {
  const { engine, log } = await started();
  const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => engine.run({ id: `n${i}`, type: 'noop' })));
  for (const [i, outcome] of outcomes.entries()) {
    assert.deepEqual(outcome, { id: `n${i}`, status: 'acked', value: undefined, index: 0, attempts: 1, deliveries: 1 });
  }
  assert.equal(log.count('broker.ack'), 20, 'each delivery acked once, through the async ack');
  assert.ok(log.count('broker.tryDequeue') >= 1 && log.count('broker.dequeueWith') >= 20, 'the loop waited for every delivery');
  // The engine's stats carry what the backend answers: a promise here.
  const stats = await engine.stats().broker;
  assert.equal(stats.totalReady + stats.totalUnacked + stats.totalPending, 0, 'nothing left in the broker');
});

test('a plan commits through an async plan committer, fenced by its delivery, then the delivery is acked', async () => {
  const { engine, log } = await started();
  const plan = { writes: [{ table: 't', key: 'k', value: 'placed', readIndex: 0 }], value: { placed: 'k' } };
  const outcome = await engine.run({ id: 'p1', type: 'echo', payload: { plan } });
  assert.deepEqual(outcome, { id: 'p1', status: 'acked', value: { placed: 'k' }, index: 1, attempts: 1, deliveries: 1 });
  assert.equal(engine.state.snapshot().get('t', 'k')?.value, 'placed');
  await processed(engine, 1);
  const calls = log.calls.filter((c) => c !== 'broker.dequeueWith' && c !== 'broker.tryDequeue');
  assert.deepEqual(calls.slice(calls.indexOf('broker.enqueue')), [
    'broker.enqueue',
    'broker.pauseNackTimeout',
    'plans.submit',
    'plans.submit fenced by p1',
    'broker.ack',
  ]);
});

test('a backend that acks in the commit is not acked a second time by the worker', async () => {
  const { engine, log } = await started({ ackInCommit: true });
  const plan = { writes: [{ table: 't', key: 'k', value: 1, readIndex: 0 }], value: 'v' };
  const outcome = await engine.run({ id: 'c1', type: 'echo', payload: { plan } });
  assert.deepEqual(outcome, { id: 'c1', status: 'acked', value: 'v', index: 1, attempts: 1, deliveries: 1 });
  await processed(engine, 1);
  assert.equal(log.count('plans.ackInCommit'), 1);
  assert.equal(log.count('broker.ack'), 0, 'the worker left the ack to the commit');
});

test('a partly rejected plan re-runs after an async resume of its lease, and the value of the committed attempt wins', async () => {
  const { engine, log } = await started();
  const gate = newGate();
  const [a, b] = await Promise.all([
    engine.run<{ count: number; attempt: number }>({ id: 'i1', jobId: 'j1', type: 'inc', payload: { gate, key: 'k' } }),
    engine.run<{ count: number; attempt: number }>({ id: 'i2', jobId: 'j2', type: 'inc', payload: { gate, key: 'k' } }),
  ]);
  assert.deepEqual([a.value.count, b.value.count].sort(), [1, 2], 'both increments landed, one after a refresh');
  assert.deepEqual([a.attempts, b.attempts].sort(), [1, 2]);
  assert.equal(log.count('broker.resumeNackTimeout'), 1, 'the refreshed one resumed its lease once');
  assert.equal(engine.state.snapshot().get<{ count: number }>('counters', 'k')?.value.count, 2);
});

test('a failed attempt is nacked through the async broker and redelivered', async () => {
  const { engine, log } = await started();
  const gate = newGate();
  const outcome = await engine.run({ id: 'f1', type: 'faulty', payload: { gate, fault: 'throw' } });
  assert.equal(outcome.deliveries, 2, 'the first delivery was nacked, the second acked');
  assert.equal(log.count('broker.nack'), 1);
  assert.equal(Atomics.load(gate, Gate.CALLS), 2);
});

test("an aborted run reaches the evaluation in flight through the broker's async inspect, outstanding and remove", async () => {
  const { engine, log, inner } = await started();
  const gate = newGate();
  const controller = new AbortController();
  const done = engine.run({ id: 'a1', type: 'gated', payload: { gate } }, { signal: controller.signal });
  await waitFor(gate, Gate.STARTED, 1);
  controller.abort('caller left');
  const error = await done.then(
    () => assert.fail('expected the run to reject'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof AbortedError);
  assert.equal(error.cause, 'caller left');
  await waitFor(gate, Gate.SAW_CANCEL, 1);
  // The worker removes the delivery once its thread let go; the removal is async too.
  while (inner.broker.inspect('a1') !== undefined) await turns(1);
  assert.deepEqual(
    log.calls.filter((c) => ['broker.inspect', 'broker.outstanding', 'broker.remove'].includes(c)),
    ['broker.inspect', 'broker.outstanding', 'broker.remove'],
  );
});

test('engine.cancel finds the delivery among its own workers without asking the broker', async () => {
  const { engine, log } = await started();
  const gate = newGate();
  const done = engine.run({ id: 'x1', type: 'gated', payload: { gate } });
  await waitFor(gate, Gate.STARTED, 1);
  assert.equal(engine.cancel('x1'), true);
  assert.equal(engine.cancel('nobody'), false);
  await waitFor(gate, Gate.STARTED, 2);
  set(gate, Gate.RELEASE, 1);
  const outcome = await done;
  assert.equal(outcome.deliveries, 1, 'canceled, given back uncharged and redelivered');
  assert.equal(log.count('broker.giveBack'), 1);
  assert.equal(log.count('broker.outstanding'), 0);
});

test('start() waits for the backend to open before the threads start, and stop() for it to close', async () => {
  let open!: () => void;
  let close!: () => void;
  const opening = new Promise<void>((resolve) => (open = resolve));
  const closing = new Promise<void>((resolve) => (close = resolve));
  const { engine, log } = engineOn({ opening, closing });
  let startedYet = false;
  const starting = engine.start().then(() => (startedYet = true));
  await turns(5);
  assert.equal(startedYet, false);
  assert.equal(engine.status, 'starting');
  assert.deepEqual(log.calls, ['broker.keepLeases', 'open']);
  open();
  await starting;
  assert.equal(engine.status, 'running');
  assert.ok(log.calls.indexOf('opened') < log.calls.indexOf('state.full'), 'no thread was seeded before the backend was open');
  assert.ok(log.calls.indexOf('opened') < log.calls.indexOf('broker.tryDequeue'), 'no worker dequeued before the backend was open');
  let stoppedYet = false;
  const stopping = engine.stop().then(() => (stoppedYet = true));
  while (!log.calls.includes('close')) await turns(1);
  await turns(5);
  assert.equal(stoppedYet, false, 'stop() waits for the backend to close');
  close();
  await stopping;
  assert.equal(engine.status, 'stopped');
  assert.equal(log.calls.at(-2), 'closed');
  assert.equal(log.calls.at(-1), 'broker.rejectOutcomes', 'the outcomes still waited for are given up last');
});

test('a delivery whose lease ended before it returned its plan submits nothing: its canceled attempt is given back, and the broker refuses that', async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const { engine, log } = await started({}, { threads: 1, workers: 2, clock, cancelGraceMs: 3_600_000, broker: { nackTimeoutMs: 1000, initialNackDelayMs: 0 }, schedulers: { plan: fixture('gated-plan') } });
  const gate = newGate();
  const plan = { writes: [{ table: 't', key: 'k', value: 'placed', readIndex: 0 }] };
  const done = engine.run({ id: 's1', type: 'plan', payload: { gate, plan } });
  await waitFor(gate, Gate.STARTED, 1);
  clock.advance(1000); // the first delivery's lease ends; the redelivery waits behind it on the one thread
  set(gate, Gate.RELEASE, 2);
  const outcome = await done;
  assert.equal(outcome.deliveries, 2);
  assert.equal(engine.state.index, 1, 'one commit');
  assert.equal(log.count('plans.submit'), 1, 'the stale delivery never reached the plan committer');
  assert.equal(log.count('broker.pauseNackTimeout'), 1, 'only the redelivery held its lease for the plan queue');
  assert.match(await engine.options.registry.metrics(), /^tickpool_worker_refused_total\{operation="give-back",code="ERR_NACK_TIMEOUT_REACHED"\} 1$/m);
});

test('stop() gives back the evaluations in hand through the async give-back, and counts them once the give-backs settled', async () => {
  let nack!: () => void;
  const nacking = new Promise<void>((resolve) => (nack = resolve));
  const { engine, log, inner } = await started({ nacking });
  const gate = newGate();
  for (const id of ['g1', 'g2']) engine.enqueue({ id, type: 'gated', payload: { gate } });
  await waitFor(gate, Gate.STARTED, 2);
  const stopEvent = new Promise<{ requeued: number; forced: boolean }>((resolve) => engine.events.once('engine:stop', resolve));
  const stopping = engine.stop({ graceMs: 0 });
  while (log.count('broker.giveBack') < 2) await turns(1);
  await turns(5);
  assert.equal(log.count('close'), 0, 'the engine waits for the give-backs before it closes the backend');
  assert.deepEqual(
    engine.workers.filter((w) => w.evaluationId !== undefined).map((w) => [w.evaluationId, w.status, w.processed]).sort(),
    [['g1', 'stopping', 0], ['g2', 'stopping', 0]],
    'each worker holds its delivery until its give-back settled',
  );
  nack();
  await stopping;
  assert.deepEqual(await stopEvent, { requeued: 2, forced: true });
  assert.equal(log.count('broker.giveBack'), 2);
  assert.equal(log.count('broker.nack'), 0);
  const stats = inner.broker.stats();
  assert.equal(stats.totalUnacked, 0, 'nothing is left unacked');
  assert.equal(stats.totalReady, 2, 'both are ready in the broker again, at once');
  assert.ok(log.calls.lastIndexOf('broker.giveBack') < log.calls.indexOf('close'), 'the backend closed after the give-backs');
});
