/**
 * An idle enqueue wakes one waiting process (migration 11). In SQL: a fetch that finds fewer rows than it asked for
 * records its process as waiting for those types, and an enqueue that makes one evaluation ready names one such
 * process in its notification (the others get an empty payload: everyone). In the broker: a named process that no
 * longer waits passes the notification on, and another process waiting for it looks too after a short lead, in
 * case the named one died. Manual clocks that the test does not advance keep polls and leads out of the way,
 * except where a test advances one.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import type { Pool, PoolClient } from 'pg';
import { schemaNames } from '../../src/postgres/names.js';
import { adminPool, dropSchema, migratedSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { openRecordedBackend, type RecordedBackend } from './recorded-backend.js';
import { enqueueInSql } from './sql-enqueue.js';

requireDatabaseInCI();

describe('an idle enqueue wakes one waiting process', { skip: skipWithoutDatabase, timeout: 30_000 }, () => {
  const admin: Pool | undefined = skipWithoutDatabase === false ? adminPool() : undefined;
  const schemas: string[] = [];
  after(async () => {
    for (const s of schemas) await dropSchema(admin!, s);
    await admin?.end();
  });

  test('in SQL: a fetch that finds too little stands as waiting, and a single enqueue names one such process', async () => {
    const schema = schemaName('waiting');
    schemas.push(schema);
    await migratedSchema(schema);
    const S = `"${schema}"`;
    const listener: PoolClient = await admin!.connect();
    const payloads: string[] = [];
    let heard: () => void = () => undefined;
    listener.on('notification', (m) => {
      payloads.push(m.payload ?? '');
      heard();
    });
    await listener.query(`LISTEN "${schemaNames(schema).channels.ready}"`);
    /** Enqueues `ids` of type `type` in one call and answers the payload of the notification it sent. */
    const enqueue = async (ids: string[], type = 'place'): Promise<string> => {
      const before = payloads.length;
      const notified = new Promise<void>((resolve) => (heard = () => payloads.length > before && resolve()));
      await enqueueInSql(admin!, S, ids, type);
      await notified;
      return payloads[before]!;
    };
    const lease = async (holder: string, types: string[], max: number, waitMs = 60_000): Promise<number> =>
      (await admin!.query(`SELECT * FROM ${S}.lease_ready($1::text[], $2::int, 30000, $3::uuid, $4::float8)`, [types, max, holder, waitMs])).rowCount ?? 0;
    const standing = async (): Promise<string[]> =>
      (await admin!.query<{ holder: string }>(`SELECT holder FROM ${S}.waiting_dequeues WHERE until > clock_timestamp() ORDER BY holder`)).rows.map((r) => r.holder);
    try {
      const [low, high] = [randomUUID(), randomUUID()].sort() as [string, string];
      const other = randomUUID();
      assert.equal(await lease(high, ['place'], 4), 0);
      assert.equal(await lease(low, ['place'], 4), 0);
      assert.equal(await lease(other, ['other'], 4), 0);
      assert.deepEqual(await standing(), [low, high, other].sort());

      assert.equal(await enqueue(['e1']), low, 'one ready evaluation names one process waiting for its type');
      assert.equal(await enqueue(['e2']), low, 'the same one while it stands');
      assert.deepEqual(await standing(), [low, high, other].sort(), 'an enqueue only reads who stands');
      // Its threads have work ahead (no wait): it stops standing, and the next one is named.
      assert.equal(await lease(low, ['place'], 8, 0), 2);
      assert.equal(await enqueue(['e3']), high);
      assert.equal(await lease(high, ['place'], 8, 0), 1);
      assert.equal(await enqueue(['e4']), '', 'nobody waits for the type: everyone');
      assert.equal(await lease(low, ['place'], 8), 1, 'e4');
      assert.equal(await enqueue(['e5', 'e5b']), '', 'a batch goes to everyone, though a process stands for its type');
      assert.deepEqual(await standing(), [low, other].sort());

      // A fetch that leases all it asked for stops standing; one that finds fewer stands again.
      assert.equal(await lease(low, ['place'], 2), 2);
      assert.deepEqual(await standing(), [other]);
      assert.equal(await lease(low, ['place'], 8), 0);
      assert.deepEqual(await standing(), [low, other].sort());
      // Without a wait (its threads have work ahead) it stops standing too.
      assert.equal(await lease(low, ['place'], 8, 0), 0);
      assert.deepEqual(await standing(), [other]);
      // A row whose time ran out is passed over.
      assert.equal(await lease(high, ['place'], 4), 0);
      await admin!.query(`UPDATE ${S}.waiting_dequeues SET until = clock_timestamp() - interval '1 second' WHERE holder = $1`, [high]);
      assert.equal(await enqueue(['e6']), '', 'its time ran out');
      // A row whose time ran out a minute ago (its process crashed) goes with the next fetch that stands.
      await admin!.query(`UPDATE ${S}.waiting_dequeues SET until = clock_timestamp() - interval '2 minutes' WHERE holder = $1`, [high]);
      assert.equal(await lease(low, ['other'], 8), 0);
      const { rows: left } = await admin!.query<{ holder: string }>(`SELECT holder FROM ${S}.waiting_dequeues ORDER BY holder`);
      assert.deepEqual(left.map((r) => r.holder), [low, other].sort());
      // A call with four arguments gets the default wait (0), and it does not stand.
      const four = await admin!.query(`SELECT * FROM ${S}.lease_ready($1::text[], 8, 30000, $2::uuid)`, [['place'], low]);
      assert.deepEqual(four.rows.map((r: { id: string }) => r.id), ['e6']);
      assert.deepEqual(await standing(), [other]);
    } finally {
      listener.release();
    }
  });

  /** Two backends on one schema, each with one dequeue waiting for `service`, both standing as waiting. */
  async function twoWaiting(): Promise<{ schema: string; named: RecordedBackend; other: RecordedBackend; namedDequeue: AbortController; otherGot: Promise<unknown> }> {
    const schema = schemaName('waiting');
    schemas.push(schema);
    // A long poll interval: the rows stand for two of them in database time, whatever the manual clocks say.
    const a = await openRecordedBackend(schema, 600_000, 60_000);
    const b = await openRecordedBackend(schema, 600_000, 60_000);
    opened.push(a, b);
    const controllers = [new AbortController(), new AbortController()];
    const got = [a, b].map((r, i) => r.backend.broker.dequeue(['service'], 600_000, controllers[i]!.signal).catch((error: unknown) => error));
    // Both fetched and found nothing: both stand.
    while ((await admin!.query(`SELECT count(*)::int AS n FROM "${schema}".waiting_dequeues`)).rows[0].n < 2) await new Promise((r) => setImmediate(r));
    const first = [a, b].sort((x, y) => (x.backend.nodeId < y.backend.nodeId ? -1 : 1))[0]!;
    const i = first === a ? 0 : 1;
    return { schema, named: first, other: first === a ? b : a, namedDequeue: controllers[i]!, otherGot: got[1 - i]! };
  }
  const opened: RecordedBackend[] = [];
  after(async () => {
    for (const r of opened) {
      await r.backend.close();
      await r.pool.end();
    }
  });

  test('a named process that no longer waits passes the notification on to everyone', async () => {
    const { schema, named, other, namedDequeue, otherGot } = await twoWaiting();
    // The named one stops waiting; its row still stands, so the next enqueue names it.
    namedDequeue.abort();
    await named.backend.broker.enqueue({ id: 'passed-on', jobId: 'job-p', type: 'service' }).accepted;
    // Neither clock moves, so no poll and no lead runs: only the passed-on notification can reach the other.
    const delivery = (await otherGot) as { evaluation: { id: string } } | undefined;
    assert.equal(delivery?.evaluation.id, 'passed-on');
    assert.equal(other.clock.now(), 1_000_000);
    // It stopped standing with that: the next enqueue does not name it again.
    await named.backend.broker.idle();
    const { rows } = await admin!.query<{ holder: string }>(`SELECT holder FROM "${schema}".waiting_dequeues`);
    assert.ok(!rows.some((r) => r.holder === named.backend.nodeId), 'the named process no longer stands');
  });

  test('the others look after their lead when the named process does not take it', async () => {
    const { schema, other, otherGot } = await twoWaiting();
    // A process that stands first and never answers (it died after its last fetch): every single enqueue names it.
    await admin!.query(
      `INSERT INTO "${schema}".waiting_dequeues (holder, types, until) VALUES ('00000000-0000-4000-8000-000000000000', '{service}', clock_timestamp() + interval '1 minute')`,
    );
    let delivery: { evaluation: { id: string } } | undefined;
    void otherGot.then((d) => (delivery = d as typeof delivery));
    const leadArmed = other.clock.nextArmed();
    await enqueueInSql(admin!, `"${schema}"`, ['looked-for'], 'service');
    // The other hears a notification naming someone else and arms its lead (nothing else arms a timer on a clock
    // that does not move): wait for that timer.
    await leadArmed;
    assert.equal(delivery, undefined, 'not before the lead');
    other.clock.advance(50);
    assert.equal(((await otherGot) as { evaluation: { id: string } }).evaluation.id, 'looked-for');
  });
});
