/**
 * Deadlines start with the work: a delivery's nack deadline counts from when its scheduler starts on a thread, so
 * waiting for a thread is never a timeout, and an evaluation is charged only for its own faults. Real threads;
 * where the broker's clock matters it is a ManualClock moved by the test, and heartbeats happen in lock-step with
 * it (`lockstep-heartbeat`), so nothing depends on how fast the machine is.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import type { Engine } from '../../src/engine/engine.js';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { acks, codeOf, evaluation, failures, fixture, nextEvent, started, turns } from './helpers.js';

interface Watch {
  readonly timeouts: string[];
  readonly deliveries: Map<string, number>;
}

function watch(engine: Engine): Watch {
  const w: Watch = { timeouts: [], deliveries: new Map() };
  engine.broker.events.on('broker:nack', ({ evaluation: e, timedOut }) => {
    if (timedOut) w.timeouts.push(e.id);
  });
  engine.broker.events.on('broker:dequeue', ({ evaluation: e }) => w.deliveries.set(e.id, (w.deliveries.get(e.id) ?? 0) + 1));
  return w;
}

/** One thread, two workers, lock-step heartbeating schedulers, a 200 ms nack timeout on a manual clock. */
async function oneThreadTwoWorkers(broker: { initialNackDelayMs: number; subsequentNackDelayMs?: number }): Promise<{ clock: ManualClock; engine: Engine; w: Watch }> {
  const clock = new ManualClock(0);
  const engine = await started({
    clock,
    threads: 1,
    workers: 2,
    schedulers: { beat: fixture('lockstep-heartbeat') },
    broker: { nackTimeoutMs: 200, deliveryLimit: 3, ...broker },
  });
  return { clock, engine, w: watch(engine) };
}

test('defaults scaled down (nack timeout 1 s, jobs of 10 ms, 300 at once on 2 threads): no nack timeout, each acked once', { timeout: 60_000 }, async () => {
  // The default workers and batch size: hundreds of evaluations are dequeued at once and wait for a thread, far
  // longer in all than the nack timeout; none of that waiting may count against it.
  const engine = await started({
    threads: 2,
    workers: undefined,
    schedulers: { spin: fixture('spin-ms') },
    broker: { nackTimeoutMs: 1000 },
  });
  const w = watch(engine);
  const done = acks(engine, 300);
  for (let i = 0; i < 300; i++) engine.enqueue(evaluation(`s${i}`, 'spin', { ms: 10 }));
  assert.equal((await done).length, 300);
  assert.deepEqual(w.timeouts, [], 'no nack timeouts');
  for (const [id, n] of w.deliveries) assert.equal(n, 1, `${id} was delivered once`);
  assert.equal(engine.broker.stats().totalFailed, 0);
});

test('a heartbeating scheduler queued behind another one is not timed out while it waits, however long', { timeout: 30_000 }, async () => {
  const { clock, engine, w } = await oneThreadTwoWorkers({ initialNackDelayMs: 0, subsequentNackDelayMs: 0 });
  const first = newGate();
  const second = newGate();
  const done = acks(engine, 2);
  engine.enqueue(evaluation('first', 'beat', { gate: first }));
  await waitFor(first, Gate.STARTED, 1);
  engine.enqueue(evaluation('second', 'beat', { gate: second }));
  await turns(); // the second worker takes it: it waits for the one thread
  // Many nack timeouts' worth of time pass: the running one shows progress, the waiting one has not started.
  for (let tick = 1; tick <= 6; tick++) {
    set(first, Gate.TICK, tick);
    await waitFor(first, Gate.BEAT, tick);
    clock.advance(200);
    await turns();
  }
  assert.deepEqual(w.timeouts, []);
  assert.equal(Atomics.load(second, Gate.STARTED), 0, 'the second never started meanwhile');
  set(first, Gate.RELEASE, 1);
  await waitFor(second, Gate.STARTED, 1);
  // Its own deadline counts from its start: it heartbeats through two more timeouts' worth, then finishes.
  for (let tick = 1; tick <= 2; tick++) {
    set(second, Gate.TICK, tick);
    await waitFor(second, Gate.BEAT, tick);
    clock.advance(200);
    await turns();
  }
  set(second, Gate.RELEASE, 1);
  assert.deepEqual((await done).sort(), ['first', 'second']);
  assert.deepEqual(w.timeouts, []);
  assert.deepEqual(Object.fromEntries(w.deliveries), { first: 1, second: 1 });
});

test('a started scheduler that shows no progress is timed out nack-timeout after its start, not after its dequeue', { timeout: 30_000 }, async () => {
  const { clock, engine, w } = await oneThreadTwoWorkers({ initialNackDelayMs: 60_000 });
  const first = newGate();
  const second = newGate();
  engine.enqueue(evaluation('first', 'beat', { gate: first }));
  await waitFor(first, Gate.STARTED, 1);
  engine.enqueue(evaluation('second', 'beat', { gate: second }));
  await turns();
  clock.advance(150); // the second waits: 150 ms after its dequeue
  set(first, Gate.RELEASE, 1);
  await waitFor(second, Gate.STARTED, 1); // it starts at 150
  await turns();
  clock.advance(100); // 250: past its dequeue + 200, but only 100 after its start
  await turns();
  assert.deepEqual(w.timeouts, [], 'not timed out 100 ms after its start');
  const timedOut = nextEvent<string>((l) => engine.broker.events.on('broker:nack', ({ evaluation: e, timedOut: t }) => t && l(e.id)));
  clock.advance(100); // 350: 200 after its start, no heartbeat since
  assert.equal(await timedOut, 'second');
  set(second, Gate.RELEASE, 1);
});

test('an evaluation waiting behind a hung one is not charged for it: it runs once, the hung one alone ends in _failed', { timeout: 30_000 }, async () => {
  const clock = new ManualClock(0);
  const engine = await started({
    clock,
    threads: 1,
    workers: 3,
    cancelGraceMs: 50,
    schedulers: { stubborn: fixture('stubborn'), noop: fixture('noop') },
    broker: { nackTimeoutMs: 200, deliveryLimit: 2, initialNackDelayMs: 0, subsequentNackDelayMs: 0 },
  });
  const w = watch(engine);
  const hung = newGate();
  const failed = failures(engine, 1);
  const innocentDone = acks(engine, 1, (id) => id === 'innocent');
  engine.enqueue(evaluation('hung', 'stubborn', { gate: hung }));
  await waitFor(hung, Gate.STARTED, 1);
  engine.enqueue(evaluation('innocent', 'noop'));
  await turns();
  // The hung one's deadline passes: it is nacked, canceled, ignores the cancel, and its thread is terminated after
  // the grace period. The innocent one has not started: its deadline is no reason to nack it.
  clock.advance(200);
  await turns();
  clock.advance(50);
  assert.deepEqual(await innocentDone, ['innocent']);
  // The hung one's redelivery hangs again on the new thread and reaches the delivery limit.
  await waitFor(hung, Gate.STARTED, 2);
  await turns();
  clock.advance(200);
  const [dead] = await failed;
  assert.equal(dead?.id, 'hung');
  assert.equal(codeOf(engine.broker.failedReason('hung')), 'ERR_DELIVERY_LIMIT');
  assert.deepEqual(w.timeouts, ['hung', 'hung'], 'only the hung one was timed out');
  assert.equal(w.deliveries.get('innocent'), 1);
  set(hung, Gate.RELEASE, 1);
});

test('stop() with cooperative work in hand reports no thread exits: ending the threads was the stop', { timeout: 30_000 }, async () => {
  const engine = await started({ threads: 2, workers: 2, schedulers: { gated: fixture('gated') } });
  const exits: unknown[] = [];
  engine.events.on('engine:thread-exit', (exit) => exits.push(exit));
  const gates = [newGate(), newGate()];
  gates.forEach((gate, i) => engine.enqueue(evaluation(`g${i}`, 'gated', { gate })));
  for (const gate of gates) await waitFor(gate, Gate.STARTED, 1);
  const stopped = nextEvent<{ requeued: number; forced: boolean }>((l) => engine.events.on('engine:stop', l));
  await engine.stop({ graceMs: 10 });
  assert.deepEqual(await stopped, { requeued: 2, forced: true });
  assert.deepEqual(exits, []);
  for (const gate of gates) assert.equal(Atomics.load(gate, Gate.SAW_CANCEL), 1, 'each saw its cancel');
});
