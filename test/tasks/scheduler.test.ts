import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TaskAlreadyClaimedError, TaskNotClaimedError, InvalidTaskError } from '../../src/errors.js';
import { SlotState } from '../../src/slots/slot-layout.js';
import { FakeExecutor, harness, settled } from './fixtures.js';

const MIN = 60_000;

test('tick starts a due run inside the call, with scheduledFor, runAt and the claimed slot', () => {
  const h = harness(0);
  const task = h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' });
  h.scheduler.claimTask(task);
  h.scheduler.tick(MIN - 1);
  assert.equal(h.executor.executions.length, 0, 'nothing is due before the first multiple');
  h.scheduler.tick(MIN);
  assert.equal(h.executor.executions.length, 1);
  const execution = h.executor.last();
  assert.deepEqual(
    { taskId: execution.queued.taskId, scheduledFor: execution.queued.scheduledFor, runAt: execution.queued.runAt },
    { taskId: 'a', scheduledFor: MIN, runAt: MIN },
  );
  assert.equal(execution.context.attempt, 1);
  assert.equal(h.slots.state(execution.context.slot.slot), SlotState.RUNNING, 'the executor started the claimed slot');
  assert.deepEqual(
    h.log.runs('a').map((r) => r.history.map((c) => c.status)),
    [['scheduled', 'started']],
  );
});

test('offset dispatches after (or before) the scheduled time; scheduledFor stays the schedule time', () => {
  const h = harness(0);
  h.scheduler.claimTask(h.store.putTask({ id: 'late', every: '1m', offset: '10s', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.claimTask(h.store.putTask({ id: 'early', every: '1m', offset: -5_000, maxConcurrency: 1, handler: 'h' }));
  h.scheduler.tick(MIN - 5_000);
  assert.deepEqual(h.executor.executions.map((e) => [e.queued.taskId, e.queued.scheduledFor, e.queued.runAt]), [['early', MIN, MIN - 5_000]]);
  h.scheduler.tick(MIN + 9_999);
  assert.equal(h.executor.executions.length, 1);
  h.scheduler.tick(MIN + 10_000);
  assert.deepEqual(h.executor.last().queued, { taskId: 'late', runId: h.executor.last().queued.runId, scheduledFor: MIN, runAt: MIN + 10_000 });
});

test('a second claim of the same id throws TaskAlreadyClaimedError; release of an unclaimed id throws', () => {
  const h = harness(0);
  const task = h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' });
  h.scheduler.claimTask(task);
  assert.throws(() => h.scheduler.claimTask(task), TaskAlreadyClaimedError);
  assert.throws(() => h.scheduler.releaseTask('nope'), TaskNotClaimedError);
  assert.throws(() => h.scheduler.claimTask({ id: 'b', every: '1m', maxConcurrency: 0, handler: 'h' }), (error: unknown) => {
    assert.ok(error instanceof InvalidTaskError);
    assert.match(error.message, /maxConcurrency/);
    return true;
  });
  assert.equal(h.scheduler.stats().claimedTasks, 1);
});

test('maxConcurrency bounds runs in flight; a runner that frees up takes the next due run at once', async () => {
  const h = harness(0);
  // A backlog of 5 due times (claimed as if last completed at 0, now 5m): 'all' runs each, 2 at a time.
  h.scheduler.tick(5 * MIN);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 2, handler: 'h' }, { latestCompleted: 0 }), {
    latestCompleted: 0,
  });
  assert.deepEqual(h.executor.scheduledFor(), [MIN, 2 * MIN]);
  assert.equal(h.scheduler.stats().runsActive, 2);
  assert.equal(h.scheduler.taskStats('a')?.slotsBusy, 2);
  h.scheduler.tick(5 * MIN);
  assert.equal(h.executor.executions.length, 2, 'a tick does not exceed the limit');

  h.executor.executions[0]!.complete();
  await settled();
  assert.deepEqual(h.executor.scheduledFor(), [MIN, 2 * MIN, 3 * MIN], 'the freed runner took the next backlog entry');
  for (let i = 0; i < 10 && h.executor.pending().length > 0; i++) {
    h.executor.pending()[0]!.complete();
    await settled();
  }
  assert.deepEqual(h.executor.scheduledFor(), [MIN, 2 * MIN, 3 * MIN, 4 * MIN, 5 * MIN]);
  assert.equal(h.executor.maxRunning.get('a'), 2);
  assert.equal(h.scheduler.stats().runsActive, 0);
  assert.equal(h.scheduler.stats().slotsBusy, 0);
  assert.deepEqual(
    h.log.runs('a').map((r) => r.finalStatus),
    ['success', 'success', 'success', 'success', 'success'],
  );
  assert.equal(h.scheduler.stats().nextDue, 6 * MIN, 'the task waits in the calendar for its next time');
});

test('a freed runner uses the scheduler latest now, not the now of the tick that started it', async () => {
  const h = harness(0);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, catchUp: 'none', handler: 'h' }));
  h.scheduler.tick(MIN);
  assert.deepEqual(h.executor.scheduledFor(), [MIN]);
  // The run takes 3.5 minutes: at 4.5m the times 2m, 3m, 4m are a backlog, and 'none' skips them.
  h.scheduler.tick(4.5 * MIN);
  h.executor.last().complete();
  await settled();
  assert.deepEqual(h.executor.scheduledFor(), [MIN]);
  assert.equal(h.scheduler.taskStats('a')?.nextDue, 5 * MIN);
  h.scheduler.tick(5 * MIN);
  assert.deepEqual(h.executor.scheduledFor(), [MIN, 5 * MIN]);
});

test('releaseTask cancels in-flight runs, frees their slots once stopped, and re-claim works', async () => {
  const h = harness(0);
  const task = h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 2, handler: 'h' }, { latestCompleted: 0 });
  h.scheduler.tick(3 * MIN);
  h.scheduler.claimTask(task, { latestCompleted: 0 });
  assert.equal(h.executor.pending('a').length, 2);
  const released = h.scheduler.releaseTask('a');
  await released;
  assert.deepEqual(
    h.executor.executions.map((e) => e.cancelCalls),
    [1, 1],
  );
  assert.deepEqual(
    h.log.runs('a').map((r) => r.finalStatus),
    ['canceled', 'canceled'],
  );
  assert.equal(h.scheduler.taskStats('a'), undefined);
  assert.equal(h.scheduler.stats().slotsBusy, 0);
  assert.equal(h.slots.allocated, 0, 'the task slot range went back to the table');
  assert.deepEqual(h.store.runningRuns('a'), [], 'finishRun was called for every canceled run');

  h.scheduler.tick(4 * MIN);
  assert.equal(h.executor.executions.length, 2, 'a released task does not run');
  // Claim again, as engine.tasks.add does: the store and the claim agree on where the task continues.
  h.scheduler.claimTask(h.store.putTask(task, { latestCompleted: 4 * MIN }), { latestCompleted: 4 * MIN });
  h.scheduler.tick(5 * MIN);
  assert.equal(h.executor.executions.length, 3);
  assert.equal(h.executor.last().queued.scheduledFor, 5 * MIN);
});

test('a canceled run that keeps running holds its slot: a re-claim cannot exceed maxConcurrency', async () => {
  const h = harness(0);
  h.executor.lingerOnCancel = true;
  const task = h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' });
  h.scheduler.claimTask(task);
  h.scheduler.tick(MIN);
  const first = h.executor.last();
  let releasedDone = false;
  void h.scheduler.releaseTask('a').then(() => (releasedDone = true));
  await settled();
  assert.equal(h.log.runs('a')[0]!.finalStatus, 'canceled', 'the final status is logged when wait() rejects');
  assert.equal(releasedDone, false, 'release waits for the thread to stop');
  assert.equal(h.scheduler.taskStats('a')?.state, 'draining');
  assert.equal(h.scheduler.taskStats('a')?.slotsBusy, 1);

  h.scheduler.claimTask(task);
  h.scheduler.tick(2 * MIN);
  assert.equal(h.executor.executions.length, 1, 'the straggler still holds the only slot');
  first.stop();
  await settled();
  assert.equal(releasedDone, true);
  assert.equal(h.executor.executions.length, 2, 'the freed slot takes the due run');
  assert.equal(h.executor.maxRunning.get('a'), 1);
});

test('re-claim with a different maxConcurrency retires the old range until its straggler stops', async () => {
  const h = harness(0);
  h.executor.lingerOnCancel = true;
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.tick(MIN);
  void h.scheduler.releaseTask('a');
  await settled();
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 2, handler: 'h' }));
  assert.equal(h.slots.allocated, 3);
  h.scheduler.tick(2 * MIN);
  assert.equal(h.executor.pending('a').length, 1, 'straggler + 1 new run = the new limit of 2');
  h.executor.executions[0]!.stop();
  await settled();
  assert.equal(h.slots.allocated, 2, 'the retired range went back once idle');
  h.executor.lingerOnCancel = false;
  await h.scheduler.releaseTask('a');
  assert.equal(h.slots.allocated, 0);
});

test('an idle ticker arms one timer for the earliest due time and never one in the past', async () => {
  const h = harness(1_000);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1h', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.claimTask(h.store.putTask({ id: 'b', every: '10m', maxConcurrency: 1, handler: 'h' }));
  let ticks = 0;
  h.scheduler.events.on('task:tick', () => ticks++);
  h.scheduler.start();
  assert.equal(ticks, 1);
  assert.equal(h.clock.pendingTimers, 1);
  assert.equal(h.clock.nextTimerDue(), 10 * MIN);
  h.clock.advance(10 * MIN - 1_000 - 1);
  assert.equal(ticks, 1, 'no tick before the due time');
  h.clock.advance(1);
  assert.equal(ticks, 2);
  assert.equal(h.executor.executions.length, 1, 'the run started inside advance()');
  assert.equal(h.clock.nextTimerDue(), 20 * MIN);
  assert.ok(h.clock.nextTimerDue()! > h.clock.now());
  h.executor.last().complete();
  await settled();
  assert.equal(h.clock.pendingTimers, 1);
  h.clock.advance(50 * MIN);
  // 20 min: b runs (and stays running). 30 min: b is due but its only slot is busy, so it leaves the calendar
  // (its running run will pick the next time up) and no timer is armed for it. 60 min: a.
  assert.equal(ticks, 2 + 3, 'one tick per due instant with something to do, none for a saturated task');
  assert.deepEqual(h.executor.executions.map((e) => [e.queued.taskId, e.queued.scheduledFor]), [
    ['b', 10 * MIN],
    ['b', 20 * MIN],
    ['a', 60 * MIN],
  ]);
  assert.equal(h.clock.nextTimerDue(), 120 * MIN, "a's next time; b is parked behind its running run");
  await h.scheduler.stop();
  assert.equal(h.clock.pendingTimers, 0);
});

test('tickMs caps how long the ticker sleeps', () => {
  const h = harness(0, { tickMs: 1_000 });
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1h', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.start();
  assert.equal(h.clock.nextTimerDue(), 1_000);
  h.clock.advance(5_000);
  assert.equal(h.clock.nextTimerDue(), 6_000);
  void h.scheduler.stop();
});

test('a task due at claim time starts during claimTask (the seed ClaimTask)', () => {
  const h = harness(MIN);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }, { latestCompleted: 0 }), {
    latestCompleted: 0,
  });
  assert.deepEqual(h.executor.scheduledFor(), [MIN]);
});

test('a failed run logs failed once and the next run still comes', async () => {
  const h = harness(0);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.tick(MIN);
  h.executor.last().complete({ error: new Error('boom') });
  await settled();
  const [run] = h.log.runs('a');
  assert.equal(run!.finalStatus, 'failed');
  assert.equal(run!.error?.message, 'boom');
  assert.equal(run!.history.filter((c) => ['success', 'failed', 'canceled'].includes(c.status)).length, 1);
  h.scheduler.tick(2 * MIN);
  assert.equal(h.executor.executions.length, 2);
});

test('an executor that throws counts as a failed attempt and finishes the run', async () => {
  const h = harness(0);
  h.executor.throwOnExecute = new Error('pool closed');
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.tick(MIN);
  await settled();
  const [run] = h.log.runs('a');
  assert.equal(run!.finalStatus, 'failed');
  assert.equal(run!.error?.message, 'pool closed');
  assert.deepEqual(h.store.runningRuns('a'), []);
  assert.equal(h.scheduler.stats().slotsBusy, 0);
});

test('stats and taskStats describe claims, runs and slots', () => {
  const h = harness(0);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 3, handler: 'h' }));
  h.scheduler.claimTask(h.store.putTask({ id: 'b', every: '1m', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.tick(MIN);
  assert.deepEqual(h.scheduler.stats(), {
    state: 'idle',
    claimedTasks: 2,
    drainingTasks: 0,
    runsActive: 2,
    slotsBusy: 2,
    scheduledTasks: 2,
    nextDue: 2 * MIN,
  });
  assert.deepEqual(h.scheduler.taskStats('a'), { state: 'claimed', nextDue: 2 * MIN, runs: 1, slotsBusy: 1 });
});

test('a release from inside execute() (re-entrant) still cancels the run it returns', async () => {
  const executor = new FakeExecutor();
  let releasing: Promise<void> | undefined;
  const h = harness(0, {
    executor: {
      execute(run, context) {
        const execution = executor.execute(run, context);
        releasing = h.scheduler.releaseTask(run.taskId);
        return execution;
      },
    },
  });
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.tick(MIN);
  await releasing;
  assert.equal(executor.last().cancelCalls, 1);
  assert.equal(h.log.runs('a')[0]!.finalStatus, 'canceled');
  assert.equal(h.slots.allocated, 0);
});

test('by default the ticker wakes only at due times, and not at all with nothing claimed', async () => {
  const h = harness(0, { tickMs: undefined });
  h.scheduler.start();
  assert.equal(h.clock.pendingTimers, 0, 'nothing claimed: no timer');
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1d', maxConcurrency: 1, handler: 'h' }));
  assert.equal(h.clock.pendingTimers, 1);
  assert.equal(h.clock.nextTimerDue(), 86_400_000);
  await h.scheduler.releaseTask('a');
  h.clock.advance(86_400_000);
  assert.equal(h.executor.executions.length, 0);
  assert.equal(h.clock.pendingTimers, 0, 'the released task left no timer behind once it fired');
  await h.scheduler.stop();
});
