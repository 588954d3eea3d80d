/**
 * Fair dispatch on real threads: no thread holds work it has not started, so an item waits in the work queue for
 * the first free thread, never behind a busy one, and the next free thread takes the best item there: highest
 * priority first, FIFO within a priority. Observed through the items' own gates and outcomes (which thread is free
 * is decided by a gate the test holds), not through timings: nothing sleeps.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { poolHarness, within } from './helpers.js';

test('an item waits in the work queue for the first free thread, on neither busy thread', async (t) => {
  const h = poolHarness({ minThreads: 2, maxThreads: 2 });
  await h.pool.start();
  t.after(() => h.pool.stop({ force: true }));
  const first = newGate();
  const second = newGate();
  const third = newGate();
  t.after(() => [first, second, third].forEach((g) => set(g, Gate.RELEASE, 1)));
  const a = h.evaluate('gated', { gate: first });
  const b = h.evaluate('gated', { gate: second });
  await waitFor(first, Gate.STARTED, 1);
  await waitFor(second, Gate.STARTED, 1);
  const c = h.evaluate('gated', { gate: third });
  assert.equal(h.pool.stats().queued, 1);
  set(second, Gate.RELEASE, 1);
  assert.equal((await b.outcome).status, 'ok');
  // The thread that came free takes it, while the other is still held.
  await within(waitFor(third, Gate.STARTED, 1), 'the waiting item to start on the thread that came free');
  assert.equal(Atomics.load(first, Gate.RELEASE), 0);
  set(third, Gate.RELEASE, 1);
  set(first, Gate.RELEASE, 1);
  assert.equal((await c.outcome).status, 'ok');
  assert.equal((await a.outcome).status, 'ok');
});

test('no unstarted item waits behind a busy thread while another is free: every other item ends while one thread is blocked', async (t) => {
  for (const count of [1, 3, 10, 400]) {
    const h = poolHarness({ minThreads: 2, maxThreads: 2 });
    await h.pool.start();
    const blocker = newGate();
    try {
      const blocked = h.evaluate('gated', { gate: blocker });
      await waitFor(blocker, Gate.STARTED, 1);
      const cheap = Array.from({ length: count }, () => h.evaluate('noop').outcome);
      const outcomes = await within(Promise.all(cheap), `all ${count} items while one thread is blocked`);
      for (const outcome of outcomes) assert.equal(outcome.status, 'ok');
      assert.equal(Atomics.load(blocker, Gate.RELEASE), 0);
      assert.equal(h.pool.stats().inflight, 1, 'only the blocker is still out');
      set(blocker, Gate.RELEASE, 1);
      assert.equal((await blocked.outcome).status, 'ok');
      const stats = h.pool.stats();
      assert.equal(stats.dispatched, stats.settled, 'every item settled exactly once');
    } finally {
      set(blocker, Gate.RELEASE, 1);
      await h.pool.stop({ force: true });
    }
  }
});

test('property: items waiting for a thread start highest priority first, FIFO within a priority', async (t) => {
  const h = poolHarness({ minThreads: 1, maxThreads: 1 });
  await h.pool.start();
  t.after(() => h.pool.stop({ force: true }));
  await fc.assert(
    fc.asyncProperty(fc.array(fc.integer({ min: 1, max: 100 }), { minLength: 1, maxLength: 40 }), async (priorities) => {
      const blocker = newGate();
      const blocked = h.evaluate('gated', { gate: blocker });
      await waitFor(blocker, Gate.STARTED, 1);
      // The one thread is busy: everything below waits in the queue, published in this order.
      const order = new Int32Array(new SharedArrayBuffer(4 * (priorities.length + 1)));
      const items = priorities.map((priority, index) => h.evaluate('ordered', { order, index }, { priority }).outcome);
      set(blocker, Gate.RELEASE, 1);
      await blocked.outcome;
      for (const outcome of await Promise.all(items)) assert.equal(outcome.status, 'ok');
      const started = priorities.map((_, i) => order[1 + i]!);
      const expected = priorities
        .map((priority, index) => ({ priority, index }))
        .sort((a, b) => b.priority - a.priority || a.index - b.index)
        .map(({ index }) => index);
      const actual = priorities.map((_, i) => i).sort((a, b) => started[a]! - started[b]!);
      assert.deepEqual(actual, expected);
    }),
    { numRuns: 30 },
  );
});
