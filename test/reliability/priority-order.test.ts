/**
 * Priority survives into the pool. With the defaults (a worker count of threads × 128, so hundreds of evaluations
 * are dequeued at once and wait for a thread), a high-priority evaluation starts before every lower-priority one
 * that has not started, however many of those the workers took first: the pool's queue of unstarted items is ordered
 * by priority, then FIFO, and no thread holds an item it has not started. Real threads, held by gates; the order is
 * read from what the items themselves record when they start.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { acks, evaluation, fixture, started, turns } from './helpers.js';

test('with the default workers, a high-priority evaluation starts before every lower-priority one waiting for a thread', async () => {
  // One thread, so that the order the items record at their start is the order the thread took them in.
  const engine = await started({ threads: 1, workers: undefined, schedulers: { block: fixture('gated'), work: fixture('ordered') } });
  assert.equal(engine.options.workers, 128);
  const blockers = [newGate()];
  blockers.forEach((gate, i) => engine.enqueue(evaluation(`blocker${i}`, 'block', { gate })));
  for (const gate of blockers) await waitFor(gate, Gate.STARTED, 1);
  const lows = 100;
  const order = new Int32Array(new SharedArrayBuffer(4 * (lows + 4)));
  const done = acks(engine, lows + 3, (id) => !id.startsWith('blocker'));
  for (let i = 0; i < lows; i++) engine.enqueue(evaluation(`low${i}`, 'work', { order, index: i }, { priority: 30 }));
  // Every low one is dequeued by a worker and waits in the pool before the others come.
  await turns();
  assert.equal(engine.broker.stats().totalReady, 0, 'the workers took them all');
  engine.enqueue(evaluation('medium', 'work', { order, index: lows }, { priority: 50 }));
  engine.enqueue(evaluation('high', 'work', { order, index: lows + 1 }, { priority: 90 }));
  engine.enqueue(evaluation('high2', 'work', { order, index: lows + 2 }, { priority: 90 }));
  await turns();
  for (const gate of blockers) set(gate, Gate.RELEASE, 1);
  assert.equal((await done).length, lows + 3);
  const startOf = (index: number): number => order[1 + index]!;
  const high = startOf(lows + 1);
  const high2 = startOf(lows + 2);
  const medium = startOf(lows);
  assert.ok(high < high2, 'equal priorities in the order they came');
  assert.ok(high2 < medium, 'the high ones before the medium one');
  for (let i = 0; i < lows; i++) assert.ok(medium < startOf(i), `the medium one before low${i}`);
  for (let i = 1; i < lows; i++) assert.ok(startOf(i - 1) < startOf(i), 'the low ones in the order they came');
});
