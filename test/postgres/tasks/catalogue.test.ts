/**
 * The shared catalogue against a real PostgreSQL: idempotent declarations from many processes at once, a changed
 * definition taken by whichever process runs the task, removal everywhere, manual runs under the run key, and the
 * run log bounded per task.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { DuplicateRunError, InvalidTaskError } from '../../../src/errors.js';
import { validateTask } from '../../../src/tasks/task.js';
import { requireDatabaseInCI, skipWithoutDatabase } from '../helpers.js';
import { cluster, held, rounds, waitFor, type Cluster } from './harness.js';

requireDatabaseInCI();
const MIN = 60_000;

describe('the shared task catalogue on PostgreSQL', { skip: skipWithoutDatabase }, () => {
  let c: Cluster;
  beforeEach(async () => {
    c = await cluster(0);
  });
  afterEach(async () => {
    await c?.close();
  });

  test('three processes declaring the same 60 tasks at once: 60 tasks, no error, each claimed once', async () => {
    const nodes = [await c.node(), await c.node(), await c.node()];
    // Each process builds its own task objects, as each would at its start-up.
    const declare = (i: number) => validateTask({ id: `t${i}`, every: '1m', maxConcurrency: 1, handler: 'h', payload: { n: i, tags: ['a', 'b'] } });
    await Promise.all(nodes.map((node) => Promise.all(Array.from({ length: 60 }, (_, i) => node.store.declareTask(declare(i), {})))));
    const { rows } = await c.admin.query(`SELECT count(*)::int AS n, count(DISTINCT hash)::int AS hashes FROM ${c.names.S}.tasks`);
    assert.deepEqual(rows[0], { n: 60, hashes: 60 });
    const catalog = (await c.admin.query(`SELECT version::int, task_count::int FROM ${c.names.S}.task_catalog`)).rows[0];
    assert.deepEqual(catalog, { version: 60, task_count: 60 }, 'a declaration of the same definition changes nothing');
    await waitFor('60 held, 20 each', () => nodes.every((n) => held(n) === 20), 15_000);
    c.clock.advance(MIN);
    await waitFor('60 runs', () => nodes.reduce((n, node) => n + node.executor.executions.length, 0) === 60);
    const runs = await c.admin.query(`SELECT count(*)::int AS n FROM ${c.names.S}.task_runs`);
    assert.equal(runs.rows[0].n, 60, 'one run per task and time');
  });

  test('the same definition with its payload keys in another order is the same declaration', async () => {
    const a = await c.node();
    await a.store.declareTask(validateTask({ id: 'k', every: '1m', maxConcurrency: 1, handler: 'h', payload: { x: 1, y: { p: 1, q: 2 } } }), {});
    await a.store.declareTask(validateTask({ handler: 'h', payload: { y: { q: 2, p: 1 }, x: 1 }, maxConcurrency: 1, every: 60_000, id: 'k' }), {});
    const { rows } = await c.admin.query(`SELECT version::int FROM ${c.names.S}.task_catalog`);
    assert.equal(rows[0].version, 1);
  });

  test('a payload the database cannot hold is refused synchronously (a SharedArrayBuffer of its own)', async () => {
    const a = await c.node();
    const task = validateTask({ id: 's', every: '1m', maxConcurrency: 1, handler: 'h', payload: { memory: new SharedArrayBuffer(8) } });
    assert.throws(() => a.store.declareTask(task, {}), InvalidTaskError);
  });

  test('a changed definition declared by another process is taken by the owner from its next run on', async () => {
    const a = await c.node();
    await a.store.declareTask(validateTask({ id: 'r', every: '1m', maxConcurrency: 1, handler: 'h', payload: 'v1' }), { latestCompleted: 0 });
    await waitFor('a holds r', () => held(a) === 1);
    c.clock.advance(MIN);
    await waitFor('the v1 run', () => a.executor.executions.length === 1);
    const first = a.executor.last();
    assert.equal(first.context.task.payload, 'v1');

    const b = await c.node({ name: 'declarer' });
    await b.store.declareTask(validateTask({ id: 'r', every: '1m', maxConcurrency: 1, handler: 'h', payload: 'v2' }), {});
    await waitFor('a took v2', () => a.scheduler.claimedTask('r')?.payload === 'v2');
    assert.equal(first.cancelCalls, 0, 'the run in flight goes on');
    first.complete();
    c.clock.advance(MIN);
    await waitFor('the next run', () => a.executor.executions.length === 2);
    assert.equal(a.executor.last().context.task.payload, 'v2');
  });

  test('remove deletes a task everywhere: the process running it cancels its run within one tick', async () => {
    const a = await c.node({ listen: false, tickMs: 200 });
    await a.store.declareTask(validateTask({ id: 'gone', every: '1m', maxConcurrency: 1, handler: 'h' }), { latestCompleted: 0 });
    await waitFor('a holds it', () => held(a) === 1);
    c.clock.advance(MIN);
    await waitFor('a run', () => a.executor.executions.length === 1);
    const b = await c.node({ name: 'remover' });
    const roundsBefore = rounds(a);
    assert.equal(await b.store.removeTask('gone'), true);
    let roundsAtCancel = 0;
    await waitFor('the run is canceled on a', () => {
      if (a.executor.last().cancelCalls === 0) return false;
      roundsAtCancel = rounds(a);
      return true;
    }, 5_000);
    // a does not listen here: one of its rounds found it, the one in flight at the removal or the next (one more
    // may end while this test looks).
    assert.ok(roundsAtCancel - roundsBefore <= 3, `canceled ${roundsAtCancel - roundsBefore} rounds after the removal`);
    await waitFor('released on a', () => a.scheduler.taskStats('gone') === undefined);
    assert.deepEqual(await b.store.runLog.runs('gone'), []);
    assert.equal(await b.store.removeTask('gone'), false);
    const { rows } = await c.admin.query(`SELECT (SELECT count(*) FROM ${c.names.S}.task_runs)::int AS runs, (SELECT count(*) FROM ${c.names.S}.task_state)::int AS state`);
    assert.deepEqual(rows[0], { runs: 0, state: 0 });
  });

  test('manual runs take the run key: a live run for that time refuses a second, a finished one is run again', async () => {
    const a = await c.node();
    await a.store.declareTask(validateTask({ id: 'm', every: '1h', maxConcurrency: 2, handler: 'h' }), {});
    await waitFor('a holds m', () => held(a) === 1);
    const forced = await a.scheduler.forceRun('m', 5 * MIN);
    await waitFor('the manual run started', () => a.executor.executions.length === 1);
    await assert.rejects(a.scheduler.forceRun('m', 5 * MIN), DuplicateRunError);
    a.executor.last().complete({ value: 1 });
    assert.deepEqual(await forced.done, { value: 1 });
    const again = await a.scheduler.forceRun('m', 5 * MIN);
    await waitFor('run again', () => a.executor.executions.length === 2);
    a.executor.last().complete({ value: 2 });
    await again.done;
    const runs = await a.store.runLog.runs('m');
    assert.deepEqual(runs.map((r) => [r.scheduledFor, r.finalStatus, r.value]), [
      [5 * MIN, 'success', 2],
      [5 * MIN, 'success', 1],
    ], 'newest first, both logged');
    const retried = await a.scheduler.retryRun('m', runs[1]!.runId);
    await waitFor('the retry', () => a.executor.executions.length === 3);
    assert.equal(a.executor.last().queued.scheduledFor, 5 * MIN);
    a.executor.last().complete();
    await retried.done;
  });

  test('a run given up before it began (a hand-over, a stop) is queued again, not finished: its time still runs', async () => {
    const a = await c.node();
    await a.store.declareTask(validateTask({ id: 'q', every: '1h', maxConcurrency: 1, handler: 'h' }), { latestCompleted: 0 });
    await waitFor('a holds q', () => held(a) === 1);
    // Asked directly (the scheduler's clock is still before the first hour): the 1h run is created…
    const { created } = await a.store.desiredState.createNextRun('q', 61 * MIN);
    assert.equal(created.scheduledFor, 60 * MIN);
    // …and ends canceled before any attempt of it began.
    await a.store.desiredState.finishRun('q', created.runId, { status: 'canceled', when: 61 * MIN, attempt: 0 });
    const { rows } = await c.admin.query(`SELECT r.status, s.latest_completed FROM ${c.names.S}.task_runs r JOIN ${c.names.S}.task_state s USING (task_id)`);
    assert.deepEqual(rows[0], { status: 'queued', latest_completed: 0 }, 'queued again, and not completed');
    const [logged] = await a.store.runLog.runs('q');
    assert.deepEqual(
      [logged?.status, logged?.attempts, logged?.processes, logged?.history.map((h) => h.status)],
      ['scheduled', 0, [], ['scheduled']],
      'its log entry shows no attempt begun',
    );
    const again = await a.store.desiredState.createNextRun('q', 62 * MIN);
    assert.equal(again.created.runId, created.runId, 'the same run, handed out again');
  });

  test('the run log keeps runLogLimit runs per task, the newest', async () => {
    const a = await c.node({ runLogLimit: 3 });
    await a.store.declareTask(validateTask({ id: 'l', every: '1m', maxConcurrency: 1, handler: 'h' }), { latestCompleted: 0 });
    await waitFor('a holds l', () => held(a) === 1);
    for (let i = 1; i <= 5; i++) {
      c.clock.advance(MIN);
      await waitFor(`run ${i}`, () => a.executor.executions.length === i);
      a.executor.last().complete();
      await waitFor(`run ${i} logged`, async () => (await a.store.runLog.runs('l'))[0]?.finalStatus === 'success' && (await a.store.runLog.runs('l'))[0]?.scheduledFor === i * MIN);
    }
    // Each creation trims: the ended runs beyond the newest 3 go (the live 6th counts among the 3).
    c.clock.advance(MIN);
    await waitFor('run 6', () => a.executor.executions.length === 6);
    const runs = await a.store.runLog.runs('l');
    assert.deepEqual(runs.map((r) => r.scheduledFor / MIN), [6, 5, 4]);
  });
});
