/**
 * Task runs on real pool threads, next to evaluations. Time is a ManualClock: runs become due only when the test
 * advances it; threads are real, and the test waits on scheduler events and shared-memory gates.
 */
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { after, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { createEngine, type Engine } from '../../src/engine/engine.js';
import { Gate, newGate, waitFor } from '../fixtures/gates.js';

const fixture = (name: string): URL => new URL(`../fixtures/${name}.js`, import.meta.url);
const engines: Engine[] = [];
/** Faults are expected here: keep their warnings out of the test output. */
const logger = pino({ level: 'silent' });
after(async () => {
  await Promise.all(engines.map((e) => e.stop({ graceMs: 100 })));
});

const T0 = Date.UTC(2026, 0, 1);

async function started(clock: ManualClock, extra: Parameters<typeof createEngine>[0] = {}): Promise<Engine> {
  const engine = createEngine({
    threads: 2,
    workers: 4,
    clock,
    logger,
    handlers: { work: fixture('task-handler') },
    schedulers: { service: fixture('noop') },
    ...extra,
  });
  engines.push(engine);
  await engine.start();
  return engine;
}

function finished(engine: Engine, count: number): Promise<Array<{ runId: string; status: string; attempts: number; scheduledFor: number }>> {
  const seen: Array<{ runId: string; status: string; attempts: number; scheduledFor: number }> = [];
  return new Promise((resolve) => {
    const off = engine.tasks.events.on('task:run:finish', ({ runId, status, attempts, scheduledFor }) => {
      seen.push({ runId, status, attempts, scheduledFor });
      if (seen.length === count) {
        off();
        resolve(seen);
      }
    });
  });
}

test('an every-task runs on a pool thread at each due time and is logged success', async () => {
  const clock = new ManualClock(T0);
  const engine = await started(clock);
  const gate = newGate();
  engine.tasks.add({ id: 'tick', every: '1s', maxConcurrency: 1, handler: 'work', payload: { gate, mode: 'ok' } });
  const done = finished(engine, 2);
  clock.advance(1000);
  await waitFor(gate, Gate.CALLS, 1);
  clock.advance(1000);
  const runs = await done;
  assert.deepEqual(runs.map((r) => [r.scheduledFor - T0, r.status]), [[1000, 'success'], [2000, 'success']]);
  const log = engine.tasks.runLog.runs('tick');
  assert.deepEqual(log.map((r) => r.finalStatus), ['success', 'success']);
  assert.equal(engine.stats().tasks.runsActive, 0);
});

test('a retryable failure is retried with backoff and ends in one final status', async () => {
  const clock = new ManualClock(T0);
  const engine = await started(clock, { backoff: { baselineMs: 50, limitMs: 50 } });
  const gate = newGate();
  engine.tasks.add({ id: 'flaky', every: '1m', maxConcurrency: 1, retry: 2, handler: 'work', payload: { gate, mode: 'flaky' } });
  const retried = new Promise<number>((resolve) => engine.tasks.events.once('task:run:retry', ({ delayMs }) => resolve(delayMs)));
  const done = finished(engine, 1);
  clock.advance(60_000);
  assert.equal(await retried, 50);
  clock.advance(50);
  const [run] = await done;
  assert.equal(run?.status, 'success');
  assert.equal(run?.attempts, 2);
  const record = engine.tasks.runLog.runs('flaky')[0]!;
  assert.equal(record.finalStatus, 'success');
  assert.equal(record.history.filter((h) => h.status === 'started').length, 2, 'each attempt logged');
});

test('a handler may return a RunResult: a returned retryable error is retried like a thrown one', async () => {
  const clock = new ManualClock(T0);
  const engine = await started(clock, { backoff: { baselineMs: 10, limitMs: 10 } });
  const gate = newGate();
  engine.tasks.add({ id: 'result', every: '1m', maxConcurrency: 1, retry: 1, handler: 'work', payload: { gate, mode: 'flaky-result' } });
  const retried = new Promise<string>((resolve) => engine.tasks.events.once('task:run:retry', ({ error }) => resolve(error.message)));
  const done = finished(engine, 1);
  clock.advance(60_000);
  assert.equal(await retried, 'dependency down');
  clock.advance(10);
  const [run] = await done;
  assert.deepEqual([run?.status, run?.attempts], ['success', 2]);
});

test('a thread that exits during a run: the run is retried on a new thread', async () => {
  const clock = new ManualClock(T0);
  const engine = await started(clock);
  const gate = newGate();
  engine.tasks.add({ id: 'crashy', every: '1m', maxConcurrency: 1, retry: 1, handler: 'work', payload: { gate, mode: 'exit-once' } });
  const retried = new Promise<string>((resolve) =>
    engine.tasks.events.once('task:run:retry', ({ error }) => resolve((error as { code?: string }).code ?? '')),
  );
  const done = finished(engine, 1);
  clock.advance(60_000);
  assert.equal(await retried, 'ERR_THREAD_EXITED');
  clock.advance(20);
  const [run] = await done;
  assert.equal(run?.status, 'success');
  assert.equal(engine.stats().pool.threads, 2, 'the pool is back at its thread count');
});

test('remove() during a run cancels it: logged canceled, slot freed, the handler saw the cancel', async () => {
  const clock = new ManualClock(T0);
  const engine = await started(clock);
  const gate = newGate();
  engine.tasks.add({ id: 'long', every: '1m', maxConcurrency: 1, handler: 'work', payload: { gate, mode: 'spin' } });
  const done = finished(engine, 1);
  clock.advance(60_000);
  await waitFor(gate, Gate.STARTED, 1);
  await engine.tasks.remove('long');
  const [run] = await done;
  assert.equal(run?.status, 'canceled');
  assert.equal(Atomics.load(gate, Gate.SAW_CANCEL), 1);
  assert.equal(engine.tasks.taskStats('long'), undefined, 'released and gone');
  assert.equal(engine.tasks.desiredState.getTask('long'), undefined, 'deleted from the store');
  assert.equal(engine.stats().tasks.slotsBusy, 0);
});

test('stop() while runs are in flight: every run ends canceled and is logged, started or still queued', async () => {
  const clock = new ManualClock(T0);
  const engine = await started(clock);
  const gates = [newGate(), newGate(), newGate()];
  gates.forEach((gate, i) => engine.tasks.add({ id: `s${i}`, every: '1m', maxConcurrency: 1, handler: 'work', payload: { gate, mode: 'spin' } }));
  clock.advance(60_000);
  // Two threads: two runs spin, the third waits on a thread behind one of them.
  await Promise.race([Promise.all([waitFor(gates[0]!, Gate.STARTED, 1), waitFor(gates[1]!, Gate.STARTED, 1)]), Promise.all([waitFor(gates[0]!, Gate.STARTED, 1), waitFor(gates[2]!, Gate.STARTED, 1)]), Promise.all([waitFor(gates[1]!, Gate.STARTED, 1), waitFor(gates[2]!, Gate.STARTED, 1)])]);
  await engine.stop({ graceMs: 200 });
  assert.equal(gates.reduce((n, g) => n + Atomics.load(g, Gate.SAW_CANCEL), 0), 2, 'the two running handlers saw the cancel');
  for (let i = 0; i < 3; i++) {
    const runs = engine.tasks.runLog.runs(`s${i}`);
    assert.deepEqual(runs.map((r) => r.finalStatus), ['canceled'], `task s${i}`);
  }
});

test('adding a task whose handler is not registered fails its runs with a typed error, never executing anything', async () => {
  const clock = new ManualClock(T0);
  const engine = await started(clock);
  engine.tasks.add({ id: 'ghost', every: '1s', maxConcurrency: 1, handler: 'nope' });
  const done = finished(engine, 1);
  clock.advance(1000);
  const [run] = await done;
  assert.equal(run?.status, 'failed');
  const record = engine.tasks.runLog.runs('ghost')[0]!;
  assert.equal((record.error as { code?: string } | undefined)?.code, 'ERR_UNKNOWN_HANDLER');
});

test('engine.tasks.forceRun returns the run with done: the handler’s value, or the error it ended with', async () => {
  const clock = new ManualClock(T0);
  const engine = await started(clock);
  const gate = newGate();
  engine.tasks.add({ id: 'manual', every: '1h', maxConcurrency: 1, handler: 'work', payload: { gate, mode: 'ok' } });
  const run = await engine.tasks.forceRun('manual', T0 - 5_000);
  assert.deepEqual(await run.done, { value: { scheduledFor: T0 - 5_000 } });

  const spinGate = newGate();
  engine.tasks.add({ id: 'spinning', every: '1h', maxConcurrency: 1, handler: 'work', payload: { gate: spinGate, mode: 'spin' } });
  const first = await engine.tasks.forceRun('spinning', T0 - 2_000);
  const queued = await engine.tasks.forceRun('spinning', T0 - 1_000);
  await waitFor(spinGate, Gate.STARTED, 1);
  await engine.stop({ graceMs: 1_000 });
  await assert.rejects(first.done, (error: unknown) => (error as { code?: string }).code === 'ERR_RUN_CANCELED');
  await assert.rejects(queued.done, (error: unknown) => (error as { code?: string }).code === 'ERR_INVALID_STATE', 'queued behind it, never to run');
});

test('engine.tasks composes its scheduler: no claim, release, tick or lifecycle of its own', async () => {
  const engine = await started(new ManualClock(T0));
  for (const name of ['claimTask', 'releaseTask', 'tick', 'start', 'stop']) {
    assert.equal(name in engine.tasks, false, `engine.tasks.${name}`);
  }
  assert.equal(engine.tasks.state, 'running');
});
