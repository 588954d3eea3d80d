/**
 * The reaper and a lock-free admission racing for one job's slot. A delayed evaluation that comes due takes its
 * job's slot when the reaper sees no holder; the fast path of `enqueue` admits a holder without the job's lock, so
 * its insert can be in flight, unseen, while the reaper decides. The reaper's update then waits on that insert's
 * index entry, and when the insert commits the unique index ("one evaluation per job holds the slot") refuses it:
 * a lost race, not an error. Driven step by step on the real database: the admission's transaction is held open
 * until the reaper's statement is seen waiting on it, then committed.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { systemClock } from '../../src/clock.js';
import { postgresBackend } from '../../src/postgres/backend.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { until } from './processes.js';

requireDatabaseInCI();

test('a due evaluation whose job was admitted meanwhile by a lock-free enqueue goes pending behind it; the pass does not fail', { skip: skipWithoutDatabase, timeout: 60_000 }, async () => {
  const schema = schemaName('race');
  const S = `"${schema}"`;
  const admin = adminPool();
  const logged: { level: number; msg: string; err?: { code?: string } }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') logged.push(JSON.parse(line));
      done();
    },
  });
  const backend = postgresBackend({ connectionString: databaseUrl!, schema, pollMs: 600_000 }).create({
    clock: systemClock,
    logger: pino({ level: 'warn' }, sink),
    registry: new Registry(),
    tables: ['allocs'],
    evaluatePlan: undefined,
    broker: { knownTypes: ['service'], maxPayloadBytes: 1 << 20 },
  });
  const racer = await admin.connect();
  try {
    await backend.open();
    // The pass of the start is over: from here on, passes run only when the test asks (pollMs is ten minutes).
    await backend.reap();
    const delayed = backend.broker.enqueue({ id: 'delayed', jobId: 'job', type: 'service', wait: 600_000 });
    await delayed.accepted;
    await admin.query(`UPDATE ${S}.evals SET due_at = now() - interval '1 second' WHERE id = 'delayed'`);
    assert.deepEqual((await admin.query(`SELECT state, holds_slot FROM ${S}.evals WHERE id = 'delayed'`)).rows, [{ state: 'waiting', holds_slot: false }]);

    // The admission, uncommitted: enqueue's fast path, which takes no job lock.
    await racer.query('BEGIN');
    const admitted = await racer.query(
      `SELECT admitted, state FROM ${S}.enqueue(ARRAY['fresh'], ARRAY['default'], ARRAY['job'], ARRAY['service'], ARRAY[50],
         ARRAY[1]::bigint[], ARRAY[1]::bigint[], ARRAY[NULL]::float8[], ARRAY[NULL]::float8[],
         ARRAY[(SELECT body FROM ${S}.evals WHERE id = 'delayed')], ARRAY[NULL]::jsonb[], NULL)`,
    );
    assert.deepEqual(admitted.rows, [{ admitted: 'new', state: 'ready' }]);

    const pass = backend.reap();
    await until('the reaper to wait on the uncommitted admission', 10_000, async () => {
      const { rows } = await admin.query(
        `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`,
        [`%${S}.reap(%`],
      );
      return rows.length > 0 ? true : undefined;
    });
    await racer.query('COMMIT');
    await pass;

    assert.deepEqual(
      logged.filter((l) => l.level >= 40).map((l) => `${l.msg} ${l.err?.code ?? ''}`),
      [],
      'the lost race was logged as a failure',
    );
    const rows = (await admin.query(`SELECT id, state, holds_slot FROM ${S}.evals ORDER BY id`)).rows;
    assert.deepEqual(rows, [
      { id: 'delayed', state: 'pending', holds_slot: false },
      { id: 'fresh', state: 'ready', holds_slot: true },
    ]);
  } finally {
    await racer.query('ROLLBACK').catch(() => undefined);
    racer.release();
    await backend.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});
