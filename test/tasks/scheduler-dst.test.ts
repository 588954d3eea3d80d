import assert from 'node:assert/strict';
import { test } from 'node:test';
import { harness, settled, type Harness } from './fixtures.js';

/**
 * End to end through the ticker: a cron task in America/New_York across both 2026 transitions. The schedule
 * helper's own tests cover the rules in depth; this checks that the scheduler runs exactly what the schedule says,
 * at the right instants, waking only at due times.
 */
const NY = 'America/New_York';
const utc = (text: string): number => Date.parse(`${text}Z`);
const iso = (t: number): string => new Date(t).toISOString().slice(0, 16);

/** Advances the clock to `until`, completing each run as soon as it starts; returns [scheduledFor, startedAt]. */
async function runUntil(h: Harness, until: number): Promise<Array<[string, string]>> {
  const seen: Array<[string, string]> = [];
  const off = h.scheduler.events.on('task:run:start', (e) => seen.push([iso(e.scheduledFor), iso(h.clock.now())]));
  while (h.clock.now() < until) {
    const next = Math.min(until, h.clock.nextTimerDue() ?? until);
    h.clock.set(next);
    for (const execution of h.executor.pending()) execution.complete();
    await settled();
  }
  off();
  return seen;
}

test('New York spring forward through the scheduler: the 02:xx gap is skipped, nothing runs twice', async () => {
  const h = harness(utc('2026-03-08T04:30'));
  h.scheduler.start();
  h.scheduler.claimTask(h.store.putTask({ id: 'q', cron: '*/30 * * * *', timezone: NY, maxConcurrency: 1, handler: 'h' }));
  h.scheduler.claimTask(h.store.putTask({ id: 'd', cron: '30 2 * * *', timezone: NY, maxConcurrency: 1, handler: 'h' }));
  const seen = await runUntil(h, utc('2026-03-08T08:10'));
  assert.deepEqual(seen, [
    ['2026-03-08T05:00', '2026-03-08T05:00'], // 00:00 EST
    ['2026-03-08T05:30', '2026-03-08T05:30'], // 00:30 EST
    ['2026-03-08T06:00', '2026-03-08T06:00'], // 01:00 EST
    ['2026-03-08T06:30', '2026-03-08T06:30'], // 01:30 EST
    ['2026-03-08T07:00', '2026-03-08T07:00'], // 03:00 EDT: 02:00 and 02:30 do not exist
    ['2026-03-08T07:30', '2026-03-08T07:30'], // 03:30 EDT
    ['2026-03-08T08:00', '2026-03-08T08:00'], // 04:00 EDT
  ]);
  assert.deepEqual(h.log.runs('d'), [], "the daily 02:30 has no run on the day it does not exist");
  assert.equal(h.scheduler.taskStats('d')?.nextDue, utc('2026-03-09T06:30'), 'next day 02:30 EDT');
  await h.scheduler.stop();
});

test('New York fall back through the scheduler: the repeated 01:xx hour runs once, at its EDT instants', async () => {
  const h = harness(utc('2026-11-01T04:10'));
  h.scheduler.start();
  h.scheduler.claimTask(h.store.putTask({ id: 'q', cron: '*/30 * * * *', timezone: NY, maxConcurrency: 1, handler: 'h' }));
  const seen = await runUntil(h, utc('2026-11-01T07:40'));
  assert.deepEqual(seen, [
    ['2026-11-01T04:30', '2026-11-01T04:30'], // 00:30 EDT
    ['2026-11-01T05:00', '2026-11-01T05:00'], // 01:00 EDT
    ['2026-11-01T05:30', '2026-11-01T05:30'], // 01:30 EDT
    // 01:00 and 01:30 EST (06:00Z, 06:30Z) are the same wall times again: no runs, no wake-ups
    ['2026-11-01T07:00', '2026-11-01T07:00'], // 02:00 EST
    ['2026-11-01T07:30', '2026-11-01T07:30'], // 02:30 EST
  ]);
  const times = h.log.runs('q').map((r) => r.scheduledFor);
  assert.equal(new Set(times).size, times.length);
  await h.scheduler.stop();
});
