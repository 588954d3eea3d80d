import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeValue, InvalidArgumentError, InvalidTaskError } from '../../src/errors.js';
import { parseEvery, parseSchedule } from '../../src/tasks/schedule/index.js';

/** Asserts a typed InvalidTaskError naming `field`, with an "expected …, got …" message. */
function assertInvalid(run: () => unknown, field: string, received: string): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof InvalidTaskError, `expected InvalidTaskError, got ${String(error)}`);
    assert.equal(error.code, 'ERR_INVALID_TASK');
    assert.equal(error.details?.['name'], field);
    assert.match(error.message, new RegExp(`^Expected \`${field}\` to be .+, got ${received.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`));
    return true;
  });
}

test('parseEvery: units, combinations and plain milliseconds', () => {
  assert.equal(parseEvery('250ms'), 250);
  assert.equal(parseEvery('10s'), 10_000);
  assert.equal(parseEvery('5m'), 300_000);
  assert.equal(parseEvery('1h'), 3_600_000);
  assert.equal(parseEvery('1d'), 86_400_000);
  assert.equal(parseEvery('1h30m'), 5_400_000);
  assert.equal(parseEvery('1d2h3m4s5ms'), 86_400_000 + 7_200_000 + 180_000 + 4_000 + 5);
  assert.equal(parseEvery('90s'), 90_000);
  assert.equal(parseEvery(1), 1);
  assert.equal(parseEvery(10_000), 10_000);
});

test('parseEvery: rejects zero, negatives, fractions, unknown units, bad order and non-strings', () => {
  const cases: Array<[unknown, string]> = [
    [0, '`0` (number)'],
    [-5, '`-5` (number)'],
    [1.5, '`1.5` (number)'],
    [Number.NaN, '`NaN` (number)'],
    [Infinity, '`Infinity` (number)'],
    [2 ** 53, '`9007199254740992` (number)'],
    ['', '`""` (string)'],
    ['0s', '`"0s"` (string)'],
    ['0h0m', '`"0h0m"` (string)'],
    ['10', '`"10"` (string)'],
    ['10 s', '`"10 s"` (string)'],
    ['1.5h', '`"1.5h"` (string)'],
    ['-1s', '`"-1s"` (string)'],
    ['1w', '`"1w"` (string)'],
    ['30m1h', '`"30m1h"` (string)'],
    ['1m1m', '`"1m1m"` (string)'],
    ['1H', '`"1H"` (string)'],
    ['99999999999999999999d', '`"99999999999999999999d"` (string)'],
    [null, '`null`'],
    [undefined, '`undefined`'],
    [{ ms: 5 }, '`{"ms":5}` (object)'],
  ];
  for (const [value, received] of cases) assertInvalid(() => parseEvery(value), 'every', received);
});

test('parseSchedule: exactly one of cron and every', () => {
  assertInvalid(() => parseSchedule({}), 'cron', '`undefined`');
  assertInvalid(() => parseSchedule({ timezone: 'UTC' }), 'cron', '`undefined`');
  assertInvalid(() => parseSchedule({ cron: '* * * * *', every: '1m' }), 'every', '`"1m"` (string)');
  assert.throws(() => parseSchedule({ cron: '* * * * *', every: '1m' }), /exactly one of `cron` and `every`/);
  assert.throws(() => parseSchedule({}), /exactly one of `cron` and `every`/);
  assertInvalid(() => parseSchedule(null as never), 'schedule', '`null`');
  assertInvalid(() => parseSchedule('0 * * * *' as never), 'schedule', '`"0 * * * *"` (string)');
});

test('parseSchedule: cron needs exactly 5 or 6 fields and no H', () => {
  assert.equal(parseSchedule({ cron: '0 * * * *' }).kind, 'cron');
  assert.equal(parseSchedule({ cron: '30 0 * * * *' }).kind, 'cron');
  // cron-parser pads these (3 fields: seconds, minutes and hours become 0/*/*); tickpool rejects them.
  assertInvalid(() => parseSchedule({ cron: '* * *' }), 'cron', '`"* * *"` (string)');
  assertInvalid(() => parseSchedule({ cron: '0 * * *' }), 'cron', '`"0 * * *"` (string)');
  assertInvalid(() => parseSchedule({ cron: '0 0 * * * * *' }), 'cron', '`"0 0 * * * * *"` (string)');
  assertInvalid(() => parseSchedule({ cron: '@daily' }), 'cron', '`"@daily"` (string)');
  assertInvalid(() => parseSchedule({ cron: '' }), 'cron', '`""` (string)');
  assertInvalid(() => parseSchedule({ cron: 5 }), 'cron', '`5` (number)');
  assertInvalid(() => parseSchedule({ cron: null }), 'cron', '`null`');
  assertInvalid(() => parseSchedule({ cron: 'H * * * *' }), 'cron', '`"H * * * *"` (string)');
  assertInvalid(() => parseSchedule({ cron: '0 H/2 * * *' }), 'cron', '`"0 H/2 * * *"` (string)');
  // Day and month names are not hashes.
  assert.equal(parseSchedule({ cron: '0 9 * MAR THU' }).kind, 'cron');
  assert.equal(parseSchedule({ cron: '0 9 * * thu' }).next(Date.UTC(2026, 0, 1)), Date.UTC(2026, 0, 1, 9));
});

test('parseSchedule: what cron-parser rejects is an InvalidTaskError with its error as cause', () => {
  for (const cron of ['61 * * * *', '* 24 * * *', '0 0 30 2 *', '* * * 13 *', '*/0 * * * *', 'a b c d e', '0 0 * * 8']) {
    assert.throws(
      () => parseSchedule({ cron }),
      (error: unknown) => {
        assert.ok(error instanceof InvalidTaskError);
        assert.equal(error.code, 'ERR_INVALID_TASK');
        assert.ok(error.cause instanceof Error, `cause of ${cron}`);
        assert.ok(error.message.includes(`cron-parser: ${error.cause.message}`), error.message);
        assert.ok(error.message.endsWith(`got ${describeValue(cron)}`), error.message);
        return true;
      },
      cron,
    );
  }
});

test('parseSchedule: timezone must be an IANA zone; default UTC; canonical spelling in the key', () => {
  assert.equal(parseSchedule({ cron: '0 * * * *' }).key, 'cron:0 * * * *@UTC');
  assert.equal(parseSchedule({ cron: '0 * * * *', timezone: 'america/new_york' }).key, 'cron:0 * * * *@America/New_York');
  assert.equal(parseSchedule({ cron: '  0   *  * * * ', timezone: 'Europe/London' }).key, 'cron:0 * * * *@Europe/London');
  // Aliases share the canonical zone's Schedule.
  assert.equal(parseSchedule({ cron: '0 * * * *', timezone: 'Etc/UTC' }), parseSchedule({ cron: '0 * * * *' }));
  assert.equal(
    parseSchedule({ cron: '0 * * * *', timezone: 'US/Eastern' }),
    parseSchedule({ cron: '0 * * * *', timezone: 'America/New_York' }),
  );
  assertInvalid(() => parseSchedule({ cron: '0 * * * *', timezone: 'Mars/Olympus' }), 'timezone', '`"Mars/Olympus"` (string)');
  assertInvalid(() => parseSchedule({ cron: '0 * * * *', timezone: '' }), 'timezone', '`""` (string)');
  assertInvalid(() => parseSchedule({ cron: '0 * * * *', timezone: 3 }), 'timezone', '`3` (number)');
  assertInvalid(() => parseSchedule({ cron: '0 * * * *', timezone: null }), 'timezone', '`null`');
  // Validated for `every` too, although epoch alignment ignores it.
  assertInvalid(() => parseSchedule({ every: '1m', timezone: 'Nowhere/Land' }), 'timezone', '`"Nowhere/Land"` (string)');
  assert.equal(parseSchedule({ every: '1m', timezone: 'Asia/Tokyo' }).key, 'every:60000');
});

test('parseSchedule: equal specs share one Schedule object', () => {
  const a = parseSchedule({ every: '10s' });
  assert.equal(parseSchedule({ every: 10_000 }), a);
  assert.equal(parseSchedule({ every: '10000ms' }), a);
  assert.equal(a.key, 'every:10000');
  assert.equal(a.kind, 'every');
  const b = parseSchedule({ cron: '0 * * * *', timezone: 'America/New_York' });
  assert.equal(parseSchedule({ cron: '0 * * * * ', timezone: 'America/New_York' }), b);
  assert.notEqual(parseSchedule({ cron: '0 * * * *', timezone: 'Europe/London' }), b);
  assert.notEqual(parseSchedule({ cron: '0 * * * *' }), b);
  assert.equal(parseSchedule({ cron: '0 * * * *', timezone: 'UTC' }), parseSchedule({ cron: '0 * * * *' }));
});

test('Schedule.next/between validate their arguments', () => {
  for (const schedule of [parseSchedule({ every: '1s' }), parseSchedule({ cron: '* * * * *' })]) {
    for (const bad of [Number.NaN, Infinity, -Infinity, '5' as unknown as number]) {
      assert.throws(() => schedule.next(bad), InvalidArgumentError);
      assert.throws(() => schedule.between(bad, 0, 1), InvalidArgumentError);
      assert.throws(() => schedule.between(0, bad, 1), InvalidArgumentError);
    }
    for (const limit of [-1, 1.5, Number.NaN, Infinity]) {
      assert.throws(() => schedule.between(0, 1000, limit), /Expected `limit` to be an integer >= 0/);
    }
  }
});
