/**
 * `RunLifecycle` on its own, against a recording host: what a run asks of its scheduler (the log writes, the slot
 * handed back, `runStopped` once) as an attempt succeeds, fails retryably and is retried after the backoff, or is
 * canceled while it waits out the backoff.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import { ManualClock } from '../../src/clock.js';
import { RunCanceledError } from '../../src/errors.js';
import { TypedEmitter } from '../../src/events.js';
import { SlotTable } from '../../src/slots/slot-table.js';
import { ActiveRun, RunPhase } from '../../src/tasks/active-run.js';
import { MemoryDesiredState } from '../../src/tasks/memory-desired-state.js';
import { MemoryRunLog } from '../../src/tasks/memory-run-log.js';
import { RunLifecycle } from '../../src/tasks/run-lifecycle.js';
import type { TaskSchedulerEvents } from '../../src/tasks/scheduler-events.js';
import { SchedulerMetrics } from '../../src/tasks/scheduler-metrics.js';
import { resolveTaskSchedulerOptions } from '../../src/tasks/scheduler-options.js';
import { validateTask } from '../../src/tasks/task.js';
import { FakeExecutor, quietLogger, settled } from './fixtures.js';

function setUp() {
  const clock = new ManualClock(0);
  const slots = SlotTable.create({ initialSlots: 8 });
  const executor = new FakeExecutor();
  const options = resolveTaskSchedulerOptions({
    desiredState: new MemoryDesiredState({ clock }),
    executor,
    logWriter: new MemoryRunLog(),
    clock,
    slots,
    logger: quietLogger,
    backoff: { baselineMs: 100, limitMs: 1000, factor: 2 },
  });
  const calls: string[] = [];
  const stopped: string[] = [];
  const registry = new Registry();
  const metrics = new SchedulerMetrics(registry, { state: 'running', stats: () => ({ claimedTasks: 0, runsActive: 0 }) });
  const runs = new RunLifecycle({
    events: new TypedEmitter<TaskSchedulerEvents>(() => quietLogger),
    options,
    clock,
    slots,
    metrics,
    internalHandler: (error) => {
      throw error;
    },
    internal: (error) => {
      throw error;
    },
    latestNow: () => clock.now(),
    write: (_run, status, _when, _error, _value, attempt) => calls.push(`${status}#${attempt ?? _run.attempt}`),
    canceledError: (run) => new RunCanceledError(run.task.id, run.run!.runId),
    reportError: (_taskId, operation) => calls.push(`error ${operation}`),
    isCurrent: () => true,
    canRun: () => true,
    freeSlot: (run) => {
      if (!run.holdsSlot) return;
      run.holdsSlot = false;
      slots.finish(run.slot, run.generation);
      calls.push('free');
    },
    slotReclaimed: () => calls.push('reclaimed'),
    runStopped: (_run, status) => stopped.push(status),
  });
  const task = validateTask({ id: 't', every: '1m', maxConcurrency: 1, retry: 2, handler: 'h' });
  const slot = slots.allocate(1);
  const run = new ActiveRun(0, 1, task, slot, slots.claim(slot));
  run.run = { taskId: 't', runId: 'r1', scheduledFor: 0, runAt: 0 };
  return { clock, executor, runs, run, calls, stopped, slots };
}

test('a retryable failure is retried on the same slot after the backoff, then the run ends once', async () => {
  const { clock, executor, runs, run, calls, stopped } = setUp();
  runs.execute(run);
  assert.equal(executor.executions.length, 1);
  executor.executions[0]!.complete({ error: new Error('boom'), retryable: true });
  await settled();
  assert.equal(run.phase, RunPhase.BACKOFF);
  assert.deepEqual(calls, ['started#1', 'free', 'reclaimed', 'scheduled#2']);
  clock.advance(1000);
  assert.equal(executor.executions.length, 2, 'the second attempt after the backoff');
  executor.executions[1]!.complete({ value: 7 });
  await settled();
  assert.deepEqual(calls.slice(4), ['started#2', 'success#2']);
  assert.deepEqual(stopped, ['success']);
});

test('a run canceled while it waits out the backoff ends canceled, and no attempt starts after', async () => {
  const { clock, executor, runs, run, stopped } = setUp();
  runs.execute(run);
  executor.executions[0]!.complete({ error: new Error('boom'), retryable: true });
  await settled();
  runs.cancel(run);
  await settled();
  clock.advance(10_000);
  assert.equal(executor.executions.length, 1);
  assert.deepEqual(stopped, ['canceled']);
});
