/**
 * Fair dispatch on real threads: work that has not started is not committed to a busy thread while another thread
 * is free. Observed through the items' own start gates and outcomes (which thread is free is decided by a gate the
 * test holds), not through timings: nothing sleeps.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { poolHarness, within, type PoolHarness } from './helpers.js';

const released = (): Int32Array => {
  const gate = newGate();
  set(gate, Gate.RELEASE, 1);
  return gate;
};

/** Runs enough items of each kind that the pool predicts them cheap: then they queue behind each other. */
async function teachCheap(h: PoolHarness): Promise<void> {
  for (let i = 0; i < 30; i++) {
    assert.equal((await h.evaluate('gated', { gate: released() }).outcome).status, 'ok');
    assert.equal((await h.evaluate('noop').outcome).status, 'ok');
  }
}

test('an item of a kind never measured is not sent behind a busy thread: it waits on main for the first free thread', async (t) => {
  const h = poolHarness({ minThreads: 2, maxThreads: 2, batchSize: 128 });
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
  // Both threads are busy with an item whose cost nobody knows yet: the third waits on main, on neither thread.
  const c = h.evaluate('gated', { gate: third });
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(h.pool.stats().queued, 1);
  assert.deepEqual(h.pool.stats().perThread.map((p) => p.inflight), [1, 1]);
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

test('no unstarted item waits behind a busy thread while another is idle: cheap items queued behind a blocked one are taken back (property over batch sizes)', async (t) => {
  for (const count of [1, 3, 10, 40]) {
    const h = poolHarness({ minThreads: 2, maxThreads: 2, batchSize: 128 });
    await h.pool.start();
    await teachCheap(h);
    const blocker = newGate();
    try {
      // The blocker goes to an idle thread at once, the cheap items in the next flush: predicted cheap, some of them
      // are given to the blocker's thread too, behind it.
      const blocked = h.evaluate('gated', { gate: blocker });
      const cheap = Array.from({ length: count }, () => h.evaluate('noop').outcome);
      await waitFor(blocker, Gate.STARTED, 1);
      // Every one of them ends while the blocker still holds its thread: the other thread ran them all.
      const outcomes = await within(Promise.all(cheap), `all ${count} cheap items while one thread is blocked`);
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

test('an item taken back from a busy thread runs exactly once: the thread it was first sent to reports it not started', async (t) => {
  const h = poolHarness({ minThreads: 2, maxThreads: 2, batchSize: 128 });
  await h.pool.start();
  t.after(() => h.pool.stop({ force: true }));
  await teachCheap(h);
  const blocker = newGate();
  t.after(() => set(blocker, Gate.RELEASE, 1));
  const blocked = h.evaluate('gated', { gate: blocker });
  // Cheap gated items, each with its own gate: CALLS counts how many times each one ran.
  const gates = Array.from({ length: 20 }, () => released());
  const items = gates.map((gate) => h.evaluate('gated', { gate }).outcome);
  await waitFor(blocker, Gate.STARTED, 1);
  await within(Promise.all(items), 'the cheap items beside the blocked thread');
  const takenBack = h.pool.stats().takenBack;
  // Let the blocked thread reach what it was sent: it must skip every item another thread took.
  set(blocker, Gate.RELEASE, 1);
  assert.equal((await blocked.outcome).status, 'ok');
  for (const outcome of await Promise.all(items)) assert.equal(outcome.status, 'ok');
  await within(
    (async () => {
      for (let i = 0; i < 40; i++) assert.equal((await h.evaluate('noop').outcome).status, 'ok');
    })(),
    'the pool to serve on',
  );
  gates.forEach((gate, i) => assert.equal(Atomics.load(gate, Gate.CALLS), 1, `item ${i} ran once`));
  assert.ok(takenBack > 0, `the scenario took items back (${takenBack})`);
  const stats = h.pool.stats();
  assert.equal(stats.dispatched, stats.settled);
  assert.equal(stats.inflight, 0);
});
