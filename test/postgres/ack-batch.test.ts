/**
 * The acks of one turn travel together (`ack_many`) against a real PostgreSQL: each is answered for itself, an ack
 * whose lease ran out in database time loses without holding back the others, and an ack that frees a job's slot
 * promotes that job's best pending evaluation and supersedes the rest.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import type { Backend } from '../../src/backend/backend.js';
import { ManualClock } from '../../src/clock.js';
import { SupersededError, TickpoolError } from '../../src/errors.js';
import { postgresBackend } from '../../src/postgres/backend.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

describe('acks of one turn, on PostgreSQL', { skip: skipWithoutDatabase }, () => {
  const schema = schemaName('ack');
  const admin = adminPool();
  let backend: Backend | undefined;
  afterEach(async () => {
    await backend?.close();
    await dropSchema(admin, schema);
    await admin.end();
  });

  test('each ack is answered for itself; a lease over in database time loses alone; a freed slot promotes', async () => {
    const clock = new ManualClock(1_000_000);
    backend = postgresBackend({ connectionString: databaseUrl!, schema }).create({
      clock,
      logger: pino({ level: 'silent' }),
      registry: new Registry(),
      tables: ['allocs'],
      evaluatePlan: undefined,
      broker: { nackTimeoutMs: 600_000, deliveryLimit: 3, initialNackDelayMs: 100_000, subsequentNackDelayMs: 200_000, knownTypes: ['service'], maxPayloadBytes: 1 << 20 },
    });
    await backend.open();
    const broker = backend.broker;
    const ev = (id: string, jobId: string, priority = 50) => ({ id, jobId, type: 'service', priority });
    const holders = [broker.enqueue(ev('x', 'job-x')), broker.enqueue(ev('y', 'job-y')), broker.enqueue(ev('z', 'job-z'))];
    await Promise.all(holders.map((h) => h.accepted));
    const waiting = [broker.enqueue(ev('x-low', 'job-x', 10)), broker.enqueue(ev('x-best', 'job-x', 90))];
    await Promise.all(waiting.map((h) => h.accepted));
    const deliveries = await broker.dequeueMany(['service'], 3, 0);
    const token = new Map(deliveries.map((d) => [d.evaluation.id, d.token]));
    assert.deepEqual([...token.keys()].sort(), ['x', 'y', 'z']);
    // z's lease ends in the database while this process still holds it: no reaper has run.
    await admin.query(`UPDATE "${schema}".evals SET lease_until = now() - interval '1 second' WHERE id = 'z'`);

    const answers = await Promise.allSettled(['x', 'y', 'z'].map((id) => broker.ack(id, token.get(id)!, { value: id })));
    assert.deepEqual(answers.slice(0, 2).map((a) => a.status), ['fulfilled', 'fulfilled']);
    assert.equal(answers[2]!.status, 'rejected');
    const refusal = (answers[2] as PromiseRejectedResult).reason as unknown;
    assert.ok(refusal instanceof TickpoolError && refusal.code === 'ERR_NACK_TIMEOUT_REACHED', `z refused as timed out: ${String(refusal)}`);

    const rows = (await admin.query(`SELECT id, state, holds_slot FROM "${schema}".evals ORDER BY id`)).rows;
    assert.deepEqual(rows, [
      { id: 'x', state: 'acked', holds_slot: false },
      { id: 'x-best', state: 'ready', holds_slot: true },
      { id: 'x-low', state: 'cancelable', holds_slot: false },
      { id: 'y', state: 'acked', holds_slot: false },
      { id: 'z', state: 'unacked', holds_slot: true },
    ]);
    assert.deepEqual(await Promise.all(holders.slice(0, 2).map((h) => h.done.then((o) => o.value))), ['x', 'y']);
    await assert.rejects(waiting[0]!.done, (e: unknown) => e instanceof SupersededError && e.supersededBy === 'x-best');
  });
});
