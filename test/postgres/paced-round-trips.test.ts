/**
 * Fetches and acks paced by the threads' work ahead (`paceBy`), against a real PostgreSQL: while the threads have
 * work queued, an ack waits for company (up to its bound) and a fetch waits until as many dequeues wait as
 * deliveries are held, so CPU-bound work travels dozens to a statement; with nothing ahead, each goes at once, as
 * when idle. A fetch also waits while no thread will be free soon (`threadsFree`). The work ahead and the threads
 * free are numbers the test sets and time is a manual clock: nothing here depends on timing.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import type { Pool } from 'pg';
import type { Backend } from '../../src/backend/backend.js';
import type { BrokerBackend } from '../../src/backend/broker-backend.js';
import type { Delivery } from '../../src/broker/broker-types.js';
import type { ManualClock } from '../../src/clock.js';
import { MIN_AHEAD_MS } from '../../src/postgres/round-trip-pacer.js';
import { adminPool, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { openRecordedBackend } from './recorded-backend.js';

requireDatabaseInCI();

/** A few turns of the event loop: whatever the broker would send by itself has gone out by then. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

describe('round trips paced by the threads work ahead, on PostgreSQL', { skip: skipWithoutDatabase }, () => {
  let schema = '';
  let admin: Pool;
  let pool: Pool;
  let backend: Backend | undefined;
  afterEach(async () => {
    await backend?.close();
    backend = undefined;
    await pool.end();
    await dropSchema(admin, schema);
    await admin.end();
  });

  /** A backend on a manual clock with `count` evaluations ready; `ahead` is what the threads have ahead, ms. */
  async function open(count: number, ahead: { ms: number }, nackTimeoutMs = 600_000): Promise<{ broker: BrokerBackend; sent: string[]; clock: ManualClock }> {
    schema = schemaName('paced');
    admin = adminPool();
    const recorded = await openRecordedBackend(schema, nackTimeoutMs);
    ({ backend, pool } = recorded);
    const { sent, clock } = recorded;
    const { broker } = backend!;
    assert.equal(typeof broker.paceBy, 'function', 'the PostgreSQL broker is paced by the threads work ahead');
    broker.paceBy!(() => ahead.ms);
    for (let i = 0; i < count; i++) await broker.enqueue({ id: `e${i}`, jobId: `job-${i}`, type: 'service' }).accepted;
    return { broker, sent, clock };
  }

  test('while the threads are busy, acks asked for one at a time wait and go in one statement at the bound', async () => {
    const ahead = { ms: 0 };
    const { broker, sent, clock } = await open(6, ahead);
    const deliveries = await broker.dequeueMany(['service'], 6, 0);
    assert.equal(deliveries.length, 6);
    sent.length = 0;
    ahead.ms = 100;
    const acks: Promise<void>[] = [];
    for (const d of deliveries.slice(0, 5)) {
      acks.push(Promise.resolve(broker.ack(d.evaluation.id, d.token)));
      await settle();
      clock.advance(3);
    }
    assert.deepEqual(sent, [], 'no ack statement while the threads have work ahead and the oldest ack waited 15 of 20 ms');
    clock.advance(5);
    await Promise.all(acks);
    assert.deepEqual(sent, ['ack 5'], 'at the bound, the five acks went in one statement');

    // Nothing ahead: the next ack goes at once, alone.
    ahead.ms = 0;
    const last = deliveries[5]!;
    await broker.ack(last.evaluation.id, last.token);
    assert.deepEqual(sent, ['ack 5', 'ack 1']);
  });

  test('an ack waits for company a tenth of a short nack timeout at most, and never into the last tenth of its lease', async () => {
    const ahead = { ms: 0 };
    // A 100 ms nack timeout: an ack may wait 10 ms, and must be sent 10 ms before its lease ends.
    const { broker, sent, clock } = await open(2, ahead, 100);
    const [early, late] = await broker.dequeueMany(['service'], 2, 0);
    sent.length = 0;
    ahead.ms = 100;
    const first = Promise.resolve(broker.ack(early!.evaluation.id, early!.token));
    await settle();
    clock.advance(9);
    await settle();
    assert.deepEqual(sent, []);
    clock.advance(1);
    await first;
    assert.deepEqual(sent, ['ack 1'], 'sent at a tenth of the nack timeout');

    // 85 ms into its lease: it may wait until 90 ms, not 95.
    clock.advance(75);
    const second = Promise.resolve(broker.ack(late!.evaluation.id, late!.token));
    await settle();
    clock.advance(4);
    await settle();
    assert.deepEqual(sent, ['ack 1']);
    clock.advance(1);
    await second;
    assert.deepEqual(sent, ['ack 1', 'ack 1'], 'sent 10 ms before the lease ends');
  });

  test('an ack waiting for company goes as soon as the threads run low on work', async () => {
    const ahead = { ms: 0 };
    const { broker, sent } = await open(2, ahead);
    const [first, second] = await broker.dequeueMany(['service'], 2, 0);
    sent.length = 0;
    ahead.ms = 100;
    const waiting = Promise.resolve(broker.ack(first!.evaluation.id, first!.token));
    await settle();
    assert.deepEqual(sent, []);
    // The next ack asked for finds the threads short of work: both go, in one statement, with no time passed.
    ahead.ms = 1;
    await Promise.all([waiting, broker.ack(second!.evaluation.id, second!.token)]);
    assert.deepEqual(sent, ['ack 2']);
  });

  test('while the threads are busy, a fetch waits until as many dequeues wait as deliveries are held, then serves them in one', async () => {
    const ahead = { ms: 0 };
    const { broker, sent } = await open(8, ahead);
    const held = await broker.dequeueMany(['service'], 4, 0);
    assert.equal(held.length, 4);
    sent.length = 0;
    ahead.ms = 100;
    const served: Promise<Delivery | undefined>[] = [];
    for (let i = 0; i < 3; i++) {
      served.push(broker.dequeue(['service'], 0));
      await settle();
    }
    assert.deepEqual(sent, [], 'three dequeues wait, four deliveries are held: no fetch yet');
    served.push(broker.dequeue(['service'], 0));
    const deliveries = await Promise.all(served);
    assert.deepEqual(deliveries.map((d) => d?.evaluation.id).sort(), ['e4', 'e5', 'e6', 'e7']);
    assert.deepEqual(sent, ['lease 4'], 'one fetch served the four');
    ahead.ms = 0;
    for (const d of [...held, ...deliveries]) await broker.ack(d!.evaluation.id, d!.token);
  });

  test('a fetch put off while the threads were busy goes at the next look once they run low, without another kick', async () => {
    const ahead = { ms: 0 };
    const { broker, sent, clock } = await open(3, ahead);
    const held = await broker.dequeueMany(['service'], 2, 0);
    sent.length = 0;
    ahead.ms = 100;
    const waiting = broker.dequeue(['service'], 0);
    await settle();
    assert.deepEqual(sent, []);
    ahead.ms = 0;
    clock.advance(10);
    assert.equal((await waiting)?.evaluation.id, 'e2');
    assert.deepEqual(sent, ['lease 1']);
    for (const d of held) await broker.ack(d.evaluation.id, d.token);
  });

  test('with nothing ahead, as when idle, a dequeue fetches at once and an ack goes at once', async () => {
    const ahead = { ms: 0 };
    const { broker, sent } = await open(2, ahead);
    const [held] = await broker.dequeueMany(['service'], 1, 0);
    sent.length = 0;
    const next = await broker.dequeue(['service'], 0);
    assert.equal(next?.evaluation.id, 'e1');
    await broker.ack(held!.evaluation.id, held!.token);
    assert.deepEqual(sent, ['lease 1', 'ack 1']);
    await broker.ack(next!.evaluation.id, next!.token);
  });

  test('while no thread will be free soon, a fetch waits; once one will, the next look serves every waiting dequeue', async () => {
    const ahead = { ms: 0 };
    const { broker, sent, clock } = await open(6, ahead);
    const free = { n: 0 };
    const asked: number[] = [];
    broker.paceBy!(
      () => ahead.ms,
      (withinMs) => {
        asked.push(withinMs);
        return free.n;
      },
    );
    sent.length = 0;
    const served: Array<Delivery | undefined> = [];
    const waiting = Array.from({ length: 5 }, () => broker.dequeue(['service'], 0).then((d) => void served.push(d)));
    await settle();
    assert.deepEqual(sent, [], 'five dequeues wait, no thread is free soon: no fetch');
    // The margin of the threads' work ahead: MIN_AHEAD_MS here, where the manual clock measures no round trip.
    assert.ok(asked.length > 0 && asked.every((ms) => ms === MIN_AHEAD_MS), `asked within MIN_AHEAD_MS: ${asked.join(', ')}`);
    clock.advance(10);
    await settle();
    assert.deepEqual(sent, [], 'the recheck finds none free either');
    free.n = 1;
    clock.advance(10);
    await Promise.all(waiting);
    assert.deepEqual(sent, ['lease 5'], 'one fetch for the five');
    assert.deepEqual(served.map((d) => d?.evaluation.id).sort(), ['e0', 'e1', 'e2', 'e3', 'e4']);
    for (const d of served) await broker.ack(d!.evaluation.id, d!.token);
  });

  test('a reading of the threads that throws or is not a count lets the fetch go', async () => {
    const ahead = { ms: 0 };
    const { broker } = await open(4, ahead);
    broker.paceBy!(() => ahead.ms, () => {
      throw new Error('the pool is gone');
    });
    const first = await Promise.all([broker.dequeue(['service'], 0), broker.dequeue(['service'], 0)]);
    broker.paceBy!(() => ahead.ms, () => Number.NaN);
    const second = await Promise.all([broker.dequeue(['service'], 0), broker.dequeue(['service'], 0)]);
    assert.deepEqual([...first, ...second].map((d) => d?.evaluation.id).sort(), ['e0', 'e1', 'e2', 'e3']);
    for (const d of [...first, ...second]) await broker.ack(d!.evaluation.id, d!.token);
    assert.throws(() => broker.paceBy!(() => 0, 'free' as never), { code: 'ERR_INVALID_ARGUMENT' });
  });
});
