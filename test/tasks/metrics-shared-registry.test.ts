/**
 * Task gauges on a registry shared by several engines or schedulers report the sum over the live ones: the first
 * component registered must not be the only one read, and a stopped one must not keep counting.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Registry } from '../../src/observability/metrics.js';
import { engineTasks } from './engine-tasks-harness.js';
import { harness, settled } from './fixtures.js';

const MIN = 60_000;

async function gaugeValue(registry: Registry, name: string): Promise<number | undefined> {
  const metric = registry.getSingleMetric(name);
  assert.ok(metric !== undefined, `${name} is registered`);
  return (await metric.get()).values[0]?.value;
}

test('tickpool_task_executor_queue_depth sums the pools of every executor on the registry', async () => {
  const registry = new Registry();
  const first = engineTasks({ registry });
  const second = engineTasks({ registry });
  const depth = (): Promise<number | undefined> => gaugeValue(registry, 'tickpool_task_executor_queue_depth');
  assert.equal(await depth(), 0);
  first.pool.queued = 3;
  second.pool.queued = 4;
  assert.equal(await depth(), 7);
  // The first engine's pool stopped (a stopped pool has settled everything it had queued).
  first.pool.queued = 0;
  assert.equal(await depth(), 4);
  // A third on the same registry is counted too.
  const third = engineTasks({ registry });
  third.pool.queued = 5;
  assert.equal(await depth(), 9);
});

test('tickpool_task_scheduler_claims_active and runs_active count schedulers that are not stopped', async () => {
  const registry = new Registry();
  const a = harness(0, { registry });
  const b = harness(0, { registry });
  const claims = (): Promise<number | undefined> => gaugeValue(registry, 'tickpool_task_scheduler_claims_active');
  const runs = (): Promise<number | undefined> => gaugeValue(registry, 'tickpool_task_scheduler_runs_active');

  a.scheduler.claimTask(a.store.putTask({ id: 'a1', every: '1m', maxConcurrency: 1, handler: 'h' }));
  b.scheduler.claimTask(b.store.putTask({ id: 'b1', every: '1m', maxConcurrency: 1, handler: 'h' }));
  b.scheduler.claimTask(b.store.putTask({ id: 'b2', every: '1m', maxConcurrency: 1, handler: 'h' }));
  a.scheduler.start();
  b.scheduler.start();
  a.clock.advance(MIN);
  b.clock.advance(MIN);
  assert.equal(await claims(), 3);
  assert.equal(await runs(), 3);

  // Stopping `a` cancels its run and stops its claim from counting; `b` is untouched.
  await a.scheduler.stop();
  assert.equal(await claims(), 2);
  assert.equal(await runs(), 2);

  // A stopped scheduler keeps its claims: they count again once it runs again.
  a.scheduler.start();
  assert.equal(await claims(), 3);
  a.scheduler.claimTask(a.store.putTask({ id: 'a2', every: '1m', maxConcurrency: 1, handler: 'h' }));
  assert.equal(await claims(), 4);
  await a.scheduler.releaseTask('a2');
  assert.equal(await claims(), 3);

  for (const execution of b.executor.pending()) execution.complete();
  await settled();
  assert.equal(await runs(), 0 + a.scheduler.stats().runsActive);
  await a.scheduler.stop();
  await b.scheduler.stop();
  assert.equal(await claims(), 0);
  assert.equal(await runs(), 0);
});
