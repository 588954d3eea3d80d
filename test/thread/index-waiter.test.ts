import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { CanceledError, SyncLimitError } from '../../src/errors.js';
import { IndexWaiter } from '../../src/thread/index-waiter.js';

function setup(): { clock: ManualClock; waiter: IndexWaiter; at: (index: number) => void } {
  const clock = new ManualClock(0);
  let applied = 0;
  const waiter = new IndexWaiter(() => applied, clock);
  return {
    clock,
    waiter,
    at(index) {
      applied = index;
      waiter.applied();
    },
  };
}

test('a wait resolves when the index is applied, or fails with SyncLimitError at its limit', async () => {
  const { clock, waiter, at } = setup();
  await waiter.wait(0, 100);
  const reached = waiter.wait(3, 100);
  at(2);
  assert.equal(waiter.pending, 1);
  at(3);
  await reached;
  const stuck = waiter.wait(5, 100);
  clock.advance(99);
  assert.equal(waiter.pending, 1);
  clock.advance(1);
  await assert.rejects(stuck, (e: unknown) => e instanceof SyncLimitError && e.code === 'ERR_SYNC_LIMIT');
  assert.equal(waiter.pending, 0);
  assert.equal(clock.pendingTimers, 0, 'no timer left behind');
});

test('an aborted signal ends a wait with its reason and disarms its timer and listener', async () => {
  const { clock, waiter, at } = setup();
  const controller = new AbortController();
  const waiting = waiter.wait(5, 10_000, controller.signal);
  clock.advance(10);
  assert.equal(waiter.pending, 1, 'not canceled yet: still waiting');
  controller.abort(new CanceledError('Evaluation "e1" was canceled'));
  await assert.rejects(waiting, (e: unknown) => e instanceof CanceledError && /e1/.test((e as Error).message));
  assert.equal(waiter.pending, 0);
  assert.equal(clock.pendingTimers, 0, 'the limit timer is disarmed too');
  // Already canceled: fails at once. Already applied: resolves, canceled or not.
  await assert.rejects(waiter.wait(5, 10_000, controller.signal), CanceledError);
  at(5);
  await waiter.wait(5, 10_000, controller.signal);
  // A wait that is woken stops listening.
  const live = new AbortController();
  const woken = waiter.wait(6, 10_000, live.signal);
  assert.equal(getEventListeners(live.signal, 'abort').length, 1);
  at(6);
  await woken;
  assert.equal(getEventListeners(live.signal, 'abort').length, 0, 'no listener left behind');
  assert.equal(clock.pendingTimers, 0);
});
