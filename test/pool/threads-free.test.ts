/**
 * The pool's threads free soon (`threadsFreeWithin`), on real threads: how many could start another item within a
 * horizon, from the predictions of what they run and hold. What a broker leasing for this process across a cluster
 * asks before it takes more. Which items run is decided by gates the test holds.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { UNKNOWN_MS } from '../../src/pool/cost-model.js';
import { OVERRUN_BUDGET_MS } from '../../src/pool/free-threads.js';
import { poolHarness } from './helpers.js';

test('a thread running an item predicted past the horizon is not free within it; an idle one is', async (t) => {
  const h = poolHarness({ minThreads: 2, maxThreads: 2 });
  await h.pool.start();
  const gates = Array.from({ length: 3 }, () => newGate());
  t.after(() => gates.forEach((g) => set(g, Gate.RELEASE, 1)));
  try {
    assert.equal(h.pool.threadsFreeWithin(20), 2, 'idle threads are free');
    // A type never measured is predicted at UNKNOWN_MS.
    const first = h.evaluate('gated', { gate: gates[0]! });
    await waitFor(gates[0]!, Gate.STARTED, 1);
    assert.equal(h.pool.threadsFreeWithin(20), 1, 'the thread running a 1 s prediction is not free within 20 ms');
    const second = h.evaluate('gated', { gate: gates[1]! });
    await waitFor(gates[1]!, Gate.STARTED, 1);
    assert.equal(h.pool.threadsFreeWithin(20), 0, 'both threads run');
    assert.equal(h.pool.threadsFreeWithin(UNKNOWN_MS + 1), 2, 'within their predictions both are free');
    for (const gate of gates) set(gate, Gate.RELEASE, 1);
    for (const d of [first, second]) assert.equal((await d.outcome).status, 'ok');
    assert.equal(h.pool.threadsFreeWithin(20), 2, 'free again');
  } finally {
    await h.pool.stop({ force: true });
  }
});

test('a thread whose running item runs far past its prediction is not free, however short the prediction', async (t) => {
  // The pool reads how long an item has run from this monotonic clock, which the test moves.
  let now = 0;
  const h = poolHarness({ minThreads: 1, maxThreads: 1, monotonicNow: () => now });
  await h.pool.start();
  const gates = Array.from({ length: 4 }, () => newGate());
  t.after(() => gates.forEach((g) => set(g, Gate.RELEASE, 1)));
  try {
    // Items released before they start teach the pool that this type is short.
    for (const gate of gates.slice(0, 3)) {
      set(gate, Gate.RELEASE, 1);
      assert.equal((await h.evaluate('gated', { gate }).outcome).status, 'ok');
    }
    const held = h.evaluate('gated', { gate: gates[3]! });
    await waitFor(gates[3]!, Gate.STARTED, 1);
    assert.equal(h.pool.threadsFreeWithin(2 * UNKNOWN_MS), 1, 'within its short prediction it is free soon');
    // Well past its prediction by more than the budget it is busy for an unknown time, though a 1 s prediction
    // would have kept it free within 2 s.
    now += OVERRUN_BUDGET_MS + UNKNOWN_MS;
    assert.equal(h.pool.threadsFreeWithin(2 * UNKNOWN_MS), 0);
    set(gates[3]!, Gate.RELEASE, 1);
    assert.equal((await held.outcome).status, 'ok');
    assert.equal(h.pool.threadsFreeWithin(20), 1, 'free again');
  } finally {
    await h.pool.stop({ force: true });
  }
});

test('threads the pool has not started count as free: they start on demand', async () => {
  const h = poolHarness({ minThreads: 0, maxThreads: 2 });
  await h.pool.start();
  try {
    assert.equal(h.pool.threadsFreeWithin(20), 2);
  } finally {
    await h.pool.stop({ force: true });
  }
});
