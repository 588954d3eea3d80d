/**
 * The engine on real pool threads. Concurrency is driven by shared-memory gates (see fixtures/gates.ts) and broker
 * events, never by sleeps; the only time-based parts are the engine's own short nack timeouts.
 */
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { after, test } from 'node:test';
import { createEngine, type Engine } from '../../src/engine/engine.js';
import type { Evaluation } from '../../src/broker/evaluation.js';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';

const fixture = (name: string): URL => new URL(`../fixtures/${name}.js`, import.meta.url);
const engines: Engine[] = [];
/** Faults are expected here: keep their warnings out of the test output. */
const logger = pino({ level: 'silent' });
after(async () => {
  await Promise.all(engines.map((e) => e.stop({ graceMs: 100 })));
});

async function started(options: Parameters<typeof createEngine>[0]): Promise<Engine> {
  const engine = createEngine({ threads: 2, workers: 8, logger, ...options });
  engines.push(engine);
  await engine.start();
  return engine;
}

function evaluation(id: string, type: string, payload?: unknown, jobId = id): Evaluation {
  return { id, jobId, type, priority: 50, ...(payload === undefined ? {} : { payload }) };
}

/** Resolves with the ids acked, once `count` acks have been seen. */
function acks(engine: Engine, count: number): Promise<string[]> {
  const seen: string[] = [];
  return new Promise((resolve) => {
    const off = engine.broker.events.on('broker:ack', ({ evaluation }) => {
      seen.push(evaluation.id);
      if (seen.length === count) {
        off();
        resolve(seen);
      }
    });
  });
}

test('evaluations are scheduled on threads and acked', async () => {
  const engine = await started({ schedulers: { service: fixture('noop') } });
  const done = acks(engine, 200);
  for (let i = 0; i < 200; i++) engine.enqueue(evaluation(`e${i}`, 'service'));
  const ids = await done;
  assert.equal(new Set(ids).size, 200);
  const stats = engine.broker.stats();
  assert.equal(stats.totalReady + stats.totalUnacked + stats.totalPending, 0);
  const utilization = engine.utilization();
  assert.ok(utilization > 0 && utilization <= 1, `utilization ${utilization} counts the threads' busy time`);
  await engine.stop();
  assert.equal(engine.stats().pool.threads, 0);
});

test('a throwing scheduler is nacked and redelivered, then acked', async () => {
  const engine = await started({
    schedulers: { flaky: fixture('faulty') },
    broker: { initialNackDelayMs: 0, subsequentNackDelayMs: 0 },
  });
  const gate = newGate();
  const nacks: Array<string | undefined> = [];
  engine.broker.events.on('broker:nack', ({ reason }) => nacks.push((reason as { remoteCode?: string } | undefined)?.remoteCode));
  const done = acks(engine, 1);
  engine.enqueue(evaluation('t1', 'flaky', { gate, fault: 'throw' }));
  assert.deepEqual(await done, ['t1']);
  assert.equal(Atomics.load(gate, Gate.CALLS), 2, 'one failed delivery, one successful');
  assert.deepEqual(nacks, ['E_FIXTURE'], 'the nack carries the scheduler error');
});

test('a thread that exits mid-evaluation: its evaluations are redelivered and the pool keeps serving', async () => {
  const engine = await started({
    schedulers: { crash: fixture('faulty'), service: fixture('noop') },
    broker: { initialNackDelayMs: 0, subsequentNackDelayMs: 0 },
  });
  const gate = newGate();
  const done = acks(engine, 51);
  engine.enqueue(evaluation('boom', 'crash', { gate, fault: 'exit' }));
  for (let i = 0; i < 50; i++) engine.enqueue(evaluation(`ok${i}`, 'service'));
  const ids = await done;
  assert.ok(ids.includes('boom'), 'the crashed evaluation was redelivered and acked');
  assert.equal(new Set(ids).size, 51);
  assert.ok(engine.stats().pool.threadExits >= 1);
  // The pool is back at its thread count and still serves.
  const more = acks(engine, 10);
  for (let i = 0; i < 10; i++) engine.enqueue(evaluation(`after${i}`, 'service'));
  assert.equal((await more).length, 10);
  assert.equal(engine.stats().pool.threads, 2);
});

test('a scheduler hung past the nack timeout is redelivered; its thread is terminated after the cancel grace', async () => {
  const engine = await started({
    schedulers: { hang: fixture('faulty') },
    broker: { nackTimeoutMs: 150, initialNackDelayMs: 0, subsequentNackDelayMs: 0 },
    cancelGraceMs: 50,
  });
  const gate = newGate();
  let timedOut = 0;
  engine.broker.events.on('broker:nack', ({ timedOut: t }) => (timedOut += t ? 1 : 0));
  const done = acks(engine, 1);
  const exited = new Promise<{ code: string; heldItems: number }>((resolve) =>
    engine.events.on('engine:thread-exit', ({ reason, heldItems }) => resolve({ code: reason.code, heldItems })),
  );
  engine.enqueue(evaluation('h1', 'hang', { gate, fault: 'hang' }));
  assert.deepEqual(await done, ['h1']);
  assert.equal(timedOut, 1, 'the first delivery was nacked by its deadline');
  assert.equal(Atomics.load(gate, Gate.CALLS), 2);
  assert.deepEqual(await exited, { code: 'ERR_THREAD_EXITED', heldItems: 1 }, 'the hung thread was terminated');
  await engine.stop();
  assert.equal(engine.broker.stats().totalUnacked, 0);
});

test('a long scheduler that heartbeats is not redelivered', async () => {
  const engine = await started({ schedulers: { long: fixture('heartbeat') }, broker: { nackTimeoutMs: 100 } });
  const gate = newGate();
  let extensions = 0;
  let nacks = 0;
  const extended = new Promise<void>((resolve) =>
    engine.broker.events.on('broker:extend', () => {
      if (++extensions === 3) resolve();
    }),
  );
  engine.broker.events.on('broker:nack', () => nacks++);
  const done = acks(engine, 1);
  engine.enqueue(evaluation('long1', 'long', { gate }));
  await extended; // three deadlines came and were extended by heartbeats
  set(gate, Gate.RELEASE, 1);
  assert.deepEqual(await done, ['long1']);
  assert.equal(nacks, 0);
  assert.equal(Atomics.load(gate, Gate.CALLS), 1, 'delivered once');
});

test('cooperative cancel is observed inside CPU-bound code', async () => {
  const engine = await started({
    schedulers: { spin: fixture('faulty') },
    broker: { initialNackDelayMs: 0, subsequentNackDelayMs: 0 },
  });
  const gate = newGate();
  const done = acks(engine, 1);
  engine.enqueue(evaluation('c1', 'spin', { gate, fault: 'hang-cooperative' }));
  await waitFor(gate, Gate.STARTED, 1);
  assert.equal(engine.cancel('c1'), true);
  await waitFor(gate, Gate.SAW_CANCEL, 1);
  assert.deepEqual(await done, ['c1'], 'nacked on cancel, redelivered, acked');
  assert.equal(engine.stats().pool.threadExits, 0, 'no thread had to be terminated');
});

test('two schedulers writing the same record: one commits, the other is refreshed and commits on its second attempt', async () => {
  const engine = await started({ schedulers: { inc: fixture('conflict') }, tables: ['counters'] });
  const gate = newGate();
  const done = acks(engine, 2);
  engine.enqueue(evaluation('a', 'inc', { gate, key: 'k' }));
  engine.enqueue(evaluation('b', 'inc', { gate, key: 'k' }));
  await done;
  const record = engine.state.snapshot().get<{ count: number; attempt: number }>('counters', 'k');
  assert.equal(record?.value.count, 2, 'no lost update');
  assert.equal(record?.value.attempt, 2, 'the last writer was on its second attempt');
  assert.equal(Atomics.load(gate, Gate.CALLS), 3);
});

test('an evaluation type with no registered scheduler is failed with a typed error, never executed', async () => {
  const engine = await started({ schedulers: { service: fixture('noop') } });
  const failed = new Promise<{ id: string; code: unknown }>((resolve) =>
    engine.broker.events.on('broker:failed', ({ evaluation, reason }) => resolve({ id: evaluation.id, code: (reason as { code?: unknown }).code })),
  );
  engine.enqueue(evaluation('u1', 'nope'));
  assert.deepEqual(await failed, { id: 'u1', code: 'ERR_UNKNOWN_SCHEDULER' });
  assert.equal(engine.broker.stats().totalFailed, 1);
  assert.equal(engine.broker.failedReason('u1')?.message.includes('service'), true, 'the reason lists the registered types');
});

test('stop() under load loses nothing: every evaluation is acked or back in the broker', async () => {
  const engine = await started({ schedulers: { service: fixture('noop'), spin: fixture('faulty') } });
  const acked = new Set<string>();
  engine.broker.events.on('broker:ack', ({ evaluation }) => acked.add(evaluation.id));
  const gate = newGate();
  engine.enqueue(evaluation('slow', 'spin', { gate, fault: 'hang-cooperative' }));
  for (let i = 0; i < 3000; i++) engine.enqueue(evaluation(`s${i}`, 'service'));
  await waitFor(gate, Gate.STARTED, 1);
  await engine.stop({ graceMs: 50 });
  const stats = engine.broker.stats();
  assert.equal(stats.totalUnacked, 0, 'nothing left unacked');
  const inBroker = stats.totalReady + stats.totalPending + stats.totalWaiting;
  assert.equal(acked.size + inBroker, 3001, 'every evaluation acked or back in the broker');
  assert.ok(!acked.has('slow'), 'the canceled one was given back');
});

test('paused workers take nothing; resumed workers drain what waited; status and activity are reported', async () => {
  const engine = await started({ schedulers: { service: fixture('noop') }, workers: 4 });
  engine.pauseWorkers();
  assert.deepEqual(new Set(engine.stats().workers.map((w) => w.status)), new Set(['paused']));
  for (let i = 0; i < 5; i++) engine.enqueue(evaluation(`p${i}`, 'service'));
  // Let every pending callback run: a paused worker must not dequeue.
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.equal(engine.broker.stats().totalReady, 5);
  assert.ok(engine.stats().workers.every((w) => w.activity === 'idle'));
  const done = acks(engine, 5);
  engine.resumeWorkers();
  assert.equal((await done).length, 5);
  assert.ok(engine.stats().workers.every((w) => w.status === 'running'));
  await engine.stop();
  assert.ok(engine.stats().workers.every((w) => w.status === 'stopped'));
});

test('an idle thread still runs the timers, promise jobs and next-tick callbacks a scheduler left behind', async () => {
  const engine = await started({ threads: 1, schedulers: { leftover: fixture('leftover-timer'), jobs: fixture('leftover-jobs') } });
  // A thread that slept between items outside its event loop (as Piscina's sync-atomics threads do) would run none
  // of these until its next item: the timer would never fire, and the next item would run before the chain ended.
  const timerGate = newGate();
  const first = acks(engine, 1);
  engine.enqueue(evaluation('left', 'leftover', { gate: timerGate }));
  assert.deepEqual(await first, ['left']);
  const fired = await Promise.race([
    waitFor(timerGate, Gate.RELEASE, 1).then(() => true),
    new Promise<false>((resolve) => setTimeout(() => resolve(false), 5000).unref()),
  ]);
  assert.ok(fired, 'the timer the scheduler left behind ran while its thread was idle');
  // The chain of promise jobs and the next-tick callback it ends in run with no next item to push the thread: the
  // idle thread drained them. (A next item that came while the thread was parking could run before them, as work
  // that comes while a thread is busy does; that is not what this looks at.)
  const jobsGate = newGate();
  const left = acks(engine, 1);
  engine.enqueue(evaluation('leave', 'jobs', { gate: jobsGate }));
  await left;
  const drained = await Promise.race([
    waitFor(jobsGate, Gate.RELEASE, 1).then(() => true),
    new Promise<false>((resolve) => setTimeout(() => resolve(false), 5000).unref()),
  ]);
  assert.ok(drained, 'the chain of promise jobs and its next-tick callback ran while the thread was idle');
  await engine.stop();
});
