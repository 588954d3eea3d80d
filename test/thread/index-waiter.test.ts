import assert from 'node:assert/strict';
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

test('a cancel ends a wait within a poll, with the error the check gives, and disarms its timers', async () => {
  const { clock, waiter, at } = setup();
  let canceled = false;
  const check = (): Error | undefined => (canceled ? new CanceledError('Evaluation "e1" was canceled') : undefined);
  const waiting = waiter.wait(5, 10_000, check);
  clock.advance(10);
  assert.equal(waiter.pending, 1, 'not canceled yet: still waiting');
  canceled = true;
  clock.advance(2);
  await assert.rejects(waiting, (e: unknown) => e instanceof CanceledError && /e1/.test((e as Error).message));
  assert.equal(waiter.pending, 0);
  assert.equal(clock.pendingTimers, 0, 'the limit timer is disarmed too');
  // Already canceled: fails at once. Already applied: resolves, canceled or not.
  await assert.rejects(waiter.wait(5, 10_000, check), CanceledError);
  at(5);
  await waiter.wait(5, 10_000, check);
  // A wait that is woken stops polling.
  canceled = false;
  const woken = waiter.wait(6, 10_000, check);
  at(6);
  await woken;
  assert.equal(clock.pendingTimers, 0);
});
