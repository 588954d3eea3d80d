/**
 * Ids, job ids and namespaces are index keys on PostgreSQL, whose btree refuses an entry over 2,704 bytes with an
 * error of its own after the enqueue went out. The backend refuses them at `enqueue` instead, typed, over
 * `MAX_KEY_BYTES` (UTF-8), and stores anything up to it.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { MAX_KEY_BYTES } from '../../src/postgres/broker/pg-broker.js';
import { openBackend } from './backend-harness.js';
import { adminPool, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

test('an id, job id or namespace over MAX_KEY_BYTES is refused at enqueue with ERR_INVALID_EVALUATION; one at it is stored', { skip: skipWithoutDatabase, timeout: 30_000 }, async () => {
  const schema = schemaName('keys');
  const admin = adminPool();
  const backend = await openBackend({ schema });
  try {
    // Two bytes each in UTF-8: one byte over the limit, though the string is a third as long.
    const over = 'é'.repeat(MAX_KEY_BYTES / 2) + 'x';
    for (const [field, input] of [
      ['evaluation.id', { id: over, jobId: 'j1', type: 'service' }],
      ['evaluation.jobId', { id: 'e1', jobId: over, type: 'service' }],
      ['evaluation.namespace', { id: 'e2', jobId: 'j2', namespace: over, type: 'service' }],
    ] as const) {
      assert.throws(
        () => backend.broker.enqueue(input),
        (e: unknown) => (e as { code?: string }).code === 'ERR_INVALID_EVALUATION' && (e as Error).message.includes(field),
        field,
      );
    }
    // At the limit, and not compressible: stored, and delivered.
    const id = randomBytes(MAX_KEY_BYTES / 2).toString('hex');
    await backend.broker.enqueue({ id, jobId: id, type: 'service' }).accepted;
    assert.equal((await backend.broker.dequeue(['service'], 10_000))?.evaluation.id, id);
    assert.equal((await admin.query(`SELECT count(*)::int AS n FROM "${schema}".evals`)).rows[0].n, 1, 'nothing of the refused ones');
  } finally {
    await backend.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});
