import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { RunNotYetDueError } from '../../src/errors.js';
import { MemoryDesiredState } from '../../src/tasks/memory-desired-state.js';
import { MemoryRunLog } from '../../src/tasks/memory-run-log.js';
import { TaskScheduler } from '../../src/tasks/task-scheduler.js';
import type { DesiredState, QueuedRun, RunCreation } from '../../src/tasks/types.js';
import { deferred, FakeExecutor, quietLogger, settled, type Deferred } from './fixtures.js';

const MIN = 60_000;

/** A desired state that answers with promises the test resolves (a durable backend, slowed down). */
class GatedDesiredState implements DesiredState {
  readonly inner: MemoryDesiredState;
  readonly creates: Array<{ readonly taskId: string; readonly now: number; readonly gate: Deferred<void> }> = [];
  readonly finishes: string[] = [];
  constructor(clock: ManualClock) {
    this.inner = new MemoryDesiredState({ clock });
  }
  async createNextRun(taskId: string, now: number): Promise<RunCreation> {
    const gate = deferred<void>();
    this.creates.push({ taskId, now, gate });
    await gate.promise;
    return this.inner.createNextRun(taskId, now);
  }
  async finishRun(taskId: string, runId: string): Promise<void> {
    await Promise.resolve();
    this.finishes.push(runId);
    this.inner.finishRun(taskId, runId);
  }
  async forceRun(taskId: string, scheduledFor: number, now: number): Promise<QueuedRun> {
    await Promise.resolve();
    return this.inner.forceRun(taskId, scheduledFor, now);
  }
}

function setup(): { clock: ManualClock; ds: GatedDesiredState; executor: FakeExecutor; log: MemoryRunLog; scheduler: TaskScheduler } {
  const clock = new ManualClock(0);
  const ds = new GatedDesiredState(clock);
  const executor = new FakeExecutor();
  const log = new MemoryRunLog();
  const scheduler = new TaskScheduler({ desiredState: ds, executor, logWriter: log, clock, now: 0, logger: quietLogger, tickMs: 0 });
  return { clock, ds, executor, log, scheduler };
}

test('an async desired state: one creation at a time per task, then the other runners fill up', async () => {
  const { ds, executor, scheduler } = setup();
  const task = ds.inner.putTask({ id: 'a', every: '1m', maxConcurrency: 3, handler: 'h' }, { latestCompleted: 0 });
  scheduler.tick(3 * MIN);
  scheduler.claimTask(task, { latestCompleted: 0 });
  assert.equal(ds.creates.length, 1, 'one pending createNextRun, not three');
  scheduler.tick(3 * MIN);
  assert.equal(ds.creates.length, 1);
  assert.equal(scheduler.stats().runsActive, 1, 'the pending creation holds a runner');
  ds.creates[0]!.gate.resolve();
  await settled();
  assert.equal(executor.executions.length, 1);
  assert.equal(ds.creates.length, 2, 'the next runner asks once the first answer is in');
  ds.creates[1]!.gate.resolve();
  await settled();
  ds.creates[2]!.gate.resolve();
  await settled();
  assert.deepEqual(executor.scheduledFor(), [MIN, 2 * MIN, 3 * MIN]);
  assert.equal(ds.creates.length, 3, 'all three runners busy: nobody asks');
  executor.executions[0]!.complete();
  await settled();
  assert.deepEqual(ds.finishes, [executor.executions[0]!.queued.runId], 'finishRun awaited');
  assert.equal(ds.creates.length, 3, 'the last answer said 4m: the freed runner does not ask before then');
  assert.equal(scheduler.taskStats('a')?.nextDue, 4 * MIN);
  scheduler.tick(4 * MIN);
  assert.equal(ds.creates.length, 4);
  ds.creates[3]!.gate.resolve();
  await settled();
  assert.deepEqual(executor.scheduledFor(), [MIN, 2 * MIN, 3 * MIN, 4 * MIN]);
  assert.equal(scheduler.taskStats('a')?.nextDue, 5 * MIN);
});

test('release while a creation is pending: the created run ends canceled and is finished', async () => {
  const { ds, executor, log, scheduler } = setup();
  scheduler.claimTask(ds.inner.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }));
  scheduler.tick(MIN);
  let released = false;
  void scheduler.releaseTask('a').then(() => (released = true));
  await settled();
  assert.equal(released, false, 'the creation is still in flight');
  ds.creates[0]!.gate.resolve();
  await settled();
  assert.equal(released, true);
  assert.equal(executor.executions.length, 0, 'never executed');
  const [run] = log.runs('a');
  assert.deepEqual(
    run!.history.map((c) => c.status),
    ['scheduled', 'canceled'],
  );
  assert.deepEqual(ds.inner.runningRuns('a'), []);
  assert.equal(scheduler.stats().slotsBusy, 0);
});

test('a failing desired state backs off instead of asking on every tick', async () => {
  const clock = new ManualClock(0);
  let calls = 0;
  const scheduler = new TaskScheduler({
    desiredState: {
      createNextRun: () => {
        calls++;
        return Promise.reject(new Error('database down'));
      },
      finishRun: () => undefined,
    },
    executor: new FakeExecutor(),
    clock,
    logger: quietLogger,
    tickMs: 0,
    backoff: { baselineMs: 1_000, limitMs: 8_000, factor: 2 },
  });
  const errors: string[] = [];
  scheduler.events.on('task:error', (e) => errors.push(`${e.operation}: ${e.error.message}`));
  scheduler.start();
  scheduler.claimTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' });
  clock.advance(MIN);
  await settled();
  assert.equal(calls, 1);
  assert.deepEqual(errors, ['create_run: database down']);
  assert.equal(scheduler.taskStats('a')?.nextDue, MIN + 1_000);
  for (const step of [1_000, 2_000, 4_000]) {
    clock.advance(step - 1);
    assert.equal(calls, errors.length, 'not before the backoff');
    clock.advance(1);
    await settled();
  }
  assert.equal(calls, 4);
  assert.equal(scheduler.stats().slotsBusy, 0);
  await scheduler.stop();
});

test('a RunNotYetDueError that crossed a boundary (code + dueAt, no class) is understood', () => {
  const clock = new ManualClock(0);
  const wire = Object.assign(new Error('not yet'), { code: 'ERR_RUN_NOT_YET_DUE', details: { dueAt: 5 * MIN } });
  const scheduler = new TaskScheduler({
    desiredState: {
      createNextRun: () => {
        throw wire;
      },
      finishRun: () => undefined,
    },
    executor: new FakeExecutor(),
    clock,
    logger: quietLogger,
  });
  scheduler.claimTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }, { latestCompleted: -MIN });
  assert.equal(scheduler.taskStats('a')?.nextDue, 5 * MIN);
  assert.ok(new RunNotYetDueError(1).dueAt === 1);
});

test('stop() while a creation is pending resolves whether the answer is a run or "not yet due"', async () => {
  for (const due of [true, false]) {
    const { ds, log, scheduler } = setup();
    scheduler.claimTask(ds.inner.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }, { latestCompleted: due ? 0 : MIN }), {
      latestCompleted: 0,
    });
    scheduler.tick(MIN); // the scheduler thinks 1m is due; the store knows (when !due) it already ran
    assert.equal(ds.creates.length, 1);
    let stopped = false;
    const stopping = scheduler.stop().then(() => (stopped = true));
    await settled();
    assert.equal(stopped, false);
    ds.creates[0]!.gate.resolve();
    await stopping;
    assert.equal(scheduler.state, 'stopped');
    assert.deepEqual(
      log.runs('a').map((r) => r.finalStatus),
      due ? ['canceled'] : [],
    );
  }
});
