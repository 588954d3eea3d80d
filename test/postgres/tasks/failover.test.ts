/**
 * After a failover the new owner continues from the task's latestCompleted in the database with its catch-up
 * policy, and settles the runs the dead process had in flight: retried while `retry` allows (the lost attempt
 * counts), else failed with a reason naming the lost process. A real PostgreSQL; the schedule on a ManualClock.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { ThreadExitedError } from '../../../src/errors.js';
import { validateTask } from '../../../src/tasks/task.js';
import { requireDatabaseInCI, skipWithoutDatabase } from '../helpers.js';
import { cluster, held, waitFor, type Cluster } from './harness.js';

requireDatabaseInCI();
const MIN = 60_000;
const TTL = 1000;

describe('failover of tasks on PostgreSQL', { skip: skipWithoutDatabase }, () => {
  let c: Cluster;
  beforeEach(async () => {
    c = await cluster(0);
  });
  afterEach(async () => {
    await c?.close();
  });

  for (const retry of [1, 0]) {
    test(`a run in flight on a dead process is ${retry > 0 ? 'retried by the new owner, its lost attempt counted' : 'failed with a reason naming the lost process (retry 0)'}`, async () => {
      const a = await c.node({ claimTtlMs: TTL });
      await a.store.declareTask(validateTask({ id: 'x', every: '1m', maxConcurrency: 1, retry, handler: 'h' }), { latestCompleted: 0 });
      await waitFor('a holds x', () => held(a) === 1);
      c.clock.advance(MIN);
      await waitFor('a started a run', () => a.executor.executions.length === 1);
      const runId = a.executor.last().queued.runId;
      await waitFor('its start is logged', async () => (await c.admin.query(`SELECT status FROM ${c.names.S}.task_runs WHERE run_id = $1`, [runId])).rows[0]?.status === 'started');
      const lost = a.store.claimStats()!.member!;
      await a.die();

      const b = await c.node({ claimTtlMs: TTL });
      await waitFor('b holds x', () => held(b) === 1, 10_000);
      if (retry > 0) {
        await waitFor('b runs the lost run again', () => b.executor.executions.length === 1);
        const again = b.executor.last();
        assert.equal(again.queued.runId, runId, 'the same run');
        assert.equal(again.queued.scheduledFor, MIN);
        assert.equal(again.context.attempt, 2, 'its second attempt');
        again.complete({ value: 'second time' });
        await waitFor('it succeeded', async () => (await b.store.runLog.findRun('x', runId))?.finalStatus === 'success');
        const record = (await b.store.runLog.findRun('x', runId))!;
        assert.equal(record.attempts, 2);
        assert.deepEqual(record.processes, [lost, b.store.claimStats()!.member]);
        assert.equal(record.value, 'second time');
        const retried = record.history.find((h) => h.status === 'scheduled' && h.attempt === 2);
        assert.ok(retried?.error instanceof ThreadExitedError);
        assert.ok(retried.error.message.includes(lost), retried.error.message);
        // b plans from latestCompleted (0): the 1m time has its run already, so it is not created again.
        await waitFor('x filed for 2m and idle', () => b.scheduler.taskStats('x')?.nextDue === 2 * MIN && b.scheduler.taskStats('x')?.runs === 0);
        assert.equal(b.executor.executions.length, 1, 'the 1m time ran once here');
        const { rows } = await c.admin.query(`SELECT count(*)::int AS n FROM ${c.names.S}.task_runs WHERE task_id = 'x'`);
        assert.equal(rows[0].n, 1);
      } else {
        await waitFor('the run is failed', async () => (await b.store.runLog.findRun('x', runId))?.finalStatus === 'failed');
        const record = (await b.store.runLog.findRun('x', runId))!;
        assert.ok(record.error instanceof ThreadExitedError);
        assert.equal(record.error.code, 'ERR_THREAD_EXITED');
        assert.ok(record.error.message.includes(lost), record.error.message);
        assert.equal(record.attempts, 1);
        assert.deepEqual(record.processes, [lost]);
        assert.equal(b.executor.executions.length, 0, 'not run again');
        const { rows } = await c.admin.query(`SELECT latest_completed FROM ${c.names.S}.task_state WHERE task_id = 'x'`);
        assert.equal(rows[0].latest_completed, MIN, 'a failed run counts as completed');
      }
    });
  }

  const expected = { all: [2, 3, 4, 5, 6], latest: [6], none: [] as number[] };
  for (const policy of ['all', 'latest', 'none'] as const) {
    test(`catchUp '${policy}': the new owner continues from latestCompleted and runs ${policy === 'all' ? 'every missed time' : policy === 'latest' ? 'the newest missed time' : 'none of the missed times'}`, async () => {
      const a = await c.node({ claimTtlMs: TTL });
      await a.store.declareTask(validateTask({ id: 'p', every: '1m', maxConcurrency: 1, catchUp: policy, handler: 'h' }), { latestCompleted: 0 });
      await waitFor('a holds p', () => held(a) === 1);
      c.clock.advance(MIN);
      await waitFor('a started the 1m run', () => a.executor.executions.length === 1);
      a.executor.last().complete();
      await waitFor('latestCompleted is 1m', async () => (await c.admin.query(`SELECT latest_completed FROM ${c.names.S}.task_state`)).rows[0]?.latest_completed === MIN);
      await a.die();
      c.clock.advance(5 * MIN + MIN / 2); // 6.5m: five times (2m … 6m) were missed

      const b = await c.node({ claimTtlMs: TTL });
      await waitFor('b holds p', () => held(b) === 1, 10_000);
      const ran: number[] = [];
      // Each run ends as soon as it starts; whatever the policy runs, runs before 7m is due.
      await waitFor(`b ran ${expected[policy].length} catch-up runs`, () => {
        for (const e of b.executor.pending()) {
          ran.push(e.queued.scheduledFor / MIN);
          e.complete();
        }
        return ran.length >= expected[policy].length;
      });
      // Once the scheduler files the task for 7m, the desired state has said nothing else is due before it.
      // (and none left in flight: a run may be starting after its creation filed the task).
      await waitFor('p filed for 7m and idle', () => {
        for (const e of b.executor.pending()) {
          ran.push(e.queued.scheduledFor / MIN);
          e.complete();
        }
        const stats = b.scheduler.taskStats('p');
        return stats?.nextDue === 7 * MIN && stats.runs === 0;
      });
      assert.deepEqual(ran, expected[policy]);
      const { rows } = await c.admin.query(`SELECT scheduled_for FROM ${c.names.S}.task_runs WHERE task_id = 'p' ORDER BY 1`);
      assert.deepEqual(rows.map((r: { scheduled_for: number }) => r.scheduled_for / MIN), [1, ...expected[policy]], 'one run row per time run');
      c.clock.advance(MIN); // 7.5m: the schedule goes on
      await waitFor('the 7m run', () => b.executor.executions.some((e) => e.queued.scheduledFor === 7 * MIN));
    });
  }
});
