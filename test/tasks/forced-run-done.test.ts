/**
 * Manual runs come with their outcome (`done`), in the style of an evaluation's handle; and an executor may answer
 * `execute` with a promise of its `RunPromise` (a durable or remote executor is async).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidStateError, RunCanceledError } from '../../src/errors.js';
import type { ExecuteContext, QueuedRun, RunPromise } from '../../src/tasks/types.js';
import { deferred, FakeExecutor, harness, settled } from './fixtures.js';

const rejection = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    (value) => assert.fail(`expected a rejection, got ${JSON.stringify(value)}`),
    (error: unknown) => error,
  );

test('forceRun returns the run with done, resolving its RunResult when it succeeds', async () => {
  const h = harness(1_000);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1h', maxConcurrency: 1, handler: 'h' }));
  const run = await h.scheduler.forceRun('a');
  assert.deepEqual({ ...run }, { taskId: 'a', runId: run.runId, scheduledFor: 1_000, runAt: 1_000 }, 'done is not one of its fields');
  h.executor.last().complete({ value: { rows: 3 } });
  assert.deepEqual(await run.done, { value: { rows: 3 } });
});

test('done rejects with the final error of a failed run, after its retries', async () => {
  const h = harness(0);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1h', maxConcurrency: 1, retry: 1, handler: 'h' }));
  const run = await h.scheduler.forceRun('a');
  h.executor.last().complete({ error: new Error('first'), retryable: true });
  await settled();
  h.clock.advance(1_000);
  const last = new Error('second');
  h.executor.last().complete({ error: last, retryable: true });
  assert.equal(await rejection(run.done), last);
});

test('a retried attempt that succeeds resolves done', async () => {
  const h = harness(0);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1h', maxConcurrency: 1, retry: 2, handler: 'h' }));
  const run = await h.scheduler.forceRun('a');
  h.executor.last().complete({ error: new Error('transient'), retryable: true });
  await settled();
  h.clock.advance(1_000);
  h.executor.last().complete({ value: 'ok' });
  assert.deepEqual(await run.done, { value: 'ok' });
});

test('a canceled run rejects done with RunCanceledError; retryRun returns its run with done too', async () => {
  const h = harness(0);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1h', maxConcurrency: 1, handler: 'h' }));
  const run = await h.scheduler.forceRun('a');
  const released = h.scheduler.releaseTask('a');
  assert.ok((await rejection(run.done)) instanceof RunCanceledError);
  await released;
  h.scheduler.claimTask(h.store.getTask('a')!);
  const again = await h.scheduler.retryRun('a', run.runId);
  h.executor.last().complete({ value: 2 });
  assert.deepEqual(await again.done, { value: 2 });
});

test('rejectForcedRuns gives up manual runs that have not ended, for one task or all', async () => {
  const h = harness(0);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1h', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.claimTask(h.store.putTask({ id: 'b', every: '1h', maxConcurrency: 1, handler: 'h' }));
  const running = await h.scheduler.forceRun('a', 1);
  const queued = await h.scheduler.forceRun('a', 2);
  const other = await h.scheduler.forceRun('b', 1);
  assert.equal(h.scheduler.rejectForcedRuns(new InvalidStateError('task a deleted'), 'a'), 2);
  assert.match(String(await rejection(queued.done)), /task a deleted/);
  assert.match(String(await rejection(running.done)), /task a deleted/);
  h.executor.pending('b')[0]!.complete({ value: 'b' });
  assert.deepEqual(await other.done, { value: 'b' }, 'another task’s run is left alone');
  assert.equal(h.scheduler.rejectForcedRuns(new InvalidStateError('stopped')), 0, 'nothing left to give up');
});

test('no unhandled rejection for a manual run whose done nobody reads', async () => {
  const h = harness(0);
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1h', maxConcurrency: 1, handler: 'h' }));
  const seen: unknown[] = [];
  const listener = (reason: unknown): void => void seen.push(reason);
  process.on('unhandledRejection', listener);
  try {
    await h.scheduler.forceRun('a');
    h.executor.last().complete({ error: new Error('nobody looks') });
    await settled();
  } finally {
    process.off('unhandledRejection', listener);
  }
  assert.deepEqual(seen, []);
});

/** An executor that answers with a promise of the fake executor's RunPromise, released by the test. */
class AsyncExecutor extends FakeExecutor {
  readonly answers: Array<{ release(): void; fail(error: Error): void }> = [];
  override execute(run: QueuedRun, context: ExecuteContext): RunPromise {
    const answer = deferred<RunPromise>();
    this.answers.push({ release: () => answer.resolve(super.execute(run, context)), fail: (error) => answer.reject(error) });
    return answer.promise as unknown as RunPromise;
  }
}

test('an executor may answer execute() with a promise of its RunPromise', async () => {
  const executor = new AsyncExecutor();
  const h = harness(0, { executor });
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.tick(60_000);
  assert.equal(executor.answers.length, 1);
  assert.equal(h.scheduler.stats().runsActive, 1, 'the run is in flight while execute() answers');
  executor.answers[0]!.release();
  await settled();
  executor.last().complete({ value: 'async' });
  await settled();
  assert.deepEqual(
    h.log.runs('a').map((r) => r.finalStatus),
    ['success'],
  );
});

test('a cancel while execute() is answering reaches the RunPromise once it comes; a rejected answer is a retryable failure', async () => {
  const executor = new AsyncExecutor();
  const h = harness(0, { executor });
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, retry: 1, handler: 'h' }));
  h.scheduler.tick(60_000);
  const stopped = h.scheduler.releaseTask('a');
  executor.answers[0]!.release();
  await stopped;
  assert.equal(executor.last().cancelCalls, 1, 'canceled as soon as it existed');
  assert.deepEqual(h.log.runs('a').map((r) => r.finalStatus), ['canceled']);

  h.scheduler.claimTask(h.store.getTask('a')!);
  h.scheduler.tick(120_000);
  executor.answers[1]!.fail(new Error('remote executor unreachable'));
  await settled();
  h.clock.advance(1_000);
  assert.equal(executor.answers.length, 3, 'retried after the backoff');
  executor.answers[2]!.release();
  await settled();
  executor.last().complete();
  await settled();
  const record = h.log.runs('a').at(-1)!;
  assert.equal(record.finalStatus, 'success');
  assert.equal(record.attempts, 2);
});
