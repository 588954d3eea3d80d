/**
 * Shutdown: `stop({ graceMs })` while thousands of evaluations are in flight and task runs are running.
 * - It returns within the grace period plus a small bound, even when work ignores its cancel.
 * - Every evaluation ends acked or back in the broker — or, when the caller disables the broker, in the list the
 *   broker returned to the caller. Nothing is acked twice, nothing is lost.
 * - Running task runs end `canceled`, each logged with exactly one final status.
 * - The grace period is one deadline for everything in hand, not one per kind of work.
 * - An engine that was created but never started releases its threads on `stop()`.
 *
 * Time is a manual clock: the bound on how long `stop()` takes is read on it, and everything else waits on events
 * and shared-memory gates.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { ManualClock } from '../../src/clock.js';
import type { Engine } from '../../src/engine/engine.js';
import { SlotState } from '../../src/slots/slot-layout.js';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { acks, evaluation, finished, fixture, fixturePath, nextEvent, started, turns } from './helpers.js';

const GRACE_MS = 1000;
/** What `stop()` may take beyond the grace period, on its clock: the 100 ms cooperative window. */
const BOUND_MS = 100;
/** How far the test moves the clock at a time while it waits for a stop that has no deadline of its own. */
const STEP_MS = 10;
const IN_FLIGHT = 3000;

/** Evaluations the broker still holds, by state. */
function held(engine: Engine): number {
  const s = engine.broker.stats();
  return s.totalReady + s.totalPending + s.totalWaiting + s.totalUnacked + s.totalFailed + s.totalCancelable;
}

/**
 * Four threads, each busy with one long item: a cooperative and a cancel-ignoring task run, a cooperative and a
 * cancel-ignoring evaluation. Then `IN_FLIGHT` cooperative evaluations are dispatched and wait for a thread.
 */
async function loaded(clock: ManualClock): Promise<{ engine: Engine; ids: string[]; acked: Map<string, number> }> {
  const engine = await started({
    clock,
    threads: 4,
    workers: IN_FLIGHT + 2,
    schedulers: { gated: fixture('gated'), stubborn: fixture('stubborn') },
    handlers: { gated: fixture('gated'), stubborn: fixture('stubborn') },
  });
  const acked = new Map<string, number>();
  engine.broker.events.on('broker:ack', ({ evaluation: e }) => acked.set(e.id, (acked.get(e.id) ?? 0) + 1));
  const gates = { coopRun: newGate(), stubbornRun: newGate(), coopEval: newGate(), stubbornEval: newGate(), rest: newGate() };
  engine.tasks.add({ id: 'coop', every: '1h', maxConcurrency: 1, handler: 'gated', payload: { gate: gates.coopRun } });
  engine.tasks.add({ id: 'stubborn', every: '1h', maxConcurrency: 1, retry: 3, handler: 'stubborn', payload: { gate: gates.stubbornRun } });
  await engine.tasks.forceRun('coop');
  await engine.tasks.forceRun('stubborn');
  engine.enqueue(evaluation('coop-eval', 'gated', { gate: gates.coopEval }, { priority: 100 }));
  engine.enqueue(evaluation('stubborn-eval', 'stubborn', { gate: gates.stubbornEval }, { priority: 100 }));
  for (const gate of Object.values(gates).slice(0, 4)) await waitFor(gate, Gate.STARTED, 1);
  const ids = ['coop-eval', 'stubborn-eval'];
  for (let i = 0; i < IN_FLIGHT; i++) {
    ids.push(`e${i}`);
    engine.enqueue(evaluation(`e${i}`, 'gated', { gate: gates.rest }));
  }
  await turns(5); // the workers take them and hand them to the pool, where they wait for a free thread
  const { inflight, queued } = engine.stats().pool;
  assert.ok(inflight + queued >= IN_FLIGHT, `thousands dispatched (${inflight} on threads, ${queued} waiting for one)`);
  assert.equal(Atomics.load(gates.rest, Gate.STARTED), 0, 'none of them could start');
  return { engine, ids, acked };
}

function assertRunsCanceled(engine: Engine): void {
  for (const taskId of ['coop', 'stubborn']) {
    const runs = engine.tasks.runLog.runs(taskId);
    assert.deepEqual(runs.map((r) => r.finalStatus), ['canceled'], `${taskId}: one run, canceled`);
    const finals = runs[0]!.history.filter((h) => ['success', 'failed', 'canceled'].includes(h.status));
    assert.equal(finals.length, 1, `${taskId}: exactly one final status logged`);
  }
}

test('stop({ graceMs }) with thousands in flight returns within the grace plus a bound; every evaluation is acked or back in the broker; runs end canceled', { timeout: 60_000 }, async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const { engine, ids, acked } = await loaded(clock);
  const runsDone = finished(engine, 2);
  const stopEvent = nextEvent<{ requeued: number; forced: boolean }>((l) => engine.events.on('engine:stop', l));
  const t0 = clock.now();
  let stopped = false;
  const stopping = engine.stop({ graceMs: GRACE_MS }).then(() => {
    stopped = true;
  });
  await turns(20);
  clock.advance(GRACE_MS - 1);
  await turns(20);
  assert.equal(stopped, false, 'the evaluations in hand get their grace period');
  clock.advance(1);
  // The grace is over: the engine cancels what it holds and gives cooperative code BOUND_MS. Once that window's
  // timer is set, the clock moves to its end and no further: stop() must then finish on events alone.
  const windowEnd = t0 + GRACE_MS + BOUND_MS;
  for (let turn = 0; !stopped && (clock.nextTimerDue() ?? Infinity) > windowEnd; turn++) {
    assert.ok(turn < 10_000, 'the engine set no timer for its cooperative window after the grace period');
    await turns(1);
  }
  clock.set(windowEnd);
  await stopping;
  assert.ok(clock.now() - t0 <= GRACE_MS + BOUND_MS, 'stop() needed no time on its clock past the grace and the window');
  assert.equal((await stopEvent).forced, true, 'work that ignored its cancel was taken down');

  const stats = engine.broker.stats();
  assert.equal(stats.totalUnacked, 0, 'nothing is left unacked');
  for (const id of ids) {
    const inBroker = engine.broker.inspect(id) !== undefined;
    assert.equal((acked.get(id) ?? 0) + (inBroker ? 1 : 0), 1, `${id} is acked once or back in the broker`);
  }
  assert.equal(held(engine), ids.length - acked.size);
  assert.deepEqual((await runsDone).map((r) => r.status).sort(), ['canceled', 'canceled']);
  assertRunsCanceled(engine);
  assert.equal(engine.stats().pool.threads, 0);
  for (let slot = 0; slot < engine.slots.capacity; slot++) assert.equal(engine.slots.state(slot), SlotState.IDLE, `slot ${slot}`);
});

test('stop() while the caller disables the broker: every evaluation is acked or in the list returned to the caller', { timeout: 60_000 }, async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const { engine, ids, acked } = await loaded(clock);
  let stopped = false;
  const stopping = engine.stop({ graceMs: 200 }).then(() => {
    stopped = true;
  });
  const flushed = engine.broker.setEnabled(false).map((e) => e.id);
  while (!stopped) {
    clock.advance(STEP_MS);
    await turns(5);
  }
  await stopping;
  assert.equal(new Set(flushed).size, flushed.length, 'returned once each');
  const returned = new Set(flushed);
  for (const id of ids) assert.equal((acked.get(id) ?? 0) + (returned.has(id) ? 1 : 0), 1, `${id} is acked once or returned`);
  assert.equal(held(engine), 0, 'the disabled broker holds nothing');
  assert.throws(() => engine.broker.enqueue(evaluation('late', 'gated')), { code: 'ERR_BROKER_DISABLED' });
  assert.throws(() => engine.enqueue(evaluation('late', 'gated')), { code: 'ERR_INVALID_STATE' }, 'a stopped engine takes no new work');
  assertRunsCanceled(engine);
});

test('the grace period is one deadline: an evaluation that finishes just before it does not restart the clock for task runs', { timeout: 30_000 }, async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const engine = await started({
    clock,
    cancelGraceMs: 60_000, // the engine's own deadline must act, not the pool's cancel grace
    schedulers: { stubborn: fixture('stubborn') },
    handlers: { stubborn: fixture('stubborn') },
  });
  const runGate = newGate();
  const evalGate = newGate();
  engine.tasks.add({ id: 'stubborn', every: '1m', maxConcurrency: 1, handler: 'stubborn', payload: { gate: runGate } });
  clock.advance(60_000);
  engine.enqueue(evaluation('slow', 'stubborn', { gate: evalGate }));
  await waitFor(runGate, Gate.STARTED, 1);
  await waitFor(evalGate, Gate.STARTED, 1);
  const runDone = finished(engine, 1);
  const ackDone = acks(engine, 1);

  const stopping = engine.stop({ graceMs: 1000 });
  clock.advance(900);
  set(evalGate, Gate.RELEASE, 1); // the evaluation finishes on its own, 100 ms before the deadline
  assert.deepEqual(await ackDone, ['slow']);
  while (!engine.workers.every((w) => w.status === 'stopped')) await turns(1);
  await turns();
  clock.advance(200); // past the deadline (and well before a second full grace period would end)
  await stopping;
  assert.equal((await runDone)[0]?.status, 'canceled');
  assert.deepEqual(engine.tasks.runLog.runs('stubborn').map((r) => r.finalStatus), ['canceled']);
});

test('an engine that was created but never started releases its threads on stop()', { skip: process.platform !== 'linux' && 'reads /proc/self/task' }, async () => {
  // In a process of its own: engines of the tests above may still be winding their threads down in this one.
  const { stdout } = await promisify(execFile)(process.execPath, [fixturePath('never-started')]);
  const { before, after, status } = JSON.parse(stdout) as { before: number; after: number; status: string[] };
  assert.equal(after, before, 'no pool thread is left behind');
  assert.deepEqual(status, ['stopped', 'stopped', 'stopped', 'stopped']);
});
