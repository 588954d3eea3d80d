/**
 * Containment: one piece of bad work must not take other work down with it.
 * - `resourceLimits`: a handler that allocates without bound is stopped; its run fails with a typed error naming the
 *   limit; work queued behind it on the same thread is not blamed; everything else goes on.
 * - A thread that dies takes only the work it was running: what waited behind it is dispatched again, not nacked.
 * - A task run that ignores its cancel is stopped by terminating its thread after `cancelGraceMs`.
 * - `maxPayloadBytes` rejects oversized payloads at enqueue, exactly at the limit.
 * - Evaluation types and task handlers only ever resolve to registered modules.
 *
 * Time is a ManualClock wherever the engine's timers matter (task due times, the cancel grace); threads are real and
 * the tests wait on events and shared-memory gates.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { serialize } from 'node:v8';
import { pino } from 'pino';
import { FAILED_QUEUE } from '../../src/broker/evaluation.js';
import { ManualClock } from '../../src/clock.js';
import { SlotState } from '../../src/slots/slot-layout.js';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { acks, codeOf, created, evaluation, failures, finished, fixture, fixturePath, nextEvent, started, turns } from './helpers.js';

const T0 = Date.UTC(2026, 0, 1);
const LIMIT_MB = 32;

test('resourceLimits: a handler that allocates without bound is stopped, its run fails naming the limit, other work continues', { timeout: 60_000 }, async () => {
  const clock = new ManualClock(T0);
  const engine = await started({
    clock,
    resourceLimits: { maxOldGenerationSizeMb: LIMIT_MB },
    handlers: { hog: fixture('hog'), work: fixture('task-handler') },
    schedulers: { service: fixture('noop') },
  });
  const exit = nextEvent<{ code: string }>((l) => engine.events.on('engine:thread-exit', ({ reason }) => l({ code: reason.code })));
  engine.tasks.add({ id: 'hog', every: '1m', maxConcurrency: 1, retry: 3, handler: 'hog' });
  engine.tasks.add({ id: 'ok', every: '1m', maxConcurrency: 1, handler: 'work', payload: { gate: newGate(), mode: 'ok' } });
  const hogDone = finished(engine, 1, 'hog');
  const okDone = finished(engine, 1, 'ok');
  clock.advance(60_000);

  const [hog] = await hogDone;
  assert.equal(hog?.status, 'failed');
  assert.equal(hog?.attempts, 1, 'not retried: the same run would hit the same limit');
  assert.equal(codeOf(hog?.error), 'ERR_RESOURCE_LIMIT');
  assert.match(hog!.error!.message, new RegExp(`maxOldGenerationSizeMb.{0,4}${LIMIT_MB}`), 'the error names the limit');
  assert.equal((await exit).code, 'ERR_RESOURCE_LIMIT');
  const record = engine.tasks.runLog.runs('hog')[0]!;
  assert.equal(record.finalStatus, 'failed');
  assert.equal(codeOf(record.error), 'ERR_RESOURCE_LIMIT');

  assert.equal((await okDone)[0]?.status, 'success', 'the other task ran');
  await engine.tasks.remove('hog');
  const done = acks(engine, 50);
  for (let i = 0; i < 50; i++) engine.enqueue(evaluation(`after${i}`, 'service'));
  assert.equal((await done).length, 50, 'evaluations are still served');
  assert.equal(engine.stats().pool.threads, 2, 'the thread was replaced');
});

test('a run due beside a hog waits on main, not behind the hog, and is not blamed for the hog exceeding the resource limits', { timeout: 60_000 }, async () => {
  const clock = new ManualClock(T0);
  const engine = await started({
    clock,
    threads: 1,
    resourceLimits: { maxOldGenerationSizeMb: LIMIT_MB },
    handlers: { hog: fixture('hog'), work: fixture('task-handler') },
  });
  const gate = newGate();
  // Claimed in this order, both due at the same tick: the hog is dispatched first, and the one thread takes it; the
  // other run waits in the work queue (no thread holds work it has not started).
  engine.tasks.add({ id: 'hog', every: '1m', maxConcurrency: 1, handler: 'hog', payload: { gate, wait: true } });
  engine.tasks.add({ id: 'bystander', every: '1m', maxConcurrency: 1, handler: 'work', payload: { gate: newGate(), mode: 'ok' } });
  const hogDone = finished(engine, 1, 'hog');
  const bystanderDone = finished(engine, 1, 'bystander');
  clock.advance(60_000);
  await waitFor(gate, Gate.STARTED, 1);
  await turns();
  assert.equal(engine.stats().pool.inflight, 2);
  assert.equal(engine.stats().pool.queued, 1, 'the other run waits in the work queue for a free thread, not on the hog\'s');
  set(gate, Gate.RELEASE, 1);

  const [hog] = await hogDone;
  assert.equal(codeOf(hog?.error), 'ERR_RESOURCE_LIMIT');
  const [bystander] = await bystanderDone;
  assert.equal(bystander?.status, 'success', `the bystander ended ${bystander?.status} (${codeOf(bystander?.error)})`);
  assert.equal(bystander?.attempts, 1, 'it never started on the dead thread, so it did not use up an attempt');
});

test('a thread that dies takes only the evaluation it was running: those waiting for a thread run afterwards, not nacked', { timeout: 60_000 }, async () => {
  const engine = await started({
    threads: 1,
    workers: 11,
    schedulers: { pill: fixture('pill'), service: fixture('noop') },
    broker: { initialNackDelayMs: 0, subsequentNackDelayMs: 0 },
  });
  const gate = newGate();
  const deliveries = new Map<string, number>();
  const nacks: Array<{ id: string; code: string | undefined }> = [];
  engine.broker.events.on('broker:dequeue', ({ evaluation: e }) => deliveries.set(e.id, (deliveries.get(e.id) ?? 0) + 1));
  engine.broker.events.on('broker:nack', ({ evaluation: e, reason }) => nacks.push({ id: e.id, code: codeOf(reason) }));
  const exit = nextEvent<{ code: string; heldItems: number }>((l) =>
    engine.events.on('engine:thread-exit', ({ reason, heldItems }) => l({ code: reason.code, heldItems })),
  );
  // Warm-up: a spent pill returns at once, and service evaluations are cheap.
  const spent = newGate();
  set(spent, Gate.FAULT_TAKEN, 1);
  const warm = acks(engine, 21);
  engine.enqueue(evaluation('warm-pill', 'pill', { gate: spent }));
  await turns();
  for (let i = 0; i < 20; i++) engine.enqueue(evaluation(`warm${i}`, 'service'));
  assert.equal((await warm).length, 21);
  deliveries.clear();
  const done = acks(engine, 11);
  engine.enqueue(evaluation('pill', 'pill', { gate }));
  await waitFor(gate, Gate.STARTED, 1);
  for (let i = 0; i < 10; i++) engine.enqueue(evaluation(`b${i}`, 'service'));
  await turns(); // the workers take them and the pool publishes them
  assert.equal(engine.stats().pool.inflight, 11, 'all eleven are in the pool');
  assert.equal(engine.stats().pool.queued, 10, 'ten wait in the work queue: only the pill is on the thread');
  set(gate, Gate.RELEASE, 1);

  assert.deepEqual((await done).sort(), ['b0', 'b1', 'b2', 'b3', 'b4', 'b5', 'b6', 'b7', 'b8', 'b9', 'pill'].sort());
  assert.deepEqual(await exit, { code: 'ERR_THREAD_EXITED', heldItems: 1 });
  assert.deepEqual(nacks, [{ id: 'pill', code: 'ERR_THREAD_EXITED' }], 'only the evaluation that was running is nacked');
  for (let i = 0; i < 10; i++) assert.equal(deliveries.get(`b${i}`), 1, `b${i} was delivered once`);
  assert.equal(deliveries.get('pill'), 2);
});

test('a task run that ignores its cancel: remove() terminates its thread after cancelGraceMs; the run is logged canceled', { timeout: 60_000 }, async () => {
  const clock = new ManualClock(T0);
  const engine = await started({
    clock,
    cancelGraceMs: 500,
    handlers: { stubborn: fixture('stubborn'), work: fixture('task-handler') },
    schedulers: { service: fixture('noop') },
  });
  const gate = newGate();
  engine.tasks.add({ id: 'stubborn', every: '1m', maxConcurrency: 1, retry: 2, handler: 'stubborn', payload: { gate } });
  const runDone = finished(engine, 1, 'stubborn');
  clock.advance(60_000);
  await waitFor(gate, Gate.STARTED, 1);
  const exit = nextEvent<{ code: string; heldItems: number }>((l) =>
    engine.events.on('engine:thread-exit', ({ reason, heldItems }) => l({ code: reason.code, heldItems })),
  );
  const removed = engine.tasks.remove('stubborn');
  clock.advance(499);
  await turns();
  assert.equal(engine.stats().pool.threadExits, 0, 'the grace period is not over');
  clock.advance(1);
  assert.deepEqual(await exit, { code: 'ERR_THREAD_EXITED', heldItems: 1 });
  await removed;
  const [run] = await runDone;
  assert.equal(run?.status, 'canceled');
  assert.deepEqual(engine.tasks.runLog.runs('stubborn').map((r) => r.finalStatus), ['canceled']);
  assert.equal(Atomics.load(gate, Gate.CALLS), 1, 'not retried after the cancel');
  assert.equal(engine.stats().tasks.slotsBusy, 0);

  engine.tasks.add({ id: 'after', every: '1m', maxConcurrency: 1, handler: 'work', payload: { gate: newGate(), mode: 'ok' } });
  const afterDone = finished(engine, 1, 'after');
  clock.advance(60_000);
  assert.equal((await afterDone)[0]?.status, 'success');
  const done = acks(engine, 10);
  for (let i = 0; i < 10; i++) engine.enqueue(evaluation(`e${i}`, 'service'));
  assert.equal((await done).length, 10);
  assert.equal(engine.stats().pool.threads, 2);
});

test('maxPayloadBytes: an oversized payload is rejected at enqueue, exactly past the limit; shared memory counts as zero', async () => {
  const limit = 1024;
  const engine = await started({ maxPayloadBytes: limit, schedulers: { service: fixture('noop') } });
  // A string payload whose serialized size is exactly the limit (header, tags and a varint length cost a few bytes).
  let n = limit;
  while (serialize({ s: 'x'.repeat(n) }).byteLength > limit) n--;
  const exact = { s: 'x'.repeat(n) };
  assert.equal(serialize(exact).byteLength, limit);
  const over = { s: 'x'.repeat(n + 1) };
  const before = engine.broker.stats();

  assert.throws(
    () => engine.enqueue(evaluation('big', 'service', over)),
    (error: unknown) => {
      assert.equal(codeOf(error), 'ERR_PAYLOAD_TOO_LARGE');
      assert.deepEqual((error as { details?: unknown }).details, { bytes: limit + 1, limit });
      return true;
    },
  );
  assert.equal(engine.broker.inspect('big'), undefined, 'nothing was enqueued');
  assert.deepEqual(engine.broker.stats(), before);
  assert.throws(() => engine.enqueue(evaluation('huge', 'service', new Uint8Array(4 * limit))), { code: 'ERR_PAYLOAD_TOO_LARGE' });

  const done = acks(engine, 2);
  engine.enqueue(evaluation('exact', 'service', exact));
  engine.enqueue(evaluation('shared', 'service', { memory: new Int32Array(new SharedArrayBuffer(64 * limit)) }));
  assert.deepEqual((await done).sort(), ['exact', 'shared']);
});

test('evaluation types and task handlers only ever resolve to registered modules', { timeout: 60_000 }, async () => {
  const clock = new ManualClock(T0);
  const engine = await started({
    clock,
    schedulers: { service: fixture('noop') },
    handlers: { work: fixture('task-handler') },
  });
  const gate = newGate();
  const path = fixturePath('canary');
  // Names that resolve to something in a careless lookup: prototype members, module paths and URLs, near misses.
  const names = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', path, pathToFileURL(path).href, './canary.js', 'service ', 'Service', 'work'];
  const failed = failures(engine, names.length);
  names.forEach((type, i) => engine.enqueue(evaluation(`u${i}`, type, { gate })));
  const codes = await failed;
  assert.deepEqual(codes.map((f) => f.code), names.map(() => 'ERR_UNKNOWN_SCHEDULER'));
  for (let i = 0; i < names.length; i++) assert.equal(codeOf(engine.broker.failedReason(`u${i}`)), 'ERR_UNKNOWN_SCHEDULER');

  const handlerNames = names.filter((n) => n !== 'work').concat(['service']);
  const runs = finished(engine, handlerNames.length);
  handlerNames.forEach((handler, i) => engine.tasks.add({ id: `t${i}`, every: '1m', maxConcurrency: 1, retry: 2, handler, payload: { gate } }));
  clock.advance(60_000);
  for (const run of await runs) {
    assert.equal(run.status, 'failed', `${run.taskId} ran`);
    assert.equal(codeOf(run.error), 'ERR_UNKNOWN_HANDLER');
    assert.equal(run.attempts, 1, 'never retried');
  }
  assert.equal(Atomics.load(gate, Gate.CALLS), 0, 'the canary module never ran');
  for (let slot = 0; slot < engine.slots.capacity; slot++) assert.equal(engine.slots.state(slot), SlotState.IDLE);
  const done = acks(engine, 1);
  engine.enqueue(evaluation('ok', 'service'));
  assert.deepEqual(await done, ['ok']);
});

test('an evaluation of an unregistered type is failed at enqueue, also behind its job\'s evaluation in hand, and does not block the job', { timeout: 30_000 }, async () => {
  const clock = new ManualClock(T0);
  const engine = await started({ clock, schedulers: { gated: fixture('gated'), service: fixture('noop') } });
  const gate = newGate();
  const first = acks(engine, 1);
  engine.enqueue(evaluation('holder', 'gated', { gate }, { jobId: 'job' }));
  await waitFor(gate, Gate.STARTED, 1);
  const failed = failures(engine, 1);
  const stray = engine.enqueue(evaluation('stray', 'nope', undefined, { jobId: 'job' }));
  assert.equal(engine.broker.inspect('stray')?.queue, FAILED_QUEUE, 'failed at once, not pending behind the job');
  assert.deepEqual(await failed, [{ id: 'stray', code: 'ERR_UNKNOWN_SCHEDULER' }]);
  await assert.rejects(stray.done, { code: 'ERR_UNKNOWN_SCHEDULER' });
  set(gate, Gate.RELEASE, 1);
  assert.deepEqual(await first, ['holder']);
  const next = acks(engine, 1);
  engine.enqueue(evaluation('next', 'service', undefined, { jobId: 'job' }));
  assert.deepEqual(await next, ['next'], 'the job is not blocked');
});

test('resourceLimits too small for a thread to boot: start() rejects with ERR_RESOURCE_LIMIT and nothing is left running', { timeout: 30_000 }, async () => {
  const engine = created({ resourceLimits: { maxOldGenerationSizeMb: 2 }, schedulers: { service: fixture('noop') } });
  await assert.rejects(engine.start(), (error: unknown) => {
    assert.equal(codeOf(error), 'ERR_RESOURCE_LIMIT');
    assert.match((error as Error).message, /maxOldGenerationSizeMb/);
    return true;
  });
  assert.equal(engine.status, 'stopped');
  assert.equal(engine.stats().pool.threads, 0);
  await engine.stop();
  await assert.rejects(engine.start(), { code: 'ERR_INVALID_STATE' });
});

test('resourceLimits that would crash the process or fail to create a thread are refused by createEngine', () => {
  // Measured on Node 20: a stack under ~0.25 MB aborts or segfaults the process, 65536 MB fails with EAGAIN in
  // new Worker(); a code range of 1e9 MB hits a V8 trap.
  for (const limits of [{ stackSizeMb: 0.1 }, { stackSizeMb: 0.2 }, { stackSizeMb: 65_536 }, { codeRangeSizeMb: 1e9 }, { maxOldGenerationSizeMb: Infinity }, { maxYoungGenerationSizeMb: NaN }]) {
    assert.throws(() => created({ resourceLimits: limits }), { code: 'ERR_INVALID_OPTION' }, JSON.stringify(limits));
  }
});

test('an engine with no schedulers (tasks only) runs its tasks; its workers wait quietly instead of failing to dequeue', { timeout: 30_000 }, async () => {
  const lines: Array<{ level: number; msg: string }> = [];
  const capture = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line) as { level: number; msg: string }) });
  const clock = new ManualClock(T0);
  const engine = await started({ clock, logger: capture, handlers: { work: fixture('task-handler') } });
  engine.tasks.add({ id: 'only', every: '1m', maxConcurrency: 1, handler: 'work', payload: { gate: newGate(), mode: 'ok' } });
  const ran = finished(engine, 1, 'only');
  clock.advance(60_000);
  assert.equal((await ran)[0]?.status, 'success');
  await turns();
  assert.deepEqual(lines.map((l) => l.msg), [], 'nothing was logged at warn or above');
  assert.ok(engine.stats().workers.every((w) => w.activity === 'idle'));
  await engine.stop();
  assert.ok(engine.stats().workers.every((w) => w.status === 'stopped'));
});

test('a thread that keeps dying before it is ready is replaced after a growing backoff, not in a loop', { timeout: 60_000 }, async (t) => {
  const clock = new ManualClock(T0);
  const engine = await started({
    clock,
    threads: 1,
    schedulers: { bomb: fixture('boot-bomb') },
    backoff: { baselineMs: 100, limitMs: 1_000, factor: 4 },
    broker: { initialNackDelayMs: 0, subsequentNackDelayMs: 0 },
  });
  // The clock is manual and pool threads are unref'd: while a thread boots, nothing else would keep this process's
  // event loop alive.
  const keepAlive = setInterval(() => {}, 1_000);
  t.after(() => {
    clearInterval(keepAlive);
    delete process.env['TICKPOOL_TEST_BOOT_BOMB'];
  });
  const exits: string[] = [];
  let onExit: (() => void) | undefined;
  engine.events.on('engine:thread-exit', ({ reason }) => {
    exits.push(reason.code);
    onExit?.();
  });
  const nextExit = (): Promise<void> => new Promise((resolve) => (onExit = resolve));
  const threads = (): number => engine.stats().pool.threads;

  // From now on a new thread cannot import the module; the running one is asked to end itself.
  process.env['TICKPOOL_TEST_BOOT_BOMB'] = '1';
  let exited = nextExit();
  engine.enqueue(evaluation('die', 'bomb', { exit: true }));
  await exited; // the thread that had served work: replaced at once
  exited = nextExit();
  await exited; // its replacement died before it was ready
  await turns();
  assert.equal(threads(), 0, 'no replacement until the backoff delay has passed');
  clock.advance(99);
  await turns();
  assert.equal(threads(), 0);
  exited = nextExit();
  clock.advance(1);
  assert.equal(threads(), 1, 'replaced after 100 ms');
  await exited;
  await turns();
  clock.advance(399);
  await turns();
  assert.equal(threads(), 0, 'the next delay is 400 ms');
  exited = nextExit();
  clock.advance(1);
  assert.equal(threads(), 1);
  await exited;
  assert.deepEqual(exits, ['ERR_THREAD_EXITED', 'ERR_THREAD_EXITED', 'ERR_THREAD_EXITED', 'ERR_THREAD_EXITED']);
  // Nothing is lost meanwhile: the evaluation is back in the broker or waiting in the pool for a thread.
  const stopping = engine.stop({ graceMs: 100 });
  await turns();
  clock.advance(100); // the grace period (on the engine's clock), then the cooperative window
  await turns();
  clock.advance(100);
  await stopping;
  assert.notEqual(engine.broker.inspect('die'), undefined, 'the evaluation is still held by the broker');
});
