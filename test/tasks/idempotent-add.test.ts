/**
 * `engine.tasks.add` is idempotent, as every process of a service may declare its tasks at start-up: the same id
 * with the same definition changes nothing, a changed definition replaces the task from its next run on. The
 * scheduler's own `claimTask` keeps refusing a second claim.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TaskAlreadyClaimedError, TaskNotClaimedError } from '../../src/errors.js';
import { validateTask } from '../../src/tasks/task.js';
import { engineTasks } from './engine-tasks-harness.js';
import { harness, settled } from './fixtures.js';

const MIN = 60_000;

test('add of the same id with the same definition is a no-op: the task stored first is kept, nothing thrown', () => {
  const e = engineTasks({ start: 10 * MIN });
  const first = e.tasks.add({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h', payload: { n: [1, 2] } });
  const before = e.tasks.desiredState.getMeta('a');
  // A fresh object with equal fields (a restart declares a new payload object), and meta that would move progress.
  const again = e.tasks.add({ id: 'a', every: 60_000, maxConcurrency: 1, handler: 'h', payload: { n: [1, 2] } }, { latestCompleted: 50 * MIN });
  assert.equal(again, first);
  assert.equal(e.tasks.desiredState.getTask('a'), first);
  assert.deepEqual(e.tasks.desiredState.getMeta('a'), before, 'a no-op does not move progress');
  assert.equal(e.tasks.stats().claimedTasks, 1);
  assert.equal(e.slots.allocated, 1, 'no second slot range');
});

test('add of a changed definition replaces the task, keeping its progress and its claim', () => {
  const e = engineTasks({ start: 10 * MIN });
  e.tasks.add({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h', payload: 1 });
  assert.equal(e.tasks.taskStats('a')?.nextDue, 11 * MIN);
  const replaced = e.tasks.add({ id: 'a', every: '5m', maxConcurrency: 3, handler: 'h', payload: 2 }, { latestCompleted: 12 * MIN });
  assert.equal(e.tasks.desiredState.getTask('a'), replaced);
  assert.equal(e.tasks.desiredState.getMeta('a')?.latestScheduled, 12 * MIN, 'progress kept, moved forward by meta');
  assert.equal(e.tasks.taskStats('a')?.state, 'claimed');
  assert.equal(e.tasks.stats().claimedTasks, 1);
  // The new schedule holds from now: the next 5-minute time after 12m is 15m.
  assert.equal(e.tasks.taskStats('a')?.nextDue, 15 * MIN);
  assert.equal(e.slots.allocated, 3, 'the old 1-slot range was released (no run held it), the new one has 3');
});

test("the scheduler's claimTask still throws TaskAlreadyClaimedError for a claimed id", () => {
  const h = harness(0);
  const task = { id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' };
  h.scheduler.claimTask(task);
  assert.throws(() => h.scheduler.claimTask(task), TaskAlreadyClaimedError);
  assert.throws(() => h.scheduler.replaceTask({ ...task, id: 'b' }), TaskNotClaimedError);
});

test('replaceTask: a run in flight goes on with the old definition, the next run takes the new one', async () => {
  const h = harness(0);
  const old = h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h', payload: 'old' }, { latestCompleted: 0 });
  h.scheduler.claimTask(old, { latestCompleted: 0 });
  h.scheduler.tick(MIN);
  assert.equal(h.executor.executions.length, 1);
  const first = h.executor.last();
  assert.equal(first.context.task.payload, 'old');

  const fresh = h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 2, handler: 'h', payload: 'new' });
  h.scheduler.replaceTask(fresh);
  h.scheduler.tick(2 * MIN);
  assert.equal(h.executor.executions.length, 2, 'the new definition allows two at once: the 2m run starts beside the 1m one');
  assert.equal(h.executor.last().context.task.payload, 'new');
  assert.equal(h.executor.violations.length, 0);
  assert.equal(h.scheduler.claimedTask('a'), fresh);

  first.complete({ value: 'done' });
  await settled();
  h.executor.last().complete();
  await settled();
  assert.deepEqual(h.log.runs('a').map((r) => r.finalStatus), ['success', 'success']);
  // The old single-slot range is released once its run stopped: only the new 2-slot range remains.
  assert.equal(h.scheduler.taskStats('a')?.slotsBusy, 0);
  assert.equal(h.slots.allocated, 2);
});

test('replaceTask with a lower maxConcurrency: runs of the old definition keep counting against it', async () => {
  const h = harness(0);
  const old = h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 2, handler: 'h' }, { latestCompleted: 0 });
  h.scheduler.claimTask(old, { latestCompleted: 0 });
  h.scheduler.tick(2 * MIN);
  assert.equal(h.executor.pending('a').length, 2);
  h.scheduler.replaceTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.tick(3 * MIN);
  assert.equal(h.executor.pending('a').length, 2, 'no third run: two of the old definition are still running');
  h.executor.pending('a')[0]!.complete();
  await settled();
  assert.equal(h.executor.pending('a').length, 1, 'still one running: at the new maxConcurrency');
  h.executor.pending('a')[0]!.complete();
  await settled();
  assert.equal(h.executor.pending('a').length, 1, 'the next run starts once the old ones are done');
  assert.equal(h.executor.violations.length, 0);
});

test('releaseTask with { cancel: false } starts nothing new and lets the runs in flight end on their own', async () => {
  const h = harness(0);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }, { latestCompleted: 0 }), { latestCompleted: 0 });
  h.scheduler.tick(MIN);
  const execution = h.executor.last();
  let released = false;
  void h.scheduler.releaseTask('a', { cancel: false }).then(() => (released = true));
  await settled();
  assert.equal(execution.cancelCalls, 0);
  assert.equal(released, false, 'waits for the run');
  h.scheduler.tick(5 * MIN);
  assert.equal(h.executor.executions.length, 1, 'nothing new starts');
  execution.complete({ value: 7 });
  await settled();
  assert.equal(released, true);
  assert.equal(h.log.runs('a')[0]?.finalStatus, 'success');
  assert.equal(h.scheduler.taskStats('a'), undefined);
});

test('a run handed out with attempts made before continues its count against retry', async () => {
  const h = harness(0, {
    desiredState: {
      createNextRun: () => ({ created: { taskId: 'a', runId: 'r', scheduledFor: 0, runAt: 0, attempts: 1 }, nextDue: Infinity }),
      finishRun: () => undefined,
    },
  });
  h.scheduler.claimTask(validateTask({ id: 'a', every: '1h', maxConcurrency: 1, retry: 1, handler: 'h' }), { latestCompleted: -1 });
  await settled();
  assert.equal(h.executor.executions.length, 1);
  assert.equal(h.executor.last().context.attempt, 2, 'the second attempt');
  h.executor.last().complete({ error: new Error('transient'), retryable: true });
  await settled();
  assert.equal(h.executor.executions.length, 1, 'retry: 1 allows two attempts in all: no third');
  const record = h.log.findRun('a', 'r');
  assert.equal(record?.finalStatus, 'failed');
  assert.equal(record?.attempts, 2);
});
