/**
 * Giving up work that has not started settles at once. One thread runs a blocker that never looks at its cancel;
 * an evaluation dispatched behind it (waiting in the work queue for the thread) holds nothing, so aborting its
 * `run()` rejects with `AbortedError` without waiting for the blocker's nack deadline and cancel grace: the start
 * CAS on its slot word decides the race with the thread, and the cancel wins it. The thread
 * and the blocker are left alone. The engine runs on a manual clock, so no deadline can end the wait for it: the
 * rejection must come from the abort, within a few turns of the event loop.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { AbortedError } from '../../src/errors.js';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { evaluation, fixture, started, turns } from './helpers.js';

/** Waits up to `limit` turns of the event loop for `promise` to settle; says how it settled, or 'pending'. */
async function settledWithin<T>(promise: Promise<T>, limit: number): Promise<{ status: 'fulfilled' | 'rejected' | 'pending'; error?: unknown }> {
  let result: { status: 'fulfilled' | 'rejected' | 'pending'; error?: unknown } = { status: 'pending' };
  promise.then(
    () => (result = { status: 'fulfilled' }),
    (error: unknown) => (result = { status: 'rejected', error }),
  );
  for (let i = 0; i < limit && result.status === 'pending'; i++) await turns(1);
  return result;
}

for (const kind of ['never measured', 'known to be quick'] as const) {
  test(`an aborted run() of an evaluation (${kind}) waiting for the one thread behind a non-cooperative item rejects at once; the blocker is untouched`, async () => {
    const clock = new ManualClock(0);
    const engine = await started({ threads: 1, clock, schedulers: { block: fixture('stubborn'), quick: fixture('noop') } });
    if (kind === 'known to be quick') {
      for (let i = 0; i < 20; i++) await engine.run(evaluation(`warm${i}`, 'quick'));
    }
    const gate = newGate();
    const blocker = engine.run(evaluation('blocker', 'block', { gate }));
    await waitFor(gate, Gate.STARTED, 1);
    const controller = new AbortController();
    const victim = engine.run(evaluation('victim', 'quick'), { signal: controller.signal });
    // The victim is dispatched: a worker holds it, waiting for the one thread.
    for (let i = 0; i < 100 && engine.broker.inspect('victim')?.state !== 'unacked'; i++) await turns(1);
    assert.equal(engine.broker.inspect('victim')?.state, 'unacked');
    const held = engine.stats().pool;
    assert.deepEqual([held.inflight, held.queued], [2, 1], 'the victim waits in the pool for the thread the blocker holds');
    controller.abort(new Error('caller gave up'));
    const settled = await settledWithin(victim, 50);
    assert.equal(settled.status, 'rejected', 'the abort settled without waiting for the blocker');
    assert.ok(settled.error instanceof AbortedError);
    assert.equal(engine.broker.inspect('victim'), undefined, 'removed from the broker');
    assert.equal(Atomics.load(gate, Gate.CALLS), 1, 'the blocker runs on, once');
    assert.equal(engine.stats().pool.threadExits, 0, 'the thread was not terminated');
    set(gate, Gate.RELEASE, 1);
    assert.equal((await blocker).deliveries, 1);
  });
}
