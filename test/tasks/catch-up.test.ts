import assert from 'node:assert/strict';
import { test } from 'node:test';
import { latestAtOrBefore, planNextRun } from '../../src/tasks/catch-up.js';
import { parseSchedule } from '../../src/tasks/schedule/index.js';

const MIN = 60_000;
const everyMinute = parseSchedule({ every: '1m' });

test('nothing due: no run, nextDue is the next time plus offset', () => {
  assert.deepEqual(planNextRun(everyMinute, 0, 0, MIN - 1, 'all'), { scheduledFor: undefined, lastScheduled: 0, nextDue: MIN });
  assert.deepEqual(planNextRun(everyMinute, 5_000, 0, MIN + 4_999, 'all'), { scheduledFor: undefined, lastScheduled: 0, nextDue: MIN + 5_000 });
});

test('a single late time always runs, whatever the policy', () => {
  for (const policy of ['all', 'latest', 'none'] as const) {
    assert.deepEqual(planNextRun(everyMinute, 0, 0, 2 * MIN - 1, policy), { scheduledFor: MIN, lastScheduled: MIN, nextDue: 2 * MIN }, policy);
  }
});

test("backlog: 'all' runs the oldest, 'latest' the newest, 'none' skips to the future", () => {
  const now = 5 * MIN + 30_000; // due: 1m … 5m
  assert.deepEqual(planNextRun(everyMinute, 0, 0, now, 'all'), { scheduledFor: MIN, lastScheduled: MIN, nextDue: 2 * MIN });
  assert.deepEqual(planNextRun(everyMinute, 0, 0, now, 'latest'), { scheduledFor: 5 * MIN, lastScheduled: 5 * MIN, nextDue: 6 * MIN });
  assert.deepEqual(planNextRun(everyMinute, 0, 0, now, 'none'), { scheduledFor: undefined, lastScheduled: 5 * MIN, nextDue: 6 * MIN });
});

test('the backlog counts due times, so a negative offset makes a time due early', () => {
  // offset -10s: 2m is due at 1m50s, so at 1m55s both 1m and 2m are due.
  assert.deepEqual(planNextRun(everyMinute, -10_000, 0, MIN + 55_000, 'latest'), {
    scheduledFor: 2 * MIN,
    lastScheduled: 2 * MIN,
    nextDue: 3 * MIN - 10_000,
  });
});

test('latestAtOrBefore finds the newest time of a year-long per-second backlog in few calls', () => {
  const everySecond = parseSchedule({ every: '1s' });
  let calls = 0;
  const counting = {
    ...everySecond,
    kind: everySecond.kind,
    key: everySecond.key,
    next: (after: number) => everySecond.next(after),
    between: (from: number, to: number, limit: number) => {
      calls++;
      return everySecond.between(from, to, limit);
    },
  };
  const year = 365 * 24 * 3_600_000;
  assert.equal(latestAtOrBefore(counting, 1_000, year + 500), year);
  assert.ok(calls <= 3, `${calls} between() calls`);
  assert.equal(latestAtOrBefore(parseSchedule({ every: '1h' }), 3_600_000, 100 * 3_600_000 + 1), 100 * 3_600_000);
  assert.equal(latestAtOrBefore(parseSchedule({ every: '1h' }), 3_600_000, 3_600_000), 3_600_000);
});

test('cron backlogs resolve the newest time too', () => {
  const hourly = parseSchedule({ cron: '0 * * * *' });
  const t0 = Date.UTC(2026, 0, 1);
  const plan = planNextRun(hourly, 0, t0, t0 + 10 * 3_600_000 + 5, 'latest');
  assert.equal(plan.scheduledFor, t0 + 10 * 3_600_000);
  assert.equal(plan.nextDue, t0 + 11 * 3_600_000);
});
