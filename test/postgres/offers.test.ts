/**
 * An idle enqueue leases its evaluation to the waiting process it names and carries the delivery in the
 * notification (migration 12). In SQL: which enqueues offer, to whom, and what the row and the payload hold. In the
 * broker: the named process starts the offered delivery without a fetch of its own, and one that cannot start it
 * gives it back uncharged to the others. Manual clocks that the test does not advance keep polls and leads out of
 * the way: only a notification can deliver.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import type { PoolClient } from 'pg';
import { decodeValue, encodeValue } from '../../src/postgres/codec.js';
import { schemaNames } from '../../src/postgres/names.js';
import { MAX_OFFER_BODY_BYTES, migratedSchema, requireDatabaseInCI, skipWithoutDatabase } from './helpers.js';
import { kinds, openRecordedBackend, type RecordedBackend } from './recorded-backend.js';
import { suiteResources } from './suite-resources.js';
import { enqueueInSql } from './sql-enqueue.js';

requireDatabaseInCI();

interface EvalRow {
  state: string;
  holder: string | null;
  token: string | null;
  deliveries: number;
  lease_ms: number | null;
}

describe('an idle enqueue offers its evaluation to the waiting process it names', { skip: skipWithoutDatabase, timeout: 30_000 }, () => {
  const { admin, ...resources } = suiteResources();

  test('in SQL: a single ready enqueue is leased to the first process standing with offers, and the payload is the delivery', async () => {
    const schema = resources.schema('offers');
    await migratedSchema(schema);
    const S = `"${schema}"`;
    const listener: PoolClient = await admin!.connect();
    // Each process's offers come on a channel of its own, the rest on the schema's ready channel.
    const readyChannel = schemaNames(schema).channels.ready;
    const offerChannel = (holder: string): string => `${schema}_offer_${holder.slice(0, 8)}`;
    const notes: { channel: string; payload: string }[] = [];
    let heard: () => void = () => undefined;
    listener.on('notification', (m) => {
      notes.push({ channel: m.channel, payload: m.payload ?? '' });
      heard();
    });
    await listener.query(`LISTEN "${readyChannel}"`);
    const enqueue = async (ids: string[], pad = 0): Promise<{ channel: string; payload: string; states: string[] }> => {
      const before = notes.length;
      const notified = new Promise<void>((resolve) => (heard = () => notes.length > before && resolve()));
      const states = await enqueueInSql(admin!, S, ids, 'place', pad);
      await notified;
      return { ...notes[before]!, states };
    };
    const lease = async (holder: string, max: number, offers: boolean, leaseMs = 30_000): Promise<number> =>
      (
        await admin!.query(`SELECT * FROM ${S}.lease_ready($1::text[], $2::int, $3::float8, $4::uuid, 60000, $5)`, [
          ['place'],
          max,
          leaseMs,
          holder,
          offers ? offerChannel(holder) : null,
        ])
      ).rowCount ?? 0;
    const row = async (id: string): Promise<EvalRow> =>
      (
        await admin!.query<EvalRow>(
          `SELECT state, holder, token, deliveries, extract(epoch FROM lease_until - clock_timestamp()) * 1000 AS lease_ms FROM ${S}.evals WHERE id = $1`,
          [id],
        )
      ).rows[0]!;
    try {
      const [low, high] = [randomUUID(), randomUUID()].sort() as [string, string];
      assert.equal(await lease(high, 4, true, 45_000), 0);
      assert.equal(await lease(low, 4, true, 45_000), 0);
      await listener.query(`LISTEN "${offerChannel(low)}"`);
      await listener.query(`LISTEN "${offerChannel(high)}"`);

      const first = await enqueue(['o1']);
      assert.equal(first.channel, offerChannel(low), "on the offered process's own channel");
      assert.deepEqual(first.states, ['unacked'], 'the enqueue answers the state it wrote');
      const offer = JSON.parse(first.payload) as { offer: string; id: string; token: string; queue: string; body: string };
      assert.equal(offer.offer, low, 'to the first standing, as a named notification would be');
      assert.equal(offer.id, 'o1');
      assert.equal(offer.queue, 'place');
      assert.deepEqual(decodeValue(Buffer.from(offer.body, 'base64')), { id: 'o1', jobId: 'o1', type: 'place', priority: 50, });
      const o1 = await row('o1');
      assert.equal(o1.state, 'unacked');
      assert.equal(o1.holder, low);
      assert.equal(o1.token, offer.token);
      assert.equal(o1.deliveries, 1, 'an offer is a delivery');
      assert.ok(o1.lease_ms! > 40_000 && o1.lease_ms! <= 45_000, `the lease is the one the process asked for (${o1.lease_ms} ms left)`);

      // Another evaluation of the type is ready: leasing the new one first would break the queue's order.
      await admin!.query(`UPDATE ${S}.evals SET state = 'ready', token = NULL, holder = NULL, lease_until = NULL WHERE id = 'o1'`);
      const behind = await enqueue(['o2']);
      assert.equal(behind.payload, low, 'named, not offered, while another of its type is ready');
      assert.deepEqual(behind.states, ['ready']);
      assert.equal((await row('o2')).state, 'ready');
      assert.equal(await lease(low, 8, true, 45_000), 2);
      assert.equal(await lease(low, 8, true, 45_000), 0);

      assert.equal((await enqueue(['o3', 'o4'])).payload, '', 'a batch goes to everyone');
      assert.equal(await lease(low, 8, true, 45_000), 2);
      assert.equal(await lease(low, 8, true, 45_000), 0);

      const big = await enqueue(['o5'], MAX_OFFER_BODY_BYTES);
      assert.equal(big.payload, low, 'a body too big for a notification is named, not offered');
      assert.equal(await lease(low, 8, true, 45_000), 1);
      // A body that fits (it holds the id twice, as id and job), beside the id once more: over a notification's limit.
      const longId = `o-${'i'.repeat(2_400)}`;
      const long = await enqueue([longId]);
      assert.equal(long.payload, low, 'an offer too long for a notification: named, and the enqueue does not fail');
      assert.equal(await lease(low, 8, true, 45_000), 1);

      // The first standing process does not take offers (its fetch passed no offer channel): it is named.
      assert.equal(await lease(low, 8, false), 0);
      assert.equal((await enqueue(['o6'])).payload, low);
      assert.equal((await row('o6')).state, 'ready');
      assert.equal(await lease(low, 8, false), 1);

      // A fresh id whose job's slot is taken goes the slow path: pending, neither offered nor notified.
      assert.equal(await lease(low, 8, true, 45_000), 0);
      await enqueueInSql(admin!, S, ['o7'], 'place');
      const heldSlot = await admin!.query(
        `SELECT * FROM ${S}.enqueue('{o8}', '{default}', '{o7}', '{place}', '{50}', '{0}', '{0}', '{NULL}', '{NULL}', $1::bytea[], '{NULL}', $2::uuid)`,
        [[encodeValue({ id: 'o8', jobId: 'o7', type: 'place', priority: 50 })], randomUUID()],
      );
      assert.equal(heldSlot.rows[0].state, 'pending');
      assert.equal((await row('o8')).holder, null);
    } finally {
      listener.release();
    }
  });

  /** Two backends on one schema, each with one dequeue waiting for `service`, both standing as waiting. */
  async function twoWaiting(): Promise<{ schema: string; first: RecordedBackend; second: RecordedBackend; firstDequeue: AbortController; got: Promise<unknown>[] }> {
    const schema = resources.schema('offers');
    const a = await resources.open(schema, 600_000, 60_000);
    const b = await resources.open(schema, 600_000, 60_000);
    const [first, second] = [a, b].sort((x, y) => (x.backend.nodeId < y.backend.nodeId ? -1 : 1)) as [RecordedBackend, RecordedBackend];
    const firstDequeue = new AbortController();
    const got = [first.backend.broker.dequeue(['service'], 600_000, firstDequeue.signal), second.backend.broker.dequeue(['service'], 600_000)].map((p) =>
      p.catch((error: unknown) => error),
    );
    while ((await admin!.query(`SELECT count(*)::int AS n FROM "${schema}".waiting_dequeues WHERE offer_ms IS NOT NULL`)).rows[0].n < 2) {
      await new Promise((r) => setImmediate(r));
    }
    return { schema, first, second, firstDequeue, got };
  }

  test('the named process starts the offered delivery without a fetch, and acks it with the offered token', async () => {
    const { schema, first, second, got } = await twoWaiting();
    const fetchesBefore = kinds(first.sent).filter((k) => k === 'lease').length;
    await second.backend.broker.enqueue({ id: 'offered', jobId: 'job-o', type: 'service', payload: { n: 7 } }).accepted;
    const delivery = (await got[0]) as { evaluation: { id: string; payload: unknown }; token: string };
    assert.equal(delivery.evaluation.id, 'offered');
    assert.deepEqual(delivery.evaluation.payload, { n: 7 });
    assert.equal(kinds(first.sent).filter((k) => k === 'lease').length, fetchesBefore, 'no fetch: the notification carried it');
    const { rows } = await admin!.query(`SELECT holder, token, deliveries FROM "${schema}".evals WHERE id = 'offered'`);
    assert.deepEqual(rows[0], { holder: first.backend.nodeId, token: delivery.token, deliveries: 1 });
    await first.backend.broker.ack('offered', delivery.token);
    assert.equal((await admin!.query(`SELECT state FROM "${schema}".evals WHERE id = 'offered'`)).rows[0].state, 'acked');
  });

  test('a named process that cannot start the offer gives it back uncharged, and another process starts it', async () => {
    const { schema, first, second, firstDequeue, got } = await twoWaiting();
    // The first stops waiting; its row still stands (with offers), so the next enqueue offers to it.
    firstDequeue.abort();
    await second.backend.broker.enqueue({ id: 'declined', jobId: 'job-d', type: 'service' }).accepted;
    const delivery = (await got[1]) as { evaluation: { id: string }; token: string };
    assert.equal(delivery.evaluation.id, 'declined');
    assert.equal(second.clock.now(), 1_000_000, 'no poll and no lead ran: the declined offer was passed on');
    const { rows } = await admin!.query(`SELECT holder, deliveries FROM "${schema}".evals WHERE id = 'declined'`);
    assert.deepEqual(rows[0], { holder: second.backend.nodeId, deliveries: 1 }, 'the declined offer was not charged');
    await first.backend.broker.idle();
    const standing = await admin!.query<{ holder: string }>(`SELECT holder FROM "${schema}".waiting_dequeues`);
    assert.ok(!standing.rows.some((r) => r.holder === first.backend.nodeId), 'the process that declined stands no more');
  });

  test('a process that stops waits for the enqueue offering to it, then gives back the offer it did not hear', async () => {
    const schema = resources.schema('offers');
    const r = await openRecordedBackend(schema, 600_000, 60_000);
    void r.backend.broker.dequeue(['service'], 600_000).catch(() => undefined);
    await r.backend.broker.idle();
    const enqueuing = await admin!.connect();
    try {
      await enqueuing.query('BEGIN');
      assert.deepEqual(await enqueueInSql(enqueuing, `"${schema}"`, ['late'], 'service'), ['unacked'], 'offered, not committed yet');
      const closed = r.backend.close();
      // Its withdrawal waits for that enqueue (which holds its row's key-share lock).
      const waitingForLock = async (): Promise<boolean> =>
        (
          await admin!.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
            [`DELETE FROM "${schema}".waiting_dequeues%`],
          )
        ).rows[0].n > 0;
      let done = false;
      void closed.then(() => (done = true));
      // Each look is a round trip to the database: the loop waits on it, not on a timer.
      while (!done && !(await waitingForLock()));
      assert.equal(done, false, 'the close waited for the enqueue that chose it');
      // Its listener goes too, so that the offer is not heard: only the look after the withdrawal can find it.
      const retryArmed = r.clock.nextArmed();
      await admin!.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, [
        `tickpool ${r.backend.nodeId}`,
      ]);
      await retryArmed;
      await enqueuing.query('COMMIT');
      await closed;
    } finally {
      enqueuing.release();
      await r.pool.end();
    }
    const { rows } = await admin!.query(`SELECT state, holder, deliveries FROM "${schema}".evals WHERE id = 'late'`);
    assert.deepEqual(rows[0], { state: 'ready', holder: null, deliveries: 0 }, 'back, uncharged, for another process');
  });

  test('an offer sent while the listener was away goes back, uncharged, when it reconnects', async () => {
    const schema = resources.schema('offers');
    const r = await resources.open(schema, 600_000, 60_000);
    const got = r.backend.broker.dequeue(['service'], 600_000);
    await r.backend.broker.idle();
    const retryArmed = r.clock.nextArmed();
    const { rows: cut } = await admin!.query<{ ok: boolean }>(
      `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`,
      [`tickpool ${r.backend.nodeId}`],
    );
    assert.deepEqual(cut, [{ ok: true }]);
    // The listener saw its connection go and armed its retry (nothing else arms a timer on a clock that does not move).
    await retryArmed;
    // Its row still stands: the enqueue leases to it, and the offer goes unheard.
    assert.deepEqual(await enqueueInSql(admin!, `"${schema}"`, ['unheard'], 'service'), ['unacked']);
    r.clock.advance(50);
    const delivery = (await got) as { evaluation: { id: string }; token: string };
    assert.equal(delivery.evaluation.id, 'unheard');
    const { rows } = await admin!.query(`SELECT token, deliveries FROM "${schema}".evals WHERE id = 'unheard'`);
    assert.deepEqual(rows[0], { token: delivery.token, deliveries: 1 }, 'given back uncharged, then fetched');
  });
});
