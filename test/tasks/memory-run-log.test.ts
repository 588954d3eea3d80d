import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MemoryRunLog } from '../../src/tasks/memory-run-log.js';
import { validateTask } from '../../src/tasks/task.js';

const task = validateTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' });

test('records each run with its status history, attempts, final status and error', () => {
  const log = new MemoryRunLog();
  const d = { scheduledFor: 60_000, runAt: 60_000 };
  log.updateRunState(task, 'r1', 1, 'scheduled', { ...d, attempt: 0 });
  log.updateRunState(task, 'r1', 2, 'started', { ...d, attempt: 1 });
  const boom = new Error('boom');
  log.updateRunState(task, 'r1', 3, 'scheduled', { ...d, attempt: 2, error: boom });
  log.updateRunState(task, 'r1', 4, 'started', { ...d, attempt: 2 });
  log.updateRunState(task, 'r1', 5, 'success', { ...d, attempt: 2 });
  const [run] = log.runs('a');
  assert.equal(run!.runId, 'r1');
  assert.equal(run!.scheduledFor, 60_000);
  assert.equal(run!.attempts, 2);
  assert.equal(run!.finalStatus, 'success');
  assert.equal(run!.status, 'success');
  assert.equal(run!.error, boom, 'the latest failed attempt');
  assert.deepEqual(
    run!.history.map((c) => [c.status, c.when, c.attempt]),
    [
      ['scheduled', 1, 0],
      ['started', 2, 1],
      ['scheduled', 3, 2],
      ['started', 4, 2],
      ['success', 5, 2],
    ],
  );
  assert.deepEqual(log.findRun('a', 'r1'), run);
  assert.equal(log.findRun('a', 'nope'), undefined);
});

test('a second final status is kept in history (so tests can catch it) while finalStatus stays the first', () => {
  const log = new MemoryRunLog();
  log.updateRunState(task, 'r1', 1, 'failed');
  log.updateRunState(task, 'r1', 2, 'success');
  const [run] = log.runs('a');
  assert.equal(run!.finalStatus, 'failed');
  assert.equal(run!.history.length, 2);
});

test('bounded per task: the oldest ended runs go first', () => {
  const log = new MemoryRunLog({ maxRunsPerTask: 3 });
  log.updateRunState(task, 'live', 0, 'started');
  for (let i = 1; i <= 4; i++) {
    log.updateRunState(task, `r${i}`, i, 'started');
    log.updateRunState(task, `r${i}`, i, 'success');
  }
  assert.deepEqual(
    log.runs('a').map((r) => r.runId),
    ['live', 'r3', 'r4'],
  );
  log.forget('a');
  assert.deepEqual(log.runs('a'), []);
  assert.throws(() => new MemoryRunLog({ maxRunsPerTask: 0 }));
});
