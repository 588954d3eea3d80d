import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CatchUpPolicy } from '../../src/tasks/task.js';
import { harness, settled, type Harness } from './fixtures.js';

const MIN = 60_000;

/** Claims a task whose last run completed at 0 while it is now 5m30s: the times 1m … 5m are a backlog. */
function claimedLate(policy: CatchUpPolicy | undefined, maxConcurrency = 1): Harness {
  const h = harness(5 * MIN + 30_000);
  const spec = { id: 'a', every: '1m', maxConcurrency, handler: 'h', ...(policy === undefined ? {} : { catchUp: policy }) };
  h.scheduler.claimTask(h.store.putTask(spec, { latestCompleted: 0 }), { latestCompleted: 0 });
  return h;
}

async function completeAll(h: Harness): Promise<void> {
  for (let i = 0; i < 100 && h.executor.pending().length > 0; i++) {
    for (const execution of h.executor.pending()) execution.complete();
    await settled();
  }
}

test("catch-up 'all' (the default) runs every missed time in order, bounded by concurrency", async () => {
  const h = claimedLate(undefined, 2);
  assert.deepEqual(h.executor.scheduledFor(), [MIN, 2 * MIN]);
  await completeAll(h);
  assert.deepEqual(h.executor.scheduledFor(), [MIN, 2 * MIN, 3 * MIN, 4 * MIN, 5 * MIN]);
  assert.equal(h.executor.maxRunning.get('a'), 2);
  assert.equal(h.scheduler.taskStats('a')?.nextDue, 6 * MIN);
});

test("catch-up 'latest' runs only the newest missed time", async () => {
  const h = claimedLate('latest');
  await completeAll(h);
  assert.deepEqual(h.executor.scheduledFor(), [5 * MIN]);
  h.scheduler.tick(6 * MIN);
  assert.deepEqual(h.executor.scheduledFor(), [5 * MIN, 6 * MIN]);
});

test("catch-up 'none' runs none of them and continues with the next future time", async () => {
  const h = claimedLate('none');
  await completeAll(h);
  assert.deepEqual(h.executor.scheduledFor(), []);
  assert.equal(h.scheduler.taskStats('a')?.nextDue, 6 * MIN);
  h.scheduler.tick(6 * MIN);
  assert.deepEqual(h.executor.scheduledFor(), [6 * MIN]);
});

test('a single late time always runs, whatever the policy', () => {
  for (const policy of ['all', 'latest', 'none'] as const) {
    const h = harness(MIN + 50_000);
    h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', catchUp: policy, maxConcurrency: 1, handler: 'h' }, { latestCompleted: 0 }), {
      latestCompleted: 0,
    });
    assert.deepEqual(h.executor.scheduledFor(), [MIN], policy);
  }
});

test('a busy process builds a backlog too: when the slot frees, the policy decides', async () => {
  for (const [policy, expected] of [
    ['all', [MIN, 2 * MIN, 3 * MIN, 4 * MIN]],
    ['latest', [MIN, 4 * MIN]],
    ['none', [MIN]],
  ] as const) {
    const h = harness(0);
    h.scheduler.claimTask(h.store.putTask({ id: 'a', every: '1m', catchUp: policy, maxConcurrency: 1, handler: 'h' }));
    h.scheduler.tick(MIN);
    for (const t of [2, 3, 4]) h.scheduler.tick(t * MIN + 1); // the run is still going
    await completeAll(h);
    assert.deepEqual(h.executor.scheduledFor(), expected, policy);
    const times = h.log.runs('a').map((r) => r.scheduledFor);
    assert.equal(new Set(times).size, times.length, `${policy}: never two runs for one scheduled time`);
  }
});
