import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { requireDatabaseInCI, skipWithoutDatabase } from '../helpers.js';
import { cluster, held, waitFor, type Cluster } from './harness.js';

requireDatabaseInCI();
const MIN = 60_000;

describe('task claims on PostgreSQL', { skip: skipWithoutDatabase }, () => {
  let c: Cluster;
  before(async () => {
    c = await cluster();
  });
  after(async () => {
    await c?.close();
  });

  test('one process claims every declared task and runs it; the run log shows the run from another process', async () => {
    const a = await c.node();
    for (let i = 0; i < 4; i++) await a.store.declareTask(validate({ id: `t${i}`, every: '1m', maxConcurrency: 1, handler: 'h' }), {});
    await waitFor('a holds 4 claims', () => held(a) === 4);
    assert.equal(a.scheduler.stats().claimedTasks, 4);
    c.clock.advance(MIN);
    await waitFor('4 runs started', () => a.executor.executions.length === 4);
    for (const e of a.executor.pending()) e.complete({ value: { ok: e.queued.taskId } });
    const reader = await c.node({ name: 'reader' });
    await waitFor('the runs logged success', async () => (await reader.store.runLog.runs('t0'))[0]?.finalStatus === 'success');
    const [record] = await reader.store.runLog.runs('t0');
    assert.equal(record?.attempts, 1);
    assert.deepEqual(record?.value, { ok: 't0' });
    assert.equal(record?.processes?.length, 1);
    assert.match(record!.processes![0]!, /^node0\//);
  });
});

import { validateTask as validate } from '../../../src/tasks/task.js';
