import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { CronSchedule } from '../../src/tasks/schedule/cron.js';
import { StretchMemo } from '../../src/tasks/schedule/memo.js';

test('StretchMemo: answers inside [lo, last point), extends at the end and backwards, restarts elsewhere', () => {
  const memo = new StretchMemo();
  assert.equal(memo.lookup(0), undefined);
  memo.record(5, 10); // nothing in (5, 10)
  assert.equal(memo.lookup(5), 10);
  assert.equal(memo.lookup(9), 10);
  assert.equal(memo.lookup(4), undefined); // before lo: unknown
  assert.equal(memo.lookup(10), undefined); // at the last point: its successor is unknown
  memo.record(10, 20);
  assert.equal(memo.lookup(10), 20);
  assert.equal(memo.lookup(7), 10);
  memo.record(1, 10); // same first point, known from further back
  assert.equal(memo.lookup(1), 10);
  assert.equal(memo.lookup(15), 20);
  memo.record(100, 110); // far away: a new stretch
  assert.equal(memo.lookup(15), undefined);
  assert.equal(memo.lookup(105), 110);
  memo.record(110, Infinity);
  assert.equal(memo.lookup(1e18), Infinity);
});

test('StretchMemo: stays bounded and correct past its capacity', () => {
  const memo = new StretchMemo();
  memo.record(-1, 0);
  for (let i = 0; i < 1000; i++) memo.record(i * 10, (i + 1) * 10);
  assert.equal(memo.lookup(9_995), 10_000);
  assert.equal(memo.lookup(9_801), 9_810);
  assert.equal(memo.lookup(5), undefined); // evicted
});

test('memoized cron (property): any sequence of questions gets the answers of a fresh schedule', () => {
  const base = Date.UTC(2026, 10, 1, 4);
  fc.assert(
    fc.property(
      fc.constantFrom('*/15 * * * *', '0 * * * *', '30 1 * * *', '*/20 * 1-2 * * *'),
      fc.array(fc.integer({ min: -2 * 3_600_000, max: 6 * 3_600_000 }), { minLength: 1, maxLength: 40 }),
      (cron, offsets) => {
        const shared = new CronSchedule(cron, 'America/New_York');
        for (const offset of offsets) {
          const after = base + offset;
          const expected = new CronSchedule(cron, 'America/New_York').next(after);
          assert.equal(shared.next(after), expected);
          // Ask again from the answer, as a scheduler does after each run.
          assert.equal(shared.next(expected), new CronSchedule(cron, 'America/New_York').next(expected));
        }
      },
    ),
    { numRuns: 60, seed: 11 },
  );
});
