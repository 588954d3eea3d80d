import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { DuplicateRunError, InvalidTaskError, RunNotYetDueError, TaskNotFoundError } from '../../src/errors.js';
import { MemoryDesiredState } from '../../src/tasks/memory-desired-state.js';

const MIN = 60_000;

function store(now = 0): MemoryDesiredState {
  return new MemoryDesiredState({ clock: new ManualClock(now) });
}

test('putTask validates synchronously, stores a frozen copy, and getTask/deleteTask work', () => {
  const s = store();
  assert.throws(() => s.putTask({ id: 'a', every: '1m', maxConcurrency: 1 }), InvalidTaskError);
  assert.equal(s.size, 0, 'a rejected task changes nothing');
  const task = s.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' });
  assert.equal(s.getTask('a'), task);
  assert.ok(Object.isFrozen(task));
  assert.equal(s.deleteTask('a'), true);
  assert.equal(s.deleteTask('a'), false);
  assert.equal(s.getTask('a'), undefined);
  assert.throws(() => s.createNextRun('a', MIN), TaskNotFoundError);
});

test('createNextRun hands out each scheduled time once and throws RunNotYetDueError with dueAt', () => {
  const s = store(0);
  s.putTask({ id: 'a', every: '1m', offset: '5s', maxConcurrency: 1, handler: 'h' });
  assert.throws(
    () => s.createNextRun('a', MIN),
    (error: unknown) => error instanceof RunNotYetDueError && error.dueAt === MIN + 5_000,
  );
  const { created, nextDue } = s.createNextRun('a', MIN + 5_000);
  assert.deepEqual({ ...created, runId: '' }, { taskId: 'a', runId: '', scheduledFor: MIN, runAt: MIN + 5_000 });
  assert.equal(nextDue, 2 * MIN + 5_000);
  assert.throws(() => s.createNextRun('a', MIN + 5_000), RunNotYetDueError, 'never the same scheduled time twice');
  assert.deepEqual(s.runningRuns('a'), [created]);
  s.finishRun('a', created.runId);
  s.finishRun('a', created.runId); // twice is harmless
  assert.deepEqual(s.getMeta('a'), { latestScheduled: MIN, latestCompleted: MIN, queued: 0, running: 0 });
});

test("catch-up 'all' gives each due time its own run, in order", () => {
  const s = store(0);
  s.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' });
  const times: number[] = [];
  for (;;) {
    try {
      const { created, nextDue } = s.createNextRun('a', 3 * MIN);
      times.push(created.scheduledFor);
      assert.equal(nextDue, created.scheduledFor + MIN);
    } catch (error) {
      assert.ok(error instanceof RunNotYetDueError);
      assert.equal(error.dueAt, 4 * MIN);
      break;
    }
  }
  assert.deepEqual(times, [MIN, 2 * MIN, 3 * MIN]);
});

test("catch-up 'latest' runs only the newest; 'none' runs none and waits for the future", () => {
  const s = store(0);
  s.putTask({ id: 'l', every: '1m', catchUp: 'latest', maxConcurrency: 1, handler: 'h' });
  s.putTask({ id: 'n', every: '1m', catchUp: 'none', maxConcurrency: 1, handler: 'h' });
  const latest = s.createNextRun('l', 3 * MIN + 1);
  assert.equal(latest.created.scheduledFor, 3 * MIN);
  assert.equal(latest.nextDue, 4 * MIN);
  assert.throws(
    () => s.createNextRun('n', 3 * MIN + 1),
    (error: unknown) => error instanceof RunNotYetDueError && error.dueAt === 4 * MIN,
  );
  assert.equal(s.createNextRun('n', 4 * MIN).created.scheduledFor, 4 * MIN, 'a single due time runs again');
});

test('manual runs go first; the same scheduledFor twice is a DuplicateRunError; the schedule skips a live time', () => {
  const s = store(0);
  s.putTask({ id: 'a', every: '1m', maxConcurrency: 5, handler: 'h' });
  const manual = s.forceRun('a', 2 * MIN, 30_000);
  assert.equal(manual.runAt, 30_000);
  assert.throws(() => s.forceRun('a', 2 * MIN, 30_000), DuplicateRunError);
  const first = s.createNextRun('a', 30_000);
  assert.equal(first.created, manual, 'the manual run comes out first, even before anything is scheduled');
  assert.equal(first.nextDue, MIN);
  assert.throws(() => s.forceRun('a', 2 * MIN, 30_000), DuplicateRunError, 'still running: still a duplicate');
  assert.equal(s.createNextRun('a', 2 * MIN).created.scheduledFor, MIN);
  assert.throws(() => s.createNextRun('a', 2 * MIN), RunNotYetDueError, '2m is live as a manual run: skipped');
  s.finishRun('a', manual.runId);
  const again = s.forceRun('a', 2 * MIN, 2 * MIN);
  assert.notEqual(again.runId, manual.runId, 'after it ended, the time may run again (retryRun)');
});

test('putTask of an existing id replaces the definition and keeps progress unless meta says otherwise', () => {
  const s = store(0);
  s.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' });
  s.createNextRun('a', MIN);
  s.putTask({ id: 'a', every: '2m', maxConcurrency: 1, handler: 'h' });
  assert.equal(s.getMeta('a')?.latestScheduled, MIN);
  assert.throws(() => s.createNextRun('a', MIN + 1), RunNotYetDueError);
  assert.equal(s.createNextRun('a', 2 * MIN).created.scheduledFor, 2 * MIN);
  s.putTask({ id: 'a', every: '2m', maxConcurrency: 1, handler: 'h' }, { latestCompleted: 10 * MIN });
  assert.equal(s.getMeta('a')?.latestScheduled, 10 * MIN);
  s.putTask({ id: 'a', every: '2m', maxConcurrency: 1, handler: 'h' }, { latestCompleted: 0 });
  assert.equal(s.getMeta('a')?.latestScheduled, 10 * MIN, 'progress never moves back: no scheduled time twice');
});
