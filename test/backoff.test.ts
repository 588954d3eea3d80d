import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Backoff } from '../src/backoff.js';
import { ManualClock } from '../src/clock.js';
import { TickpoolError } from '../src/errors.js';

test('delays follow the seed: 20, 80, 320, 1280, then the 5000 limit', () => {
  const backoff = new Backoff();
  const delays = Array.from({ length: 7 }, () => backoff.nextDelay());
  assert.deepEqual(delays, [20, 80, 320, 1280, 5000, 5000, 5000]);
  assert.equal(backoff.failures, 4, 'the failure count stops growing at the limit');
  backoff.reset();
  assert.equal(backoff.nextDelay(), 20);
});

test('no failure count overflows into a negative, zero or non-finite delay', () => {
  fc.assert(
    fc.property(
      fc.double({ min: 0, max: 1e6, noNaN: true }),
      fc.double({ min: 0, max: 1e9, noNaN: true }),
      fc.double({ min: 1, max: 1e6, noNaN: true }),
      fc.integer({ min: 1, max: 2000 }),
      (baselineMs, extra, factor, calls) => {
        const limitMs = baselineMs + extra;
        const backoff = new Backoff({ baselineMs, limitMs, factor });
        for (let i = 0; i < calls; i++) {
          const d = backoff.nextDelay();
          assert.ok(Number.isFinite(d) && d >= 0 && d <= limitMs, `delay ${d} out of [0, ${limitMs}]`);
        }
      },
    ),
  );
});

test('jitter stays within its band', () => {
  const full = new Backoff({ jitter: 'full' }, { random: () => 0.5 });
  assert.equal(full.nextDelay(), 10);
  const equal = new Backoff({ jitter: 'equal' }, { random: () => 0 });
  assert.equal(equal.nextDelay(), 10);
});

test('wait sleeps on the clock and reports an abort', async () => {
  const clock = new ManualClock(0);
  const backoff = new Backoff({ baselineMs: 100 }, { clock });
  const done = backoff.wait();
  clock.advance(99);
  let settled = false;
  void done.then(() => (settled = true));
  await Promise.resolve();
  assert.equal(settled, false);
  clock.advance(1);
  assert.equal(await done, false);
  const controller = new AbortController();
  const aborted = backoff.wait(controller.signal);
  controller.abort();
  assert.equal(await aborted, true);
});

test('bad options get typed errors naming the option', () => {
  for (const bad of [{ baselineMs: -1 }, { limitMs: Number.NaN }, { factor: 0.5 }, { jitter: 'some' }, { baselineMs: 10, limitMs: 5 }]) {
    assert.throws(
      () => new Backoff(bad as never),
      (e: unknown) => e instanceof TickpoolError && e.code === 'ERR_INVALID_OPTION' && /Expected `backoff\./.test(e.message),
    );
  }
});
