import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { MAX_INSTANT, MIN_INSTANT, zoneOf } from '../../src/tasks/schedule/zone.js';
import { wall } from './wall-clock.js';

const ZONES = ['America/New_York', 'Europe/London', 'Australia/Lord_Howe', 'Asia/Kolkata', 'Pacific/Chatham', 'America/St_Johns', 'UTC'];

test('Zone.wallOf (property): agrees with formatToParts and with an independent Intl reading', () => {
  fc.assert(
    fc.property(fc.constantFrom(...ZONES), fc.integer({ min: MIN_INSTANT, max: MAX_INSTANT }), (name, instant) => {
      const zone = zoneOf(name);
      const fast = zone.wallOf(instant);
      assert.equal(fast, zone.wallOfByParts(instant));
      const w = wall(instant, name);
      const d = new Date(fast);
      assert.deepEqual(
        [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds()],
        [w.year, w.month, w.day, w.hour, w.minute, w.second, ((instant % 1000) + 1000) % 1000],
      );
    }),
    { numRuns: 500, seed: 3 },
  );
});

test('Zone.instantsOf: none in a gap, two in an overlap (earlier first), one otherwise', () => {
  const ny = zoneOf('America/New_York');
  assert.deepEqual(ny.instantsOf(Date.UTC(2026, 2, 8, 2, 30)), []);
  assert.deepEqual(ny.instantsOf(Date.UTC(2026, 2, 8, 3, 0)), [Date.UTC(2026, 2, 8, 7)]);
  assert.deepEqual(ny.instantsOf(Date.UTC(2026, 2, 8, 1, 59, 59)), [Date.UTC(2026, 2, 8, 6, 59, 59)]);
  assert.deepEqual(ny.instantsOf(Date.UTC(2026, 10, 1, 1, 30)), [Date.UTC(2026, 10, 1, 5, 30), Date.UTC(2026, 10, 1, 6, 30)]);
  assert.deepEqual(ny.instantsOf(Date.UTC(2026, 10, 1, 2, 0)), [Date.UTC(2026, 10, 1, 7)]);
  assert.deepEqual(ny.instantsOf(Date.UTC(2026, 10, 1, 0, 59, 59, 999)), [Date.UTC(2026, 10, 1, 4, 59, 59, 999)]);
  const lordHowe = zoneOf('Australia/Lord_Howe');
  assert.deepEqual(lordHowe.instantsOf(Date.UTC(2026, 3, 5, 1, 45)), [Date.UTC(2026, 3, 4, 14, 45), Date.UTC(2026, 3, 4, 15, 15)]);
  assert.deepEqual(lordHowe.instantsOf(Date.UTC(2026, 9, 4, 2, 15)), []);
});

test('Zone.transitionIn: finds the first instant of the new offset to the millisecond', () => {
  const ny = zoneOf('America/New_York');
  const spring = Date.UTC(2026, 2, 8, 7);
  assert.equal(ny.transitionIn(spring - 86_400_000, spring + 86_400_000), spring);
  const fall = Date.UTC(2026, 10, 1, 6);
  assert.equal(ny.transitionIn(fall - 3_600_000, fall + 1), fall);
  assert.equal(ny.offsetAt(fall - 1), -4 * 3_600_000);
  assert.equal(ny.offsetAt(fall), -5 * 3_600_000);
});
