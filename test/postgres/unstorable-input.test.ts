/**
 * Input that PostgreSQL cannot store (a NUL in a key, a key over the index entry's limit, a schema the server
 * keeps for itself) is refused at the entry with a typed error, by the rule both backends share
 * (`storable-key.ts`), so it never joins a batch: the valid evaluations enqueued and the valid plans submitted in
 * the same turn as a bad one are admitted and committed as if it had not been there.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { postgresBackend } from '../../src/postgres/backend.js';
import { MAX_KEY_BYTES } from '../../src/storable-key.js';
import { validateTask, type Task } from '../../src/tasks/task.js';
import { openBackend } from './backend-harness.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

const code = (expected: string, field: string) => (e: unknown) =>
  (e as { code?: unknown }).code === expected && (e as Error).message.includes(field) && (e as Error).message.includes('NUL');

test('an evaluation with a NUL in its id, job id, namespace or type is refused at enqueue; the 50 enqueued with it in the same turn are admitted', { skip: skipWithoutDatabase, timeout: 30_000 }, async () => {
  const schema = schemaName('unstorable');
  const admin = adminPool();
  const backend = await openBackend({ schema });
  try {
    const bad = [
      ['evaluation.id', { id: 'nul\u0000id', type: 'service' }],
      ['evaluation.jobId', { id: 'b1', jobId: 'nul\u0000job', type: 'service' }],
      ['evaluation.namespace', { id: 'b2', namespace: 'nul\u0000ns', type: 'service' }],
      ['evaluation.type', { id: 'b3', type: 'serv\u0000ice' }],
    ] as const;
    const handles = [];
    // One turn: the valid ones and the bad ones interleaved, as one admitting transaction would carry them.
    for (let i = 0; i < 50; i++) {
      handles.push(backend.broker.enqueue({ id: `ok${i}`, type: 'service' }));
      const [field, input] = bad[i % bad.length]!;
      if (i < bad.length) assert.throws(() => backend.broker.enqueue(input), code('ERR_INVALID_EVALUATION', field), field);
    }
    await Promise.all(handles.map((h) => h.accepted));
    const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".evals WHERE state = 'ready'`);
    assert.equal(rows[0]!.n, 50, 'every valid evaluation admitted, nothing of the refused ones');
  } finally {
    await backend.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});

test('a plan with a NUL key or a key over the limit is refused at submit; the other plans of its commit batch commit', { skip: skipWithoutDatabase, timeout: 30_000 }, async () => {
  const schema = schemaName('unstorable');
  const admin = adminPool();
  const backend = await openBackend({ schema, tables: ['records'] });
  try {
    const long = 'k'.repeat(MAX_KEY_BYTES + 1);
    const outcomes = [];
    // One turn: one commit batch in the old code, which the NUL failed whole.
    for (let i = 0; i < 10; i++) {
      const key = i === 3 ? 'nul\u0000key' : i === 6 ? long : `r${i}`;
      outcomes.push(backend.plans.submit({ writes: [{ table: 'records', key, value: i, readIndex: 0 }] }));
    }
    const settled = await Promise.allSettled(outcomes);
    for (const [i, s] of settled.entries()) {
      if (i === 3 || i === 6) {
        assert.equal(s.status, 'rejected', `plan ${i}`);
        assert.equal((s as PromiseRejectedResult).reason.code, 'ERR_INVALID_PLAN', `plan ${i}`);
        assert.match((s as PromiseRejectedResult).reason.message, /plan\.writes\[0\]\.key/);
      } else {
        assert.equal(s.status, 'fulfilled', `plan ${i}: ${s.status === 'rejected' ? String(s.reason) : ''}`);
      }
    }
    const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".state_records`);
    assert.equal(rows[0]!.n, 8);
    // A direct write of a key the database cannot index (a megabyte) is refused the same way.
    await assert.rejects(
      async () => backend.state.write((txn) => txn.put('records', 'm'.repeat(1 << 20), 1)),
      (e: unknown) => (e as { code?: unknown }).code === 'ERR_INVALID_ARGUMENT' && /at most 1024 bytes/.test((e as Error).message),
    );
  } finally {
    await backend.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});

test('a task id with a NUL is refused with ERR_INVALID_TASK; a look-up by one finds nothing, without a driver error', { skip: skipWithoutDatabase, timeout: 30_000 }, async () => {
  const schema = schemaName('unstorable');
  const admin = adminPool();
  const backend = await openBackend({ schema });
  try {
    const task = { id: 'nul\u0000task', every: '1m', maxConcurrency: 1, handler: 'h' };
    // At the public entry (both backends validate a task there), and at the store itself.
    assert.throws(() => validateTask(task), code('ERR_INVALID_TASK', '`id`'));
    assert.throws(() => backend.tasks.declareTask(task as unknown as Task, {}), code('ERR_INVALID_TASK', '`id`'));
    assert.deepEqual(await backend.tasks.runLog.runs('nul\u0000task'), []);
    assert.equal(await backend.tasks.removeTask('nul\u0000task'), false);
    // And the broker's calls by id answer as for an id it never had.
    assert.equal(await backend.broker.inspect('nul\u0000id'), undefined);
    await assert.rejects(backend.broker.ack('nul\u0000id', 't'), (e: unknown) => (e as { code?: unknown }).code === 'ERR_EVAL_NOT_OUTSTANDING');
    await backend.broker.enqueue({ id: 'e', type: 'service' }).accepted;
    await assert.rejects(backend.broker.nack('e', 'tok\u0000en'), (e: unknown) => (e as { code?: unknown }).code === 'ERR_EVAL_NOT_OUTSTANDING');
  } finally {
    await backend.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});

test('schemas PostgreSQL keeps for itself are refused as an option, before anything connects', { skip: skipWithoutDatabase }, () => {
  for (const schema of ['pg_catalog', 'pg_toast', 'pg_mine', 'information_schema']) {
    assert.throws(
      () => postgresBackend({ connectionString: databaseUrl!, schema }),
      (e: unknown) => (e as { code?: unknown }).code === 'ERR_INVALID_OPTION' && /PostgreSQL keeps those/.test((e as Error).message),
      schema,
    );
  }
});

test('an error whose text jsonb cannot hold (a NUL, a lone surrogate) still nacks and fails its delivery; the text keeps U+FFFD in their place', { skip: skipWithoutDatabase, timeout: 30_000 }, async () => {
  const schema = schemaName('unstorable');
  const admin = adminPool();
  const backend = await openBackend({ schema, broker: { initialNackDelayMs: 0, subsequentNackDelayMs: 0 } });
  try {
    await backend.broker.enqueue({ id: 'n', type: 'service' }).accepted;
    await backend.broker.enqueue({ id: 'f', type: 'service' }).accepted;
    const first = (await backend.broker.dequeue(['service'], 10_000))!;
    const second = (await backend.broker.dequeue(['service'], 10_000))!;
    const bad = Object.assign(new Error('bad\u0000text \uD800'), { details: { 'k\u0000': 'v\uDC00' } });
    await backend.broker.nack(first.evaluation.id, first.token, bad);
    await backend.broker.fail(second.evaluation.id, second.token, bad);
    const { rows } = await admin.query<{ id: string; state: string; queue: string; message: string }>(
      `SELECT id, state, queue, last_reason->>'message' AS message FROM "${schema}".evals ORDER BY id`,
    );
    assert.deepEqual(rows, [
      { id: 'f', state: 'ready', queue: '_failed', message: 'bad\uFFFDtext \uFFFD' },
      { id: 'n', state: 'ready', queue: 'service', message: 'bad\uFFFDtext \uFFFD' },
    ]);
  } finally {
    await backend.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});
