/**
 * The engine's lifecycle and delivery bookkeeping at the edges: stop() racing start(), pause before start and a
 * pause undone at once, heartbeats across a plan refresh, two workers holding deliveries of one evaluation after a
 * nack deadline fired, and what `engine:stop` reports. Real pool threads; time is a ManualClock where a deadline
 * matters, and the threads are driven by shared-memory gates.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { ManualClock } from '../../src/clock.js';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { acks, created, evaluation, fixture, fixturePath, started, turns } from '../reliability/helpers.js';

test('stop() while start() boots the threads: start() resolves, and neither the workers nor the ticker run after', { timeout: 30_000 }, async () => {
  const engine = created({ threads: 1, workers: 2, schedulers: { service: fixture('noop') } });
  const order: string[] = [];
  engine.events.on('engine:start', () => order.push('start'));
  engine.events.on('engine:stop', () => order.push('stop'));
  const starting = engine.start();
  const stopping = engine.stop({ graceMs: 50 });
  await Promise.all([starting, stopping]);
  assert.deepEqual(order, ['stop'], 'the engine never announced a start after its stop');
  assert.equal(engine.status, 'stopped');
  assert.notEqual(engine.tasks.stats().state, 'running', 'the task ticker was not started on a stopped pool');
  assert.deepEqual(
    engine.workers.map((w) => w.status),
    ['stopped', 'stopped'],
    'workers that never ran are stopped, not left stopping',
  );
  assert.throws(() => engine.enqueue(evaluation('late', 'service')), { code: 'ERR_INVALID_STATE' });
});

test('workers paused before start() take nothing until resumed', { timeout: 30_000 }, async () => {
  const engine = created({ workers: 2, schedulers: { service: fixture('noop') } });
  engine.pauseWorkers();
  await engine.start();
  assert.deepEqual(engine.workers.map((w) => w.status), ['paused', 'paused']);
  engine.enqueue(evaluation('p1', 'service'));
  // An idle running worker would have taken it inside enqueue (it waits in the broker with a callback).
  assert.equal(engine.broker.stats().totalReady, 1, 'no paused worker took it');
  const done = acks(engine, 1);
  engine.resumeWorkers();
  assert.deepEqual(await done, ['p1']);
});

test('engine.workers are read-only views: status, activity, the evaluation held, pause and resume, nothing else', { timeout: 30_000 }, async () => {
  const engine = await started({ workers: 2, schedulers: { gated: fixture('gated') } });
  const views = engine.workers;
  assert.equal(engine.workers, views, 'the same views every time');
  assert.ok(Object.isFrozen(views));
  for (const name of ['consumeHeartbeat', 'start', 'stop', 'cancelCurrent', 'abortCurrent', 'current', 'slot']) {
    assert.equal(name in views[0]!, false, `no ${name}`);
  }
  const gate = newGate();
  engine.enqueue(evaluation('held', 'gated', { gate }));
  await waitFor(gate, Gate.STARTED, 1);
  const holder = views.find((w) => w.evaluationId === 'held');
  assert.ok(holder !== undefined, 'one view names the evaluation its worker holds');
  assert.deepEqual(Object.keys(holder), [], 'its facts are getters over the worker, not copies');
  holder.pause();
  assert.equal(holder.status, 'paused');
  set(gate, Gate.RELEASE, 1);
  holder.resume();
  assert.equal(holder.status, 'running');
});

test('pause() undone by resume() before the worker noticed is not a dequeue failure: no warning, no backoff', { timeout: 30_000 }, async () => {
  const lines: string[] = [];
  const warnLogger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
  // A manual clock that never moves: a worker sleeping a backoff on it would never take the evaluation.
  const engine = await started({ workers: 1, logger: warnLogger, clock: new ManualClock(Date.UTC(2026, 0, 1)), schedulers: { service: fixture('noop') } });
  engine.pauseWorkers();
  engine.resumeWorkers();
  await turns();
  assert.notEqual(engine.workers[0]!.activity, 'backoff');
  const done = acks(engine, 1);
  engine.enqueue(evaluation('r1', 'service'));
  assert.deepEqual(await done, ['r1']);
  assert.deepEqual(lines.filter((l) => l.includes('failed to dequeue')), [], 'the interrupted wait was not logged as a failure');
});

test("a scheduler re-run after a partial commit is kept alive by its own heartbeats, though fewer than the first run's", { timeout: 30_000 }, async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const engine = await started({
    threads: 1,
    workers: 1,
    clock,
    tables: ['t'],
    broker: { nackTimeoutMs: 1000 },
    schedulers: { refresh: fixture('refresh-heartbeat') },
  });
  const gate = newGate();
  let extended = 0;
  const nacks: boolean[] = [];
  engine.broker.events.on('broker:extend', () => extended++);
  engine.broker.events.on('broker:nack', ({ timedOut }) => nacks.push(timedOut));
  const done = acks(engine, 1);
  engine.enqueue(evaluation('hb', 'refresh', { gate }));
  await waitFor(gate, Gate.STARTED, 1);
  clock.advance(1000);
  assert.equal(extended, 1, 'the first attempt heartbeated 100 times: its deadline was extended');
  set(gate, Gate.RELEASE, 1); // the first attempt returns a plan that conflicts: the worker runs it again
  await waitFor(gate, Gate.STARTED, 2);
  clock.advance(1000);
  assert.equal(extended, 2, 'the second attempt heartbeated 3 times since its claim: extended again');
  assert.deepEqual(nacks, [], 'never timed out');
  set(gate, Gate.RELEASE, 2);
  assert.deepEqual(await done, ['hb']);
  assert.equal(Atomics.load(gate, Gate.SAW_CANCEL), 0, 'no attempt was canceled');
  assert.equal(Atomics.load(gate, Gate.CALLS), 2);
});

test('after a nack deadline fires, cancel and heartbeats reach the redelivery, not the worker still holding the old one', { timeout: 30_000 }, async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const engine = await started({
    threads: 2,
    workers: 2,
    clock,
    cancelGraceMs: 3_600_000, // the first run ignores its cancel; its thread must not be terminated meanwhile
    broker: { nackTimeoutMs: 1000, initialNackDelayMs: 0 },
    schedulers: { two: fixture('two-holders') },
  });
  const gate = newGate();
  const events: string[] = [];
  engine.broker.events.on('broker:extend', () => events.push('extend'));
  engine.broker.events.on('broker:nack', ({ timedOut, reason }) => events.push(timedOut ? 'timeout' : `nack ${(reason as { code?: string }).code}`));
  engine.broker.events.on('broker:give-back', ({ reason }) => events.push(`give-back ${(reason as { code?: string }).code}`));
  engine.enqueue(evaluation('e1', 'two', { gate }));
  await waitFor(gate, Gate.CALLS, 1);
  clock.advance(1000); // the first delivery times out and is redelivered at once to the other worker
  await waitFor(gate, Gate.STARTED, 1);
  const holders = engine.stats().workers.filter((w) => w.evaluationId === 'e1');
  assert.equal(holders.length, 2, 'the old worker still holds its stale delivery');
  clock.advance(1000);
  assert.deepEqual(events, ['timeout', 'extend'], "the redelivery's heartbeats extended its own deadline");
  assert.equal(engine.cancel('e1'), true, 'cancel targets the current delivery');
  await waitFor(gate, Gate.SAW_CANCEL, 1);
  set(gate, Gate.FAULT_TAKEN, 1);
  set(gate, Gate.RELEASE, 1);
  await engine.stop({ graceMs: 1000 });
  assert.equal(events[2], 'give-back ERR_CANCELED', 'the canceled redelivery was given back');
});

test('engine:stop reports how many evaluations in hand stop gave back to the broker', { timeout: 30_000 }, async () => {
  const engine = await started({ threads: 2, workers: 2, schedulers: { gated: fixture('gated') } });
  const gate = newGate();
  engine.enqueue(evaluation('g1', 'gated', { gate }));
  engine.enqueue(evaluation('g2', 'gated', { gate }));
  await waitFor(gate, Gate.STARTED, 2);
  const stopEvent = new Promise<{ requeued: number; forced: boolean }>((resolve) => engine.events.once('engine:stop', resolve));
  await engine.stop({ graceMs: 0 });
  assert.deepEqual(await stopEvent, { requeued: 2, forced: true });
  const s = engine.broker.stats();
  assert.equal(s.totalReady + s.totalWaiting, 2, 'both are back in the broker');
});

test('after stop() no timer keeps the process alive: served dequeues, an unknown-type evaluation delayed for an hour', { timeout: 30_000 }, async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [fixturePath('timers-after-stop')]);
  const report = JSON.parse(stdout) as { acked: boolean; timeouts: number; unknownFailed: boolean };
  assert.equal(report.acked, true);
  assert.equal(report.unknownFailed, true, 'the delayed evaluation of an unknown type was failed at enqueue');
  assert.equal(report.timeouts, 0, 'no ref’d Timeout is left');
});

test('engine.cancel and stop() reject bad arguments with typed errors', { timeout: 30_000 }, async () => {
  const engine = created({ schedulers: { service: fixture('noop') } });
  assert.throws(() => engine.cancel(42 as never), { code: 'ERR_INVALID_ARGUMENT' });
  assert.throws(() => engine.cancel(''), { code: 'ERR_INVALID_ARGUMENT' });
  assert.equal(engine.cancel('nobody-holds-this'), false);
  await assert.rejects(engine.stop({ grace: 100 } as never), { code: 'ERR_INVALID_ARGUMENT', message: /options\.grace/ });
  assert.equal(engine.status, 'created', 'a refused stop() changed nothing');
});

test('a delivery whose nack deadline fired before it returned its plan does not submit it: the redelivery commits once', { timeout: 30_000 }, async () => {
  // The deadline canceled the stale attempt, so its plan is dropped with the attempt: its give-back is refused (the
  // nack of the deadline won), and nothing reaches the plan queue.
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const engine = await started({
    threads: 1, // the redelivery runs after the stale one on the same thread: its ack proves the stale plan was handled
    workers: 2,
    clock,
    tables: ['t'],
    cancelGraceMs: 3_600_000,
    broker: { nackTimeoutMs: 1000, initialNackDelayMs: 0 },
    schedulers: { plan: fixture('gated-plan') },
  });
  const gate = newGate();
  const plan = { writes: [{ table: 't', key: 'k', value: 'placed', readIndex: 0 }] };
  const done = acks(engine, 1);
  engine.enqueue(evaluation('p1', 'plan', { gate, plan }));
  await waitFor(gate, Gate.STARTED, 1);
  clock.advance(1000); // the first delivery times out and is redelivered (queued behind it on the one thread)
  set(gate, Gate.RELEASE, 2);
  assert.deepEqual(await done, ['p1']);
  assert.equal(Atomics.load(gate, Gate.CALLS), 2);
  assert.equal(engine.state.index, 1, 'one commit: the stale delivery submitted nothing');
  assert.equal(engine.state.snapshot().get('t', 'k')?.value, 'placed');
  assert.match(await engine.options.registry.metrics(), /^tickpool_worker_refused_total\{operation="give-back",code="ERR_NACK_TIMEOUT_REACHED"\} 1$/m);
});
