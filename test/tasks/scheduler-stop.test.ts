import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from '../../src/observability/metrics.js';
import { harness, settled } from './fixtures.js';

const MIN = 60_000;

test('stop() cancels running runs, resolves once they have stopped, and start() resumes', async () => {
  const h = harness(0);
  h.executor.lingerOnCancel = true;
  h.scheduler.start();
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 2, handler: 'h' }, { latestCompleted: 0 }), {
    latestCompleted: 0,
  });
  h.clock.advance(2 * MIN);
  assert.equal(h.executor.pending().length, 2);
  let stopped = false;
  const stopping = h.scheduler.stop().then(() => (stopped = true));
  assert.equal(h.scheduler.state, 'stopping');
  await settled();
  assert.deepEqual(
    h.log.runs('a').map((r) => r.finalStatus),
    ['canceled', 'canceled'],
  );
  assert.equal(stopped, false, 'the threads have not let go yet');
  h.clock.advance(5 * MIN);
  assert.equal(h.executor.executions.length, 2, 'nothing starts while stopping');
  for (const e of h.executor.lingering()) e.stop();
  await stopping;
  assert.equal(h.scheduler.state, 'stopped');
  assert.equal(h.scheduler.stats().slotsBusy, 0);
  assert.equal(h.clock.pendingTimers, 0);

  h.scheduler.start();
  // 3m … 7m are due (the canceled 1m and 2m are not re-run): 'all' runs them, 2 at a time.
  assert.deepEqual(
    h.executor.executions.slice(2).map((e) => e.queued.scheduledFor),
    [3 * MIN, 4 * MIN],
  );
  h.executor.lingerOnCancel = false;
  await h.scheduler.stop();
});

test('metrics use the InfluxDB-style names', async () => {
  const registry = new Registry();
  const h = harness(0, { registry });
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.tick(MIN);
  h.executor.last().complete();
  await settled();
  h.scheduler.tick(2 * MIN);
  h.executor.last().complete({ error: new Error('x') });
  await settled();
  const text = await registry.metrics();
  assert.match(text, /^tickpool_task_scheduler_claims_active 1$/m);
  assert.match(text, /^tickpool_task_scheduler_runs_active 0$/m);
  assert.match(text, /^tickpool_task_scheduler_runs_complete_total\{status="success"\} 1$/m);
  assert.match(text, /^tickpool_task_scheduler_runs_complete_total\{status="failed"\} 1$/m);
  assert.match(text, /^tickpool_task_scheduler_schedule_delay_seconds_count 2$/m);
  assert.match(text, /^tickpool_task_scheduler_run_duration_seconds_count\{status="success"\} 1$/m);
  await h.scheduler.releaseTask('a');
  assert.match(await registry.metrics(), /^tickpool_task_scheduler_claims_active 0$/m);
});

test('events: claim, run start and finish, release', async () => {
  const h = harness(0);
  const seen: string[] = [];
  h.scheduler.events.on('task:claim', (e) => seen.push(`claim ${e.taskId} ${e.nextDue}`));
  h.scheduler.events.on('task:run:start', (e) => seen.push(`start ${e.scheduledFor} #${e.attempt}`));
  h.scheduler.events.on('task:run:finish', (e) => seen.push(`finish ${e.scheduledFor} ${e.status}`));
  h.scheduler.events.on('task:release', (e) => seen.push(`release ${e.taskId} ${e.canceledRuns}`));
  h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }));
  h.scheduler.tick(MIN);
  h.executor.last().complete();
  await settled();
  h.scheduler.tick(2 * MIN);
  await h.scheduler.releaseTask('a');
  assert.deepEqual(seen, [`claim a ${MIN}`, `start ${MIN} #1`, `finish ${MIN} success`, `start ${2 * MIN} #1`, 'release a 1', `finish ${2 * MIN} canceled`]);
});
