/**
 * A COMMIT whose answer is lost (the connection breaks after the server got it) is resolved by the plan's id: the
 * commit landed, the plan resolves with its index and its ack, and nothing is committed twice.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openBackend } from './backend-harness.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { Partition } from './proxy.js';

requireDatabaseInCI();

for (const late of [false, true]) {
  const when = late ? ', the COMMIT reaching the server only after the check asked' : '';
  test(`a plan whose COMMIT answer was cut off resolves as committed, once, with its delivery acked${when}`, { skip: skipWithoutDatabase, timeout: 60_000 }, async () => {
    const schema = schemaName('commit');
    const admin = adminPool();
    const partition = new Partition(Number(new URL(databaseUrl!).port));
    const proxied = new URL(databaseUrl!);
    proxied.port = String(await partition.port);
    const backend = await openBackend({ schema, url: proxied.href, tables: ['records'] });
    try {
      const handle = backend.broker.enqueue({ id: 'e', type: 'service' });
      await handle.accepted;
      const d = (await backend.broker.dequeue(['service'], 0))!;
      const cut = partition.cutAfterCommit({ late });
      const outcome = await backend.plans.submit(
        { writes: [{ table: 'records', key: 'k', value: 1, readIndex: 0 }] },
        { evaluationId: 'e', token: d.token, ack: { value: 'v', attempts: 1 } },
      );
      await cut;
      assert.deepEqual({ ...outcome, rejected: [...outcome.rejected] }, { index: 1, rejected: [], refreshIndex: 0, acked: true });
      assert.deepEqual(await handle.done, { id: 'e', status: 'acked', value: 'v', index: 1, attempts: 1, deliveries: 1 });
      const S = `"${schema}"`;
      assert.equal((await admin.query(`SELECT count(*)::int AS n FROM ${S}.state_log`)).rows[0].n, 1, 'committed once');
      assert.equal((await admin.query(`SELECT state FROM ${S}.evals WHERE id = 'e'`)).rows[0].state, 'acked');
      assert.equal(backend.state.snapshot().get('records', 'k')?.modifyIndex, 1);
    } finally {
      await backend.close();
      await partition.close();
      await dropSchema(admin, schema);
      await admin.end();
    }
  });
}
