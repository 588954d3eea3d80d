/**
 * A dequeue that arrives while an ack batch is in flight, against a real PostgreSQL: when the acks in flight would
 * free more workers than wait, the fetch waits for them to land and then serves the dequeues they free with it in
 * one statement; with no more acks in flight than dequeues waiting, it goes out at once. The ack statement is held
 * in flight by a row lock that a second connection takes, so nothing here depends on timing.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import type { Pool, PoolClient } from 'pg';
import type { Backend } from '../../src/backend/backend.js';
import type { BrokerBackend } from '../../src/backend/broker-backend.js';
import type { Delivery } from '../../src/broker/broker-types.js';
import type { ManualClock } from '../../src/clock.js';
import { adminPool, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { kinds, openRecordedBackend } from './recorded-backend.js';

requireDatabaseInCI();

/** Resolves once an ack_many statement waits for a row lock in the database. */
async function ackBlocked(admin: Pool): Promise<void> {
  for (;;) {
    const { rows } = await admin.query(`SELECT 1 FROM pg_stat_activity WHERE query LIKE '%ack_many(%' AND wait_event_type = 'Lock'`);
    if (rows.length > 0) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('a fetch while acks are in flight, on PostgreSQL', { skip: skipWithoutDatabase }, () => {
  let schema = '';
  let admin: Pool;
  let pool: Pool;
  let backend: Backend | undefined;
  let locker: PoolClient | undefined;
  afterEach(async () => {
    await locker?.query('ROLLBACK').catch(() => undefined);
    locker?.release();
    locker = undefined;
    await backend?.close();
    backend = undefined;
    await pool.end();
    await dropSchema(admin, schema);
    await admin.end();
  });

  async function open(): Promise<{ broker: BrokerBackend; sent: string[]; clock: ManualClock }> {
    schema = schemaName('fetchack');
    admin = adminPool();
    const recorded = await openRecordedBackend(schema);
    ({ backend, pool } = recorded);
    return { broker: recorded.backend.broker, sent: recorded.sent, clock: recorded.clock };
  }

  /** Holds the row of evaluation `id` locked from another connection until the test commits. */
  async function lockRow(id: string): Promise<PoolClient> {
    locker = await admin.connect();
    await locker.query('BEGIN');
    await locker.query(`SELECT 1 FROM "${schema}".evals WHERE id = $1 FOR UPDATE`, [id]);
    return locker;
  }

  test('with more acks in flight than dequeues waiting, the fetch waits for them and serves the freed ones with it', async () => {
    const { broker, sent } = await open();
    const ev = (id: string) => ({ id, jobId: `job-${id}`, type: 'service', priority: 50 });
    const held = ['a1', 'a2', 'a3', 'a4'];
    for (const id of held) await broker.enqueue(ev(id)).accepted;
    for (const id of ['b1', 'b2', 'b3', 'b4', 'b5']) await broker.enqueue(ev(id)).accepted;
    const deliveries = await broker.dequeueMany(['service'], 4, 0);
    assert.deepEqual(deliveries.map((d) => d.evaluation.id), held);

    const lock = await lockRow('a1');
    sent.length = 0;
    // Each worker whose ack lands asks for its next evaluation, as the scheduling worker does.
    const next: Promise<Delivery | undefined>[] = [];
    const acks = deliveries.map((d) => Promise.resolve(broker.ack(d.evaluation.id, d.token)).then(() => void next.push(broker.dequeue(['service'], 0))));
    await ackBlocked(admin);
    assert.deepEqual(kinds(sent), ['ack']);

    // Four acks in flight, one dequeue waiting: the fetch is put off, not sent.
    const first = broker.dequeue(['service'], 0);
    await nextTurn();
    assert.deepEqual(kinds(sent), ['ack'], 'no fetch while the acks in flight would free more workers than wait');

    await lock.query('COMMIT');
    await Promise.all(acks);
    const served = await Promise.all([first, ...next]);
    assert.deepEqual(served.map((d) => d?.evaluation.id).sort(), ['b1', 'b2', 'b3', 'b4', 'b5']);
    assert.deepEqual(kinds(sent), ['ack', 'lease'], 'one fetch for the waiting dequeue and the four the acks freed');
  });

  test('an ack batch held longer than the bound (50 ms) stops holding the fetch back', { timeout: 30_000 }, async () => {
    const { broker, sent, clock } = await open();
    const ev = (id: string) => ({ id, jobId: `job-${id}`, type: 'service', priority: 50 });
    for (const id of ['a1', 'a2', 'b1']) await broker.enqueue(ev(id)).accepted;
    const deliveries = await broker.dequeueMany(['service'], 2, 0);
    assert.deepEqual(deliveries.map((d) => d.evaluation.id), ['a1', 'a2']);

    const lock = await lockRow('a1');
    sent.length = 0;
    const acks = deliveries.map((d) => broker.ack(d.evaluation.id, d.token));
    await ackBlocked(admin);
    const waiting = broker.dequeue(['service'], 0);
    await nextTurn();
    clock.advance(49);
    await nextTurn();
    assert.deepEqual(kinds(sent), ['ack'], 'within the bound the fetch still waits for the two acks');
    clock.advance(1);
    // The ack is still held by the lock: the dequeue is served all the same.
    assert.equal((await waiting)?.evaluation.id, 'b1');
    assert.deepEqual(kinds(sent), ['ack', 'lease']);
    await lock.query('COMMIT');
    await Promise.all(acks);
  });

  test('with no more acks in flight than dequeues waiting, the fetch goes out at once', async () => {
    const { broker, sent } = await open();
    const ev = (id: string) => ({ id, jobId: `job-${id}`, type: 'service', priority: 50 });
    await broker.enqueue(ev('a1')).accepted;
    await broker.enqueue(ev('b1')).accepted;
    const [delivery] = await broker.dequeueMany(['service'], 1, 0);
    assert.equal(delivery?.evaluation.id, 'a1');

    const lock = await lockRow('a1');
    sent.length = 0;
    const ack = broker.ack('a1', delivery!.token);
    await ackBlocked(admin);
    // One ack in flight, one dequeue waiting: served while the ack is still held.
    const served = await broker.dequeue(['service'], 0);
    assert.equal(served?.evaluation.id, 'b1');
    assert.deepEqual(kinds(sent), ['ack', 'lease']);
    await lock.query('COMMIT');
    await ack;
  });
});
