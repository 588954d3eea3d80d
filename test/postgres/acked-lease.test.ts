/**
 * A lease whose delivery was acked in the database before this process heard (a plan commit or an ack of its own
 * whose answer is still on its way) is not lost. A heartbeat in that gap finds nothing to extend; reporting the
 * lease lost would emit a spurious nack timeout and drop the delivery, so that the ack's own settlement, arriving
 * next, found nothing to end and emitted no `broker:ack`.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BrokerEvents } from '../../src/broker/broker-events.js';
import { NackTimeoutReachedError } from '../../src/errors.js';
import type { PgBroker } from '../../src/postgres/broker/pg-broker.js';
import { openBackend } from './backend-harness.js';
import { adminPool, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

test('a heartbeat after the delivery was acked in the database, before the ack settled here, loses nothing', { skip: skipWithoutDatabase, timeout: 60_000 }, async () => {
  const schema = schemaName('acked');
  const S = `"${schema}"`;
  const admin = adminPool();
  const backend = await openBackend({ schema, tables: ['records'] });
  const nacks: BrokerEvents['broker:nack'][] = [];
  const acks: BrokerEvents['broker:ack'][] = [];
  backend.broker.events.on('broker:nack', (e) => nacks.push(e));
  backend.broker.events.on('broker:ack', (e) => acks.push(e));
  try {
    await backend.broker.enqueue({ id: 'e', type: 'service' }).accepted;
    const d = (await backend.broker.dequeue(['service'], 0))!;
    // The commit's ack, landed: what a plan commit of this process writes, its answer not yet back.
    await admin.query(`SELECT * FROM ${S}.ack_fenced(ARRAY['e'], ARRAY[$1], ARRAY[NULL]::bytea[], ARRAY[1]::bigint[], ARRAY[1], $2)`, [d.token, backend.nodeId]);

    // The heartbeat cannot extend an acked lease; it must not call the lease lost either.
    await assert.rejects(backend.broker.outstandingReset('e', d.token), NackTimeoutReachedError);
    assert.deepEqual(nacks, [], 'the acked lease was reported lost, as a nack timeout');

    // The commit's answer arrives: the delivery is still held here, so its ack ends it and is heard.
    (backend.broker as unknown as PgBroker).settledAck('e', d.token, { value: undefined, index: 1, attempts: 1, deliveries: 1 });
    assert.deepEqual(acks.map((a) => [a.evaluation.id, a.token]), [['e', d.token]]);
    assert.deepEqual(nacks, []);
  } finally {
    await backend.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});
