/**
 * The pool's work ahead (`workAheadMs`), on real threads: the predicted ms of the items no thread has started, per
 * ready thread; an item running is not ahead of anyone. Which items run is decided by gates the test holds.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { UNKNOWN_MS } from '../../src/pool/cost-model.js';
import { poolHarness } from './helpers.js';

test('work ahead counts the unstarted items predicted ms per thread, not the ones running', async (t) => {
  for (const threads of [1, 2]) {
    const h = poolHarness({ minThreads: threads, maxThreads: threads });
    await h.pool.start();
    const gates = Array.from({ length: threads + 3 }, () => newGate());
    t.after(() => gates.forEach((g) => set(g, Gate.RELEASE, 1)));
    try {
      assert.equal(h.pool.workAheadMs(), 0, 'nothing dispatched, nothing ahead');
      const running = gates.slice(0, threads).map((gate) => h.evaluate('gated', { gate }));
      for (const gate of gates.slice(0, threads)) await waitFor(gate, Gate.STARTED, 1);
      assert.equal(h.pool.workAheadMs(), 0, 'every thread runs one item: nothing ahead');
      // A kind never measured is predicted at UNKNOWN_MS; with every thread busy, these three wait on main.
      const waiting = gates.slice(threads).map((gate) => h.evaluate('gated', { gate }));
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(h.pool.stats().queued, 3);
      assert.equal(h.pool.workAheadMs(), (3 * UNKNOWN_MS) / threads);
      // Asked whether it reaches a bound, it may stop counting there: at least the bound, never less.
      assert.equal(h.pool.workAheadMs(UNKNOWN_MS / threads), UNKNOWN_MS / threads);
      assert.equal(h.pool.workAheadMs((2 * UNKNOWN_MS) / threads), (2 * UNKNOWN_MS) / threads);
      for (const gate of gates) set(gate, Gate.RELEASE, 1);
      for (const d of [...running, ...waiting]) assert.equal((await d.outcome).status, 'ok');
      assert.equal(h.pool.workAheadMs(), 0, 'all settled: nothing ahead');
    } finally {
      await h.pool.stop({ force: true });
    }
  }
});
