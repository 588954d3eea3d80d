/**
 * Times past what a `Date` can hold (±8.64e15 ms): building a `RunNotYetDueError` for one must not throw a
 * RangeError, and task periods and offsets are bounded (100 years) so that a task cannot ask for such times.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { InvalidTaskError, RunNotYetDueError } from '../../src/errors.js';
import { MemoryDesiredState } from '../../src/tasks/memory-desired-state.js';
import { parseOffset, taskLimits, validateTask } from '../../src/tasks/task.js';

const MAX_DATE_MS = 8.64e15;
const base = { id: 't', maxConcurrency: 1, handler: 'h' };

test('RunNotYetDueError: an ISO time when a Date can hold it, the number otherwise', () => {
  assert.match(new RunNotYetDueError(0).message, /due at 1970-01-01T00:00:00\.000Z$/);
  assert.match(new RunNotYetDueError(MAX_DATE_MS).message, /due at \+275760-09-13T00:00:00\.000Z$/);
  for (const dueAt of [MAX_DATE_MS + 1, 9e15, -9e15, Number.MAX_VALUE, -Number.MAX_VALUE, Infinity, Number.NaN]) {
    const error = new RunNotYetDueError(dueAt);
    assert.equal(error.code, 'ERR_RUN_NOT_YET_DUE');
    assert.ok(Object.is(error.dueAt, dueAt));
    assert.ok(error.message.endsWith(`due at ${String(dueAt)}`), error.message);
  }
});

test('createNextRun past the Date range throws RunNotYetDueError, not a RangeError', () => {
  const store = new MemoryDesiredState({ clock: new ManualClock(0) });
  // Progress may be any finite time: the next scheduled time lies beyond what a Date holds.
  store.putTask({ ...base, id: 'far', every: '1s' }, { latestCompleted: MAX_DATE_MS });
  assert.throws(
    () => store.createNextRun('far', 0),
    (error: unknown) =>
      error instanceof RunNotYetDueError && error.dueAt === MAX_DATE_MS + 1000 && error.message.endsWith(`due at ${MAX_DATE_MS + 1000}`),
  );
});

function rejects(input: unknown, field: string, message: RegExp): void {
  assert.throws(
    () => validateTask(input),
    (error: unknown) => {
      assert.ok(error instanceof InvalidTaskError, `expected InvalidTaskError, got ${String(error)}`);
      assert.equal(error.details?.['name'], field);
      assert.match(error.message, message);
      return true;
    },
  );
}

test('every is at most 100 years, as a number or a duration', () => {
  const max = taskLimits.maxEveryMs;
  assert.equal(max, 100 * 365.25 * 86_400_000);
  assert.equal(validateTask({ ...base, every: max }).every, max);
  assert.equal(validateTask({ ...base, every: '36525d' }).every, max);
  rejects({ ...base, every: max + 1 }, 'every', /at most 100 years.*, got `3155760000001` \(number\)$/);
  rejects({ ...base, every: 9e15 }, 'every', /at most 100 years.*, got `9000000000000000` \(number\)$/);
  rejects({ ...base, every: '36525d1ms' }, 'every', /at most 100 years.*, got `"36525d1ms"` \(string\)$/);
  rejects({ ...base, every: '99999999d' }, 'every', /at most 100 years/);
});

test('|offset| is at most 100 years, either sign, as a number or a duration', () => {
  const max = taskLimits.maxOffsetMs;
  assert.equal(max, 100 * 365.25 * 86_400_000);
  assert.equal(parseOffset(max), max);
  assert.equal(parseOffset(-max), -max);
  assert.equal(parseOffset('-36525d'), -max);
  for (const offset of [max + 1, -max - 1, 9e15, -9e15, '36525d1ms', '-36526d']) {
    rejects({ ...base, every: '1s', offset }, 'offset', /at most 100 years/);
    assert.throws(() => parseOffset(offset), InvalidTaskError);
  }
});

test('the notyetdue repro: big every and big offset are rejected when stored', () => {
  const store = new MemoryDesiredState({ clock: new ManualClock(Date.UTC(2026, 0, 1)) });
  assert.throws(() => store.putTask({ ...base, id: 'big-every', every: 9e15 }), InvalidTaskError);
  assert.throws(() => store.putTask({ ...base, id: 'big-offset', every: '1s', offset: 9e15 }), InvalidTaskError);
  assert.equal(store.size, 0);
});
