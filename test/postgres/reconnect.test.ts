/**
 * A process that loses its database: calls reject with ERR_BACKEND_UNAVAILABLE while it is gone; when it is back, the
 * LISTEN connection reconnects, listens, and catches up what was committed meanwhile (the notification of it was
 * lost), without any poll.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ChangeSet } from '../../src/state/types.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { openBackend } from './backend-harness.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { Partition } from './proxy.js';

requireDatabaseInCI();

test('calls reject with ERR_BACKEND_UNAVAILABLE while the database is gone; back, the replica catches up by listen-then-catch-up', { skip: skipWithoutDatabase, timeout: 60_000 }, async () => {
  const schema = schemaName('reconnect');
  const admin = adminPool();
  const partition = new Partition(Number(new URL(databaseUrl!).port));
  const proxied = new URL(databaseUrl!);
  proxied.port = String(await partition.port);
  // Polling an hour apart: only the reconnect's catch-up can bring the commit below in time.
  const cut = await openBackend({ schema, url: proxied.href, tables: ['records'], pollMs: 3_600_000 });
  const other = await openBackend({ schema, tables: ['records'] });
  try {
    partition.sever();
    await assert.rejects(Promise.resolve(cut.broker.stats()), (e: unknown) => e instanceof BackendUnavailableError && e.code === 'ERR_BACKEND_UNAVAILABLE');
    const seen = new Promise<ChangeSet>((resolve) => cut.state.onChange(resolve));
    const committed = await other.state.write((txn) => txn.put('records', 'while-away', 1));
    assert.equal(committed.index, 1);
    assert.equal(cut.state.index, 0, 'the cut-off replica has not seen it');
    partition.heal();
    const change = await seen;
    assert.equal(change.index, 1);
    assert.equal(cut.state.snapshot().get('records', 'while-away')?.value, 1);
    // And the process works again.
    await cut.broker.enqueue({ id: 'after', type: 'service' }).accepted;
    assert.equal((await cut.broker.stats()).totalReady, 1);
  } finally {
    partition.heal();
    await cut.close();
    await other.close();
    await partition.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});
