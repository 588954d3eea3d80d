/**
 * `engine.tasks.add` stores, then claims. When the claim fails (here: the slot table cannot hold the task's
 * runner slots), the store must be left as it was: a new entry removed, a replaced one put back with its progress.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { engineTasks } from './engine-tasks-harness.js';

const MIN = 60_000;

test('a failed add removes the entry it created', () => {
  const e = engineTasks({ maxSlots: 4 });
  assert.throws(() => e.tasks.add({ id: 'a', every: '1m', maxConcurrency: 5, handler: 'h' }));
  assert.equal(e.tasks.desiredState.getTask('a'), undefined);
  assert.equal(e.tasks.desiredState.size, 0);
  assert.equal(e.tasks.taskStats('a'), undefined);
});

test('a failed add leaves an unclaimed entry that was already stored as it was, progress included', () => {
  const e = engineTasks({ maxSlots: 4, start: 10 * MIN });
  const store = e.tasks.desiredState;
  const before = store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h', payload: { v: 1 } }, { latestCompleted: 3 * MIN });
  const meta = store.getMeta('a');

  // A replacement that also moves progress forward; its claim cannot get 5 slots out of 4.
  assert.throws(() =>
    e.tasks.add({ id: 'a', every: '1h', maxConcurrency: 5, handler: 'h', payload: { v: 2 } }, { latestCompleted: 8 * MIN }),
  );
  assert.equal(store.getTask('a'), before, 'the stored task is the one from before');
  assert.deepEqual(store.getMeta('a'), meta, 'its progress did not move');
  assert.equal(e.tasks.taskStats('a'), undefined, 'nothing was claimed');

  // The old entry still works: it hands out the run after its own latestCompleted, on its own schedule.
  assert.deepEqual(store.createNextRun('a', 10 * MIN).created.scheduledFor, 4 * MIN);
});

test('a failed add of a new task does not disturb the other entries', () => {
  const e = engineTasks({ maxSlots: 4 });
  const other = e.tasks.add({ id: 'b', every: '1m', maxConcurrency: 2, handler: 'h' });
  assert.throws(() => e.tasks.add({ id: 'a', every: '1m', maxConcurrency: 3, handler: 'h' }));
  assert.equal(e.tasks.desiredState.getTask('b'), other);
  assert.equal(e.tasks.desiredState.size, 1);
  assert.equal(e.tasks.taskStats('b')?.state, 'claimed');
  assert.equal(e.slots.allocated, 2);
});
