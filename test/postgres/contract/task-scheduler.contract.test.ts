/**
 * One task-scheduler suite, two task stores: what the scheduler does with the in-memory store and with the shared
 * PostgreSQL store (runs created, started and finished through fenced writes on a real database) must be the same.
 * Every answer is awaited, and what a shared store does asynchronously is waited for.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { DuplicateRunError } from '../../../src/errors.js';
import { requireDatabaseInCI } from '../helpers.js';
import { waitFor } from '../tasks/harness.js';
import { taskSubjects, type TaskSubject } from './task-subjects.js';

requireDatabaseInCI();

const MIN = 60_000;
const HOUR = 60 * MIN;

for (const factory of taskSubjects) {
  describe(`task scheduler contract: ${factory.name}`, { skip: factory.skip }, () => {
    let s: TaskSubject;
    afterEach(async () => s?.close());

    test('a due run is created, started and logged to its end: scheduled, started, success', async () => {
      s = await factory.make(0);
      await s.add({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' }, { latestCompleted: 0 });
      assert.equal(s.executor.executions.length, 0, 'nothing is due before 1m');
      s.clock.advance(MIN);
      await waitFor('the 1m run', () => s.executor.executions.length === 1);
      const run = s.executor.last();
      assert.deepEqual([run.queued.scheduledFor, run.queued.runAt, run.context.attempt], [MIN, MIN, 1]);
      run.complete({ value: 'v' });
      await waitFor('its end logged', async () => (await s.runs('a'))[0]?.finalStatus === 'success');
      const [record] = await s.runs('a');
      assert.deepEqual(record!.history.map((h) => [h.status, h.attempt]), [['scheduled', 0], ['started', 1], ['success', 1]]);
      assert.equal(record!.attempts, 1);
      assert.equal(record!.runId, run.queued.runId);
    });

    test("maxConcurrency holds through a backlog, which catchUp 'all' runs in order", async () => {
      s = await factory.make(0);
      await s.add({ id: 'c', every: '1m', maxConcurrency: 2, handler: 'h' }, { latestCompleted: 0 });
      s.clock.advance(5 * MIN);
      for (let ran = 2; ran <= 5; ran++) {
        await waitFor(`${ran} runs`, () => s.executor.executions.length === ran);
        assert.ok(s.executor.pending('c').length <= 2);
        s.executor.pending('c')[0]!.complete();
      }
      await waitFor('the last one', () => s.executor.pending('c').length === 1);
      s.executor.pending('c')[0]!.complete();
      assert.deepEqual(s.executor.scheduledFor('c'), [1, 2, 3, 4, 5].map((m) => m * MIN));
      assert.deepEqual(s.executor.violations, []);
      await waitFor('five runs logged', async () => (await s.runs('c')).filter((r) => r.finalStatus === 'success').length === 5);
    });

    for (const [policy, expected] of [['latest', [5]], ['none', []]] as const) {
      test(`catchUp '${policy}' with a backlog at claim runs ${expected.length === 0 ? 'none of it' : 'only the newest time'}`, async () => {
        s = await factory.make(5 * MIN + MIN / 2);
        await s.add({ id: 'p', every: '1m', maxConcurrency: 1, catchUp: policy, handler: 'h' }, { latestCompleted: 0 });
        // Done once filed for 6m with no run left in flight (one may be starting after its creation filed it).
        await waitFor('filed for 6m and idle', () => {
          for (const e of s.executor.pending('p')) e.complete();
          const stats = s.scheduler.taskStats('p');
          return stats?.nextDue === 6 * MIN && stats.runs === 0;
        });
        assert.deepEqual(s.executor.scheduledFor('p'), expected.map((m) => m * MIN));
      });
    }

    test('a retryable failure is retried while retry allows, each attempt logged', async () => {
      s = await factory.make(0);
      await s.add({ id: 'r', every: '1h', maxConcurrency: 1, retry: 2, handler: 'h' }, { latestCompleted: 0 });
      s.clock.advance(HOUR);
      for (let attempt = 1; attempt <= 3; attempt++) {
        // The backoff between attempts runs on the scheduler's clock.
        await waitFor(`attempt ${attempt}`, () => {
          if (s.executor.executions.length < attempt) s.clock.advance(100);
          return s.executor.executions.length === attempt;
        });
        const run = s.executor.last();
        assert.equal(run.context.attempt, attempt);
        if (attempt < 3) run.complete({ error: new Error(`transient ${attempt}`), retryable: true });
        else run.complete();
      }
      await waitFor('success logged', async () => (await s.runs('r'))[0]?.finalStatus === 'success');
      const [record] = await s.runs('r');
      assert.equal(record!.attempts, 3);
      assert.deepEqual(
        record!.history.filter((h) => h.status === 'scheduled').map((h) => [h.attempt, h.error?.message]),
        [[0, undefined], [2, 'transient 1'], [3, 'transient 2']],
      );
    });

    test('a manual run goes ahead of scheduled ones, refuses a second for a live time, and resolves its done', async () => {
      s = await factory.make(0);
      await s.add({ id: 'm', every: '1h', maxConcurrency: 1, handler: 'h' }, { latestCompleted: 0 });
      const forced = await s.scheduler.forceRun('m', 30 * MIN);
      await waitFor('the manual run', () => s.executor.executions.length === 1);
      assert.equal(s.executor.last().queued.scheduledFor, 30 * MIN);
      await assert.rejects(s.scheduler.forceRun('m', 30 * MIN), DuplicateRunError);
      s.executor.last().complete({ value: 42 });
      assert.deepEqual(await forced.done, { value: 42 });
    });

    test('adding the same definition again changes nothing; a changed one replaces the task from its next run', async () => {
      s = await factory.make(0);
      await s.add({ id: 'i', every: '1m', maxConcurrency: 1, handler: 'h', payload: { v: 1 } }, { latestCompleted: 0 });
      await s.add({ id: 'i', every: '1m', maxConcurrency: 1, handler: 'h', payload: { v: 1 } });
      s.clock.advance(MIN);
      await waitFor('the 1m run', () => s.executor.executions.length === 1);
      assert.deepEqual(s.executor.last().context.task.payload, { v: 1 });
      await s.add({ id: 'i', every: '1m', maxConcurrency: 1, handler: 'h', payload: { v: 2 } });
      assert.equal(s.executor.last().cancelCalls, 0, 'the run in flight goes on');
      s.executor.last().complete();
      s.clock.advance(MIN);
      await waitFor('the 2m run', () => s.executor.executions.length === 2);
      assert.deepEqual(s.executor.last().context.task.payload, { v: 2 });
      assert.equal(s.scheduler.stats().claimedTasks, 1);
    });

    test('remove cancels the runs in flight and the task leaves the scheduler', async () => {
      s = await factory.make(0);
      await s.add({ id: 'x', every: '1m', maxConcurrency: 1, handler: 'h' }, { latestCompleted: 0 });
      s.clock.advance(MIN);
      await waitFor('a run', () => s.executor.executions.length === 1);
      await s.remove('x');
      await waitFor('canceled and gone', () => s.executor.last().cancelCalls > 0 && s.scheduler.taskStats('x') === undefined);
    });

    test('stop cancels the runs in flight; each is logged canceled before stop resolves', async () => {
      s = await factory.make(0);
      await s.add({ id: 's', every: '1m', maxConcurrency: 1, handler: 'h' }, { latestCompleted: 0 });
      s.clock.advance(MIN);
      await waitFor('a run', () => s.executor.executions.length === 1);
      await waitFor('its start logged', async () => (await s.runs('s'))[0]?.status === 'started');
      await s.scheduler.stop();
      assert.equal(s.executor.last().cancelCalls, 1);
      assert.equal((await s.runs('s'))[0]?.finalStatus, 'canceled');
    });
  });
}
