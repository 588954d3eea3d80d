import assert from 'node:assert/strict';
import { test } from 'node:test';
import { harness, settled } from './fixtures.js';

const MIN = 60_000;
const finals = ['success', 'failed', 'canceled'];

test('a retryable failure is retried with backoff on the clock, each attempt logged, one final status', async () => {
  // Backoff in the harness: 100 ms, ×2, at most 1000 ms.
  const h = harness(0);
  h.scheduler.start();
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1h', retry: 2, maxConcurrency: 1, handler: 'h' }));
  h.clock.advance(3_600_000);
  const attempt1 = h.executor.last();
  assert.equal(attempt1.context.attempt, 1);
  attempt1.complete({ error: new Error('flaky 1'), retryable: true });
  await settled();
  assert.equal(h.executor.executions.length, 1, 'waiting out the backoff');
  assert.equal(h.scheduler.stats().slotsBusy, 1, 'the run keeps its slot while it backs off');
  h.clock.advance(99);
  assert.equal(h.executor.executions.length, 1);
  h.clock.advance(1);
  const attempt2 = h.executor.last();
  assert.equal(attempt2.context.attempt, 2);
  assert.equal(attempt2.queued, attempt1.queued, 'the same run');
  assert.notEqual(attempt2.context.slot.generation, attempt1.context.slot.generation, 'a fresh slot generation per attempt');
  attempt2.complete({ error: new Error('flaky 2'), retryable: true });
  await settled();
  h.clock.advance(200);
  const attempt3 = h.executor.last();
  assert.equal(attempt3.context.attempt, 3);
  attempt3.complete({ value: 42 });
  await settled();

  const [run] = h.log.runs('a');
  assert.equal(run!.finalStatus, 'success');
  assert.equal(run!.attempts, 3);
  assert.deepEqual(
    run!.history.map((c) => [c.status, c.attempt, c.error?.message]),
    [
      ['scheduled', 0, undefined],
      ['started', 1, undefined],
      ['scheduled', 2, 'flaky 1'],
      ['started', 2, undefined],
      ['scheduled', 3, 'flaky 2'],
      ['started', 3, undefined],
      ['success', 3, undefined],
    ],
  );
  assert.deepEqual(h.store.runningRuns('a'), [], 'finishRun once, at the end');
  await h.scheduler.stop();
});

test('retries stop at `retry`; a non-retryable failure is not retried', async () => {
  const h = harness(0);
  h.scheduler.start();
  h.scheduler.claimTask(h.store.putTask({ id: 'r', every: '1h', retry: 1, maxConcurrency: 1, handler: 'h' }));
  h.scheduler.claimTask(h.store.putTask({ id: 'n', every: '1h', retry: 5, maxConcurrency: 1, handler: 'h' }));
  h.clock.advance(3_600_000);
  const [r1, n1] = h.executor.pending();
  r1!.complete({ error: new Error('again'), retryable: true });
  n1!.complete({ error: new Error('bad input'), retryable: false });
  await settled();
  h.clock.advance(100);
  const r2 = h.executor.pending('r')[0]!;
  r2.complete({ error: new Error('again 2'), retryable: true });
  await settled();
  h.clock.advance(10_000);
  assert.equal(h.executor.executions.length, 3);
  const [r] = h.log.runs('r');
  assert.equal(r!.finalStatus, 'failed');
  assert.equal(r!.error?.message, 'again 2');
  assert.equal(r!.attempts, 2);
  const [n] = h.log.runs('n');
  assert.equal(n!.finalStatus, 'failed');
  assert.equal(n!.attempts, 1);
  for (const run of [...h.log.runs('r'), ...h.log.runs('n')]) {
    assert.equal(run.history.filter((c) => finals.includes(c.status)).length, 1);
  }
  await h.scheduler.stop();
});

test('a release during the backoff ends the run canceled, without another attempt', async () => {
  const h = harness(0);
  h.scheduler.start();
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1h', retry: 3, maxConcurrency: 1, handler: 'h' }));
  h.clock.advance(3_600_000);
  h.executor.last().complete({ error: new Error('flaky'), retryable: true });
  await settled();
  await h.scheduler.releaseTask('a');
  h.clock.advance(10_000);
  assert.equal(h.executor.executions.length, 1);
  const [run] = h.log.runs('a');
  assert.equal(run!.finalStatus, 'canceled');
  assert.equal(h.clock.pendingTimers, 0, 'the backoff timer was cleared');
  assert.equal(h.slots.allocated, 0);
  await h.scheduler.stop();
});

test('the next scheduled run waits for the retried one when maxConcurrency is 1', async () => {
  const h = harness(0);
  h.scheduler.start();
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', retry: 1, maxConcurrency: 1, handler: 'h' }));
  h.clock.advance(MIN);
  h.executor.last().complete({ error: new Error('flaky'), retryable: true });
  await settled();
  h.clock.advance(MIN); // 2m is due during the backoff, but the slot is the retried run's
  const attempts = h.executor.executions.map((e) => [e.queued.scheduledFor, e.context.attempt]);
  assert.deepEqual(attempts, [
    [MIN, 1],
    [MIN, 2],
  ]);
  h.executor.last().complete();
  await settled();
  assert.deepEqual(h.executor.last().queued.scheduledFor, 2 * MIN);
  assert.equal(h.executor.maxRunning.get('a'), 1);
  await h.scheduler.stop();
});
