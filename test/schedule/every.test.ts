import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { EverySchedule } from '../../src/tasks/schedule/every.js';
import { parseSchedule } from '../../src/tasks/schedule/index.js';

test('every: aligned to whole multiples since the epoch', () => {
  const tenSeconds = parseSchedule({ every: '10s' });
  assert.equal(tenSeconds.next(0), 10_000);
  assert.equal(tenSeconds.next(1), 10_000);
  assert.equal(tenSeconds.next(9_999), 10_000);
  assert.equal(tenSeconds.next(10_000), 20_000);
  assert.equal(tenSeconds.next(-1), 0);
  assert.equal(tenSeconds.next(-10_000), 0);
  assert.equal(tenSeconds.next(-10_001), -10_000);
  const hour = parseSchedule({ every: '1h' });
  // Created at 10:17 → runs at 11:00, like InfluxDB, not at 11:17.
  assert.equal(hour.next(Date.UTC(2026, 4, 1, 10, 17, 3)), Date.UTC(2026, 4, 1, 11));
  const odd = parseSchedule({ every: 7 });
  assert.equal(odd.next(1_700_000_000_000), 1_700_000_000_006);
});

test('every: between returns each multiple in (from, to], capped by limit', () => {
  const s = parseSchedule({ every: '10s' });
  assert.deepEqual(s.between(0, 50_000, 100), [10_000, 20_000, 30_000, 40_000, 50_000]);
  assert.deepEqual(s.between(5_000, 49_999, 100), [10_000, 20_000, 30_000, 40_000]);
  assert.deepEqual(s.between(0, 50_000, 2), [10_000, 20_000]);
  assert.deepEqual(s.between(0, 50_000, 0), []);
  assert.deepEqual(s.between(50_000, 0, 10), []);
  assert.deepEqual(s.between(10_000, 10_000, 10), []);
  // A range of millennia with a small limit ends at once.
  assert.equal(parseSchedule({ every: 1 }).between(-8e15, 8e15, 3).length, 3);
});

test('every (property): next(t) > t, is a multiple, and no multiple lies in (t, next(t))', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 10 * 86_400_000 }),
      fc.integer({ min: -4e15, max: 4e15 }),
      (period, t) => {
        const next = parseSchedule({ every: period }).next(t);
        assert.ok(next > t);
        assert.ok(next % period === 0, `${next} is a multiple of ${period}`); // -0 for negative multiples
        // The multiple before next is not after t.
        assert.ok(next - period <= t);
      },
    ),
    { numRuns: 2000, seed: 42 },
  );
});

test('every (property): between agrees with repeated next', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 3_600_000 }),
      fc.integer({ min: 0, max: 2e12 }),
      fc.integer({ min: 0, max: 50_000_000 }),
      fc.integer({ min: 0, max: 40 }),
      (period, from, span, limit) => {
        const s = parseSchedule({ every: period });
        const got = s.between(from, from + span, limit);
        const expected: number[] = [];
        for (let t = s.next(from); t <= from + span && expected.length < limit; t = s.next(t)) expected.push(t);
        assert.deepEqual(got, expected);
      },
    ),
    { numRuns: 500, seed: 7 },
  );
});

test('every (property): next equals the fmod reference for fractional times and huge periods alike', () => {
  const reference = (period: number, t: number): number => {
    let base = t - (t % period);
    if (base > t) base -= period;
    const next = base + period;
    return next > t ? next : Infinity;
  };
  fc.assert(
    fc.property(
      fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER })),
      fc.oneof(
        fc.double({ min: -(2 ** 53), max: 2 ** 53, noNaN: true }),
        fc.integer({ min: -(2 ** 52), max: 2 ** 52 }).map((t) => t + 0.5),
        fc.constantFrom(2 ** 52, -(2 ** 52), 2 ** 52 - 1, 0, -0),
      ),
      (period, t) => {
        assert.equal(parseSchedule({ every: period }).next(t), reference(period, t), `every ${period} after ${t}`);
      },
    ),
    { numRuns: 5000 },
  );
});

test('every (property): one schedule asked a sequence of times, repeats included, answers each like a fresh one', () => {
  // `next` remembers its last answers (every task due at one instant asks the same questions); the memo must never
  // answer for a different time.
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 86_400_000 }),
      fc.array(fc.oneof(fc.integer({ min: -1e13, max: 1e13 }), fc.constantFrom(0, -0, 1, -1)), { minLength: 1, maxLength: 30 }),
      (period, times) => {
        const shared = parseSchedule({ every: period });
        // Each time, then the time after its answer (how `planNextRun` asks), then all of them again backwards.
        const asked = times.flatMap((t) => [t, new EverySchedule(period).next(t)]);
        for (const t of [...asked, ...asked.slice().reverse()]) {
          assert.equal(shared.next(t), new EverySchedule(period).next(t), `next(${t}) for every ${period}`);
        }
      },
    ),
    { numRuns: 500, seed: 11 },
  );
  assert.throws(() => parseSchedule({ every: 10 }).next(Number.NaN), { code: 'ERR_INVALID_ARGUMENT' });
});
