import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DuplicateRunError, InvalidStateError, RunNotFoundError, TaskNotClaimedError } from '../../src/errors.js';
import { TaskScheduler } from '../../src/tasks/task-scheduler.js';
import { FakeExecutor, harness, quietLogger, settled } from './fixtures.js';

const MIN = 60_000;

test('forceRun starts a manual run at once when a slot is free, scheduledFor defaulting to now', async () => {
  const h = harness(30_000);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1h', maxConcurrency: 1, handler: 'h' }));
  const queued = await h.scheduler.forceRun('a');
  assert.deepEqual({ ...queued, runId: '' }, { taskId: 'a', runId: '', scheduledFor: 30_000, runAt: 30_000 });
  assert.equal(h.executor.executions.length, 1);
  assert.equal(h.executor.last().queued.runId, queued.runId);
  assert.equal(h.scheduler.taskStats('a')?.nextDue, 3_600_000, 'the schedule continues as before');
});

test('manual runs go before scheduled ones when a slot frees up', async () => {
  const h = harness(0);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.tick(MIN);
  const scheduled = h.executor.last();
  // While the only slot is busy: the 2m time becomes due, and two manual runs are requested.
  h.scheduler.tick(2 * MIN);
  const m1 = await h.scheduler.forceRun('a', 10);
  const m2 = await h.scheduler.forceRun('a', 20);
  assert.equal(h.executor.executions.length, 1, 'no slot free yet');
  scheduled.complete();
  await settled();
  assert.equal(h.executor.last().queued.runId, m1.runId);
  h.executor.last().complete();
  await settled();
  assert.equal(h.executor.last().queued.runId, m2.runId);
  h.executor.last().complete();
  await settled();
  assert.equal(h.executor.last().queued.scheduledFor, 2 * MIN, 'then the scheduled time that was due');
});

test('the same scheduledFor twice is a DuplicateRunError; an unclaimed task is TaskNotClaimedError', async () => {
  const h = harness(0);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }));
  await h.scheduler.forceRun('a', 5_000);
  await assert.rejects(h.scheduler.forceRun('a', 5_000), DuplicateRunError);
  await assert.rejects(h.scheduler.forceRun('nope'), TaskNotClaimedError);
  await assert.rejects(h.scheduler.forceRun('a', Number.NaN), /scheduledFor/);
  h.scheduler.tick(MIN);
  assert.equal(h.executor.executions.length, 1, 'the scheduled run waits behind the manual one');
});

test('retryRun runs a logged run again under a new id; unknown runs reject with RunNotFoundError', async () => {
  const h = harness(0);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.tick(MIN);
  const first = h.executor.last();
  await assert.rejects(h.scheduler.retryRun('a', first.queued.runId), DuplicateRunError, 'still running');
  first.complete({ error: new Error('bad data') });
  await settled();
  const retried = await h.scheduler.retryRun('a', first.queued.runId);
  assert.equal(retried.scheduledFor, MIN);
  assert.notEqual(retried.runId, first.queued.runId);
  assert.equal(h.executor.last().queued.runId, retried.runId);
  await assert.rejects(h.scheduler.retryRun('a', 'nope'), RunNotFoundError);
});

test('forceRun needs a desired state with forceRun', async () => {
  const scheduler = new TaskScheduler({
    desiredState: { createNextRun: () => ({ created: { taskId: 'a', runId: 'r', scheduledFor: 0, runAt: 0 }, nextDue: Infinity }), finishRun: () => undefined },
    executor: new FakeExecutor(),
    logger: quietLogger,
    now: 0,
  });
  scheduler.claimTask({ id: 'a', every: '1h', maxConcurrency: 1, handler: 'h' });
  await assert.rejects(scheduler.forceRun('a'), InvalidStateError);
});
