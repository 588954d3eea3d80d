/**
 * A desired state with `startRun` records each attempt's start before the attempt begins: the scheduler waits for
 * it, a refusal is a failed attempt (never executed), and a cancel while it is pending ends the run without
 * executing it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryDesiredState } from '../../src/tasks/memory-desired-state.js';
import type { DesiredState } from '../../src/tasks/types.js';
import { deferred, harness, settled, type Deferred } from './fixtures.js';

const MIN = 60_000;

/** A MemoryDesiredState whose starts wait for the test. */
class GatedStarts implements DesiredState {
  readonly starts: Array<{ runId: string; attempt: number; answer: Deferred<void> }> = [];
  constructor(readonly inner: MemoryDesiredState) {}
  createNextRun(taskId: string, now: number) {
    return this.inner.createNextRun(taskId, now);
  }
  finishRun(taskId: string, runId: string) {
    return this.inner.finishRun(taskId, runId);
  }
  startRun(_taskId: string, runId: string, attempt: number): Promise<void> {
    const answer = deferred<void>();
    this.starts.push({ runId, attempt, answer });
    return answer.promise;
  }
}

function gated(retry = 0) {
  const base = harness(0);
  const store = new GatedStarts(base.store);
  const h = harness(0, { desiredState: store });
  const task = base.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, retry, handler: 'h' }, { latestCompleted: 0 });
  h.scheduler.claimTask(task, { latestCompleted: 0 });
  return { ...h, gate: store };
}

test('an attempt is handed to the executor only once its start is recorded', async () => {
  const h = gated();
  h.scheduler.tick(MIN);
  assert.equal(h.gate.starts.length, 1);
  assert.equal(h.gate.starts[0]!.attempt, 1);
  await settled();
  assert.equal(h.executor.executions.length, 0, 'not before the start is recorded');
  h.gate.starts[0]!.answer.resolve();
  await settled();
  assert.equal(h.executor.executions.length, 1);
});

test('a refused start is a failed attempt that never ran, retried while retry allows', async () => {
  const h = gated(1);
  h.scheduler.tick(MIN);
  h.gate.starts[0]!.answer.reject(new Error('claim is stale'));
  await settled();
  assert.equal(h.executor.executions.length, 0);
  h.clock.advance(1000); // the retry backoff
  await settled();
  assert.equal(h.gate.starts.length, 2);
  assert.equal(h.gate.starts[1]!.attempt, 2);
  h.gate.starts[1]!.answer.reject(new Error('still stale'));
  await settled();
  assert.equal(h.executor.executions.length, 0);
  const [record] = h.log.runs('a');
  assert.equal(record?.finalStatus, 'failed');
  assert.equal(record?.error?.message, 'still stale');
});

test('a run canceled while its start is pending ends canceled without running', async () => {
  const h = gated();
  h.scheduler.tick(MIN);
  const released = h.scheduler.releaseTask('a');
  h.gate.starts[0]!.answer.resolve();
  await released;
  assert.equal(h.executor.executions.length, 0);
  assert.equal(h.log.runs('a')[0]?.finalStatus, 'canceled');
});
