import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock, sleep } from '../src/clock.js';

test('ManualClock fires timers in due order, with now() at each due time', () => {
  const clock = new ManualClock(1000);
  const seen: Array<[string, number]> = [];
  clock.setTimer(() => seen.push(['b', clock.now()]), 20);
  clock.setTimer(() => seen.push(['a', clock.now()]), 10);
  clock.setTimer(() => seen.push(['c', clock.now()]), 20);
  clock.advance(15);
  assert.deepEqual(seen, [['a', 1010]]);
  assert.equal(clock.now(), 1015);
  clock.advance(5);
  assert.deepEqual(seen, [['a', 1010], ['b', 1020], ['c', 1020]]);
  assert.equal(clock.pendingTimers, 0);
});

test('ManualClock fires a timer armed from a callback inside the same window', () => {
  const clock = new ManualClock(0);
  const seen: number[] = [];
  clock.setTimer(() => {
    seen.push(clock.now());
    clock.setTimer(() => seen.push(clock.now()), 5);
  }, 5);
  clock.advance(10);
  assert.deepEqual(seen, [5, 10]);
});

test('cleared timers never fire and set() fires what is due', () => {
  const clock = new ManualClock(0);
  let fired = 0;
  const handle = clock.setTimer(() => fired++, 10);
  clock.setTimer(() => fired++, 30);
  clock.clearTimer(handle);
  clock.set(30);
  assert.equal(fired, 1);
  assert.throws(() => clock.advance(-1), RangeError);
});

test('sleep resolves false on time and true when aborted', async () => {
  const clock = new ManualClock(0);
  const onTime = sleep(clock, 10);
  clock.advance(10);
  assert.equal(await onTime, false);
  const controller = new AbortController();
  const aborted = sleep(clock, 10, controller.signal);
  controller.abort();
  assert.equal(await aborted, true);
  assert.equal(clock.pendingTimers, 0);
});
