/**
 * The batched writes about runs against a real PostgreSQL: the writes asked for in one turn travel in one statement,
 * each answers what its single function would, and a write the database refuses fails alone.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import type { Database } from '../../../src/postgres/database.js';
import { taskQueries } from '../../../src/postgres/tasks/queries.js';
import { RunWrites, type WriteFence } from '../../../src/postgres/tasks/run-writes.js';
import { requireDatabaseInCI, skipWithoutDatabase } from '../helpers.js';
import { cluster, database, type Cluster } from './harness.js';

requireDatabaseInCI();
const MIN = 60_000;

describe('the writes about runs, batched', { skip: skipWithoutDatabase }, () => {
  let c: Cluster;
  let db: Database;
  let writes: RunWrites;
  /** The claims of member `m` on tasks a, b and c, as the database made them. */
  let fences: Map<string, WriteFence>;

  beforeEach(async () => {
    c = await cluster(0);
    db = database('tickpool-test-run-writes');
    writes = new RunWrites(db, taskQueries(c.names.S), 100);
    for (const id of ['a', 'b', 'c']) {
      await c.admin.query(`SELECT ${c.names.S}.task_declare($1, '\\x00', $1, 0, 0, NULL)`, [id]);
    }
    const { rows } = await c.admin.query(`SELECT ${c.names.S}.task_cycle('m', 60000, 0, 10, true, 'h', 1, 1) AS r`);
    const claimed = rows[0].r.claimed as Array<{ id: string; epoch: number }>;
    fences = new Map(claimed.map((row) => [row.id, { taskId: row.id, epoch: row.epoch, member: 'm' }]));
    assert.equal(fences.size, 3);
  });
  afterEach(async () => {
    await db?.close();
    await c?.close();
  });

  const fence = (id: string): WriteFence => fences.get(id)!;
  const create = (id: string, minutes: number, expected = 0) =>
    writes.createStarted(fence(id), { runId: `${id}-${minutes}`, expected, scheduledFor: minutes * MIN, runAt: minutes * MIN, when: minutes * MIN });

  test('the writes of one turn go in one statement, each with the outcome it has alone', async () => {
    const stale = { ...fence('a'), epoch: fence('a').epoch + 1000 };
    const answers = await Promise.all([
      create('c', 1),
      create('a', 1),
      create('b', 1, 5 * MIN),
      writes.createStarted(stale, { runId: 'stale', expected: 0, scheduledFor: MIN, runAt: MIN, when: MIN }),
    ]);
    assert.equal(writes.statements, 1, 'one statement');
    assert.deepEqual(answers, [
      { outcome: 'created', latest: MIN },
      { outcome: 'created', latest: MIN },
      { outcome: 'moved', latest: 0 },
      { outcome: 'stale', latest: null },
    ]);
    const run = (await c.admin.query(`SELECT status, attempts, process FROM ${c.names.S}.task_runs WHERE run_id = 'a-1'`)).rows[0];
    assert.deepEqual(run, { status: 'started', attempts: 1, process: 'm' }, 'created with its first attempt begun');
    const log = (await c.admin.query(`SELECT status, attempts, processes, history FROM ${c.names.S}.task_run_log WHERE run_id = 'a-1'`)).rows[0];
    assert.deepEqual(log, {
      status: 'started',
      attempts: 1,
      processes: ['m'],
      history: [
        { status: 'scheduled', when: MIN, attempt: 0 },
        { status: 'started', when: MIN, attempt: 1, process: 'm' },
      ],
    });

    const finishes = await Promise.all([
      writes.finish(fence('a'), { runId: 'a-1', status: 'success', when: 2 * MIN, attempt: 1, error: null, value: null }),
      writes.start(fence('c'), 'c-1', 2, 2 * MIN),
      writes.start(fence('b'), 'no-such-run', 1, 2 * MIN),
      writes.finish(fence('c'), { runId: 'c-1', status: 'failed', when: 2 * MIN, attempt: 2, error: { code: 'E', message: 'm' }, value: Buffer.from([1, 2]) }),
    ]);
    assert.equal(writes.statements, 2, 'one more statement');
    assert.deepEqual(finishes, ['ok', 'ok', 'gone', 'ok'], "one task's writes keep their order: c's start before its finish");
    const ended = (await c.admin.query(`SELECT run_id, status FROM ${c.names.S}.task_runs ORDER BY run_id`)).rows;
    assert.deepEqual(ended, [
      { run_id: 'a-1', status: 'done' },
      { run_id: 'c-1', status: 'done' },
    ]);
    const failed = (await c.admin.query(`SELECT final_status, attempts, error, value FROM ${c.names.S}.task_run_log WHERE run_id = 'c-1'`)).rows[0];
    assert.deepEqual(failed, { final_status: 'failed', attempts: 2, error: { code: 'E', message: 'm' }, value: Buffer.from([1, 2]) });
  });

  test("a task keeps the rows of its runLogLimit newest finished runs: older ones go with their log entries", async () => {
    const limit = 3;
    const bounded = new RunWrites(db, taskQueries(c.names.S), limit);
    const runsOf = async (id: string) =>
      (await c.admin.query(`SELECT run_id, status FROM ${c.names.S}.task_runs WHERE task_id = $1 ORDER BY scheduled_for`, [id])).rows;
    for (let minute = 1; minute <= 10; minute++) {
      const created = await bounded.createStarted(fence('a'), { runId: `a-${minute}`, expected: (minute - 1) * MIN, scheduledFor: minute * MIN, runAt: minute * MIN, when: minute * MIN });
      assert.equal(created.outcome, 'created');
      // Run 10 is left running: a live row stays whatever the limit.
      if (minute < 10) assert.equal(await bounded.finish(fence('a'), { runId: `a-${minute}`, status: 'success', when: minute * MIN, attempt: 1, error: null, value: null }), 'ok');
    }
    const log = (await c.admin.query(`SELECT run_id FROM ${c.names.S}.task_run_log WHERE task_id = 'a' ORDER BY seq`)).rows.map((r) => r.run_id);
    assert.deepEqual(log, ['a-8', 'a-9', 'a-10']);
    assert.deepEqual(await runsOf('a'), [
      { run_id: 'a-8', status: 'done' },
      { run_id: 'a-9', status: 'done' },
      { run_id: 'a-10', status: 'started' },
    ]);
    assert.equal(await bounded.finish(fence('a'), { runId: 'a-9', status: 'success', when: 11 * MIN, attempt: 1, error: null, value: null }), 'ok', 'a kept finished run finishes again as a no-op');
  });

  test('a finished row after latest_completed stays, trimmed log or not: a takeover re-creating that time finds it', async () => {
    const limit = 1;
    const bounded = new RunWrites(db, taskQueries(c.names.S), limit);
    // Run 1 stays running; run 2 is settled as a takeover settles a dead process's run (done, its log entry final)
    // without moving latest_completed, which stays 0.
    await bounded.createStarted(fence('b'), { runId: 'b-1', expected: 0, scheduledFor: MIN, runAt: MIN, when: MIN });
    await bounded.createStarted(fence('b'), { runId: 'b-2', expected: MIN, scheduledFor: 2 * MIN, runAt: 2 * MIN, when: 2 * MIN });
    await c.admin.query(`UPDATE ${c.names.S}.task_runs SET status = 'done' WHERE run_id = 'b-2'`);
    await c.admin.query(`UPDATE ${c.names.S}.task_run_log SET final_status = 'failed' WHERE run_id = 'b-2'`);
    await bounded.createStarted(fence('b'), { runId: 'b-3', expected: 2 * MIN, scheduledFor: 3 * MIN, runAt: 3 * MIN, when: 3 * MIN });
    const rows = (await c.admin.query(`SELECT run_id FROM ${c.names.S}.task_runs WHERE task_id = 'b' ORDER BY scheduled_for`)).rows.map((r) => r.run_id);
    assert.deepEqual(rows, ['b-1', 'b-2', 'b-3'], 'the done row of a time after latest_completed is kept');
    const again = await bounded.createStarted(fence('b'), { runId: 'b-2-again', expected: 3 * MIN, scheduledFor: 2 * MIN, runAt: 4 * MIN, when: 4 * MIN });
    assert.equal(again.outcome, 'exists', 'so that time is refused when it is asked for again');
  });

  test('a write the database refuses fails alone: the batch is sent again write by write', async () => {
    const [good, bad, other] = await Promise.allSettled([
      create('a', 1),
      // An attempt number no integer column holds: the whole statement is refused.
      writes.start(fence('b'), 'b-1', 2 ** 40, MIN),
      create('c', 1),
    ]);
    assert.deepEqual(good, { status: 'fulfilled', value: { outcome: 'created', latest: MIN } });
    assert.deepEqual(other, { status: 'fulfilled', value: { outcome: 'created', latest: MIN } });
    assert.equal(bad.status, 'rejected');
    assert.match(String((bad as PromiseRejectedResult).reason), /out of range/);
    assert.equal(writes.statements, 4, 'the batch, then each of its three writes alone');
    const runs = (await c.admin.query(`SELECT run_id FROM ${c.names.S}.task_runs ORDER BY run_id`)).rows.map((r) => r.run_id);
    assert.deepEqual(runs, ['a-1', 'c-1'], 'each good write landed once');
  });
});
