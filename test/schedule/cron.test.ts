import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CronExpressionParser } from 'cron-parser';
import fc from 'fast-check';
import { parseSchedule } from '../../src/tasks/schedule/index.js';
import { DAY, HOUR, MINUTE, wallText } from './wall-clock.js';

const T0 = Date.UTC(2026, 4, 12, 10, 17, 23, 456); // a Tuesday in May, no DST change anywhere near

test('cron: 5 fields are minute precision, 6 fields add leading seconds', () => {
  const minute = parseSchedule({ cron: '*/5 * * * *' });
  assert.equal(minute.next(T0), Date.UTC(2026, 4, 12, 10, 20));
  assert.equal(minute.next(Date.UTC(2026, 4, 12, 10, 20)), Date.UTC(2026, 4, 12, 10, 25));
  const seconds = parseSchedule({ cron: '*/10 * * * * *' });
  assert.equal(seconds.next(T0), Date.UTC(2026, 4, 12, 10, 17, 30));
  assert.equal(seconds.next(Date.UTC(2026, 4, 12, 10, 17, 30)), Date.UTC(2026, 4, 12, 10, 17, 40));
  const atSecond = parseSchedule({ cron: '15 30 9 * * *' });
  assert.equal(atSecond.next(T0), Date.UTC(2026, 4, 13, 9, 30, 15));
  // A 5-field expression never runs at a non-zero second.
  assert.equal(parseSchedule({ cron: '* * * * *' }).next(Date.UTC(2026, 4, 12, 10, 17, 0)), Date.UTC(2026, 4, 12, 10, 18));
});

test('cron: next is strictly after, also at the scheduled instant itself and for fractional times', () => {
  const hourly = parseSchedule({ cron: '0 * * * *' });
  const at = Date.UTC(2026, 4, 12, 11);
  assert.equal(hourly.next(at - 1), at);
  assert.equal(hourly.next(at), at + HOUR);
  assert.equal(hourly.next(at - 0.5), at);
  assert.equal(hourly.next(at + 0.5), at + HOUR);
});

test('cron: evaluated in the task time zone', () => {
  const nineLocal = (timezone: string): number => parseSchedule({ cron: '0 9 * * *', timezone }).next(T0);
  assert.equal(nineLocal('UTC'), Date.UTC(2026, 4, 13, 9));
  assert.equal(nineLocal('America/New_York'), Date.UTC(2026, 4, 12, 13)); // EDT, UTC-4
  assert.equal(nineLocal('Asia/Tokyo'), Date.UTC(2026, 4, 13, 0)); // UTC+9: 09:00 on the 13th
  assert.equal(nineLocal('Asia/Kolkata'), Date.UTC(2026, 4, 13, 3, 30)); // UTC+5:30
  assert.equal(nineLocal('Europe/London'), Date.UTC(2026, 4, 13, 8)); // BST
  // Day of week is the local one: Monday 00:30 in Tokyo is Sunday 15:30 UTC.
  assert.equal(parseSchedule({ cron: '30 0 * * 1', timezone: 'Asia/Tokyo' }).next(T0), Date.UTC(2026, 4, 17, 15, 30));
  // Same schedule year-round in local time: 09:00 New York is 14:00 UTC in January.
  assert.equal(parseSchedule({ cron: '0 9 * * *', timezone: 'America/New_York' }).next(Date.UTC(2026, 0, 5)), Date.UTC(2026, 0, 5, 14));
});

test('cron: between returns (from, to], ascending, capped by limit, and ends for huge ranges', () => {
  const quarter = parseSchedule({ cron: '*/15 * * * *' });
  const from = Date.UTC(2026, 4, 12, 10);
  assert.deepEqual(quarter.between(from, from + HOUR, 100), [15, 30, 45, 60].map((m) => from + m * MINUTE));
  assert.deepEqual(quarter.between(from, from + HOUR, 2), [from + 15 * MINUTE, from + 30 * MINUTE]);
  assert.deepEqual(quarter.between(from, from + HOUR, 0), []);
  assert.deepEqual(quarter.between(from, from + 15 * MINUTE - 1, 10), []);
  assert.deepEqual(quarter.between(from + HOUR, from, 10), []);
  const everySecond = parseSchedule({ cron: '* * * * * *' });
  const many = everySecond.between(0, 4e12, 1000);
  assert.equal(many.length, 1000);
  assert.equal(many[999], 1_000_000);
});

test('cron: a schedule past its last instant answers Infinity', () => {
  const s = parseSchedule({ cron: '0 0 1 1 *' });
  assert.equal(s.next(Date.UTC(9999, 11, 31)), Infinity);
  assert.deepEqual(s.between(Date.UTC(9999, 0, 2), 8.64e15, 5), []);
});

test('cron: the memo answers every after in a known stretch exactly as a fresh computation would', () => {
  const expression = '7,23 */2 * * *';
  const shared = parseSchedule({ cron: expression, timezone: 'Europe/Berlin' });
  const times = shared.between(T0, T0 + 3 * DAY, 100);
  assert.equal(times.length, 72);
  for (const after of [T0, T0 + 1, times[3]! - 1, times[3]!, times[3]! + 1, times[50]!, T0 - 5 * DAY, T0 + DAY]) {
    const fresh = CronExpressionParser.parse(expression, { tz: 'Europe/Berlin', currentDate: new Date(after) }).next().getTime();
    assert.equal(shared.next(after), fresh, new Date(after).toISOString());
  }
});

test('cron (property, UTC): next is strictly increasing and matches cron-parser', () => {
  const expressions = ['* * * * *', '*/15 * * * *', '0 * * * *', '30 2 * * *', '0 1 * * *', '5 4 * * 0', '0 0 1 * *', '0 12 * * 1-5', '*/7 3-5 * * *', '30 */10 * * * *', '0 0 29 2 *', '0 0 L * *', '0 9 * * 1#2'];
  fc.assert(
    fc.property(fc.constantFrom(...expressions), fc.integer({ min: Date.UTC(1990, 0, 1), max: Date.UTC(2060, 0, 1) }), (expression, t) => {
      const schedule = parseSchedule({ cron: expression });
      const reference = CronExpressionParser.parse(expression, { tz: 'UTC', currentDate: new Date(t) });
      let previous = t;
      for (let i = 0; i < 4; i++) {
        const next = schedule.next(previous);
        assert.ok(next > previous);
        assert.equal(next, reference.next().getTime(), `${expression} after ${new Date(previous).toISOString()}`);
        previous = next;
      }
    }),
    { numRuns: 400, seed: 1 },
  );
});

test('cron (property, New York away from DST changes): matches cron-parser in the zone', () => {
  // Mid-January to mid-February and May to September 2026: no offset change within days of these times.
  const quiet = fc.oneof(
    fc.integer({ min: Date.UTC(2026, 0, 15), max: Date.UTC(2026, 1, 15) }),
    fc.integer({ min: Date.UTC(2026, 4, 1), max: Date.UTC(2026, 8, 30) }),
  );
  const expressions = ['*/15 * * * *', '0 * * * *', '30 2 * * *', '0 1 * * *', '0 9 * * 1-5', '45 23 * * *'];
  fc.assert(
    fc.property(fc.constantFrom(...expressions), quiet, (expression, t) => {
      const schedule = parseSchedule({ cron: expression, timezone: 'America/New_York' });
      const reference = CronExpressionParser.parse(expression, { tz: 'America/New_York', currentDate: new Date(t) });
      const expected = reference.next().getTime();
      assert.equal(schedule.next(t), expected, `${expression} after ${wallText(t, 'America/New_York')}`);
    }),
    { numRuns: 300, seed: 2 },
  );
});
