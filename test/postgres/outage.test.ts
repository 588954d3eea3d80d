/**
 * A database outage shorter than the nack timeout, in the middle of a load: an engine process (a real child) loses
 * every connection at once and has each new one refused for a while. Plan commits, acks and nacks in flight fail.
 * Once the database is back, every delivery must end (acked, or nacked and redelivered): none may keep its lease
 * renewed with nobody working on it. Measured by leases, not by time: a delivery whose lease is renewed twice after
 * the return has outlived `nackTimeoutMs` since the database came back, which the cut process's own work (a few ms
 * per evaluation) never does.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openBackend } from './backend-harness.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { EngineProcess, until } from './processes.js';
import { Partition } from './proxy.js';

requireDatabaseInCI();

const TOTAL = 600;
const broker = { nackTimeoutMs: 3_000, initialNackDelayMs: 0, subsequentNackDelayMs: 0, deliveryLimit: 5 };

test('after a short outage every delivery ends: none keeps a lease renewed once the database is back, and every evaluation is acked once', { skip: skipWithoutDatabase, timeout: 240_000 }, async () => {
  const schema = schemaName('outage');
  const admin = adminPool();
  const S = `"${schema}"`;
  const partition = new Partition(Number(new URL(databaseUrl!).port));
  const proxied = new URL(databaseUrl!);
  proxied.port = String(await partition.port);
  // The enqueuing client talks to the database directly; the engine process only through the proxy.
  const client = await openBackend({ schema, tables: ['records'], broker: { ...broker, knownTypes: ['create'] } });
  const engine = await EngineProcess.start({ name: 'cut', url: proxied.href, schema, broker });
  try {
    const handles = [];
    for (let i = 0; i < TOTAL; i++) handles.push(client.broker.enqueue({ id: `e${i}`, type: 'create', payload: { key: `r${i}` } }));
    await Promise.all(handles.map((h) => h.accepted));
    const records = async (): Promise<number> => (await admin.query(`SELECT count(*)::int AS n FROM ${S}.state_records`)).rows[0].n;
    await until('a sixth of the records', 120_000, async () => ((await records()) >= TOTAL / 6 ? true : undefined), 5);

    // The outage: everything in flight breaks, and the process keeps trying (commits, nacks, fetches, the listener).
    partition.sever();
    await partition.refusals(20);
    partition.heal();

    // From the return on: how often each delivery (its token) has had its lease moved on.
    const seen = new Map<string, { until: number; renewals: number; id: string }>();
    await until('every evaluation acked, or a delivery renewed past the outage', 180_000, async () => {
      const { rows } = await admin.query<{ id: string; token: string; until: number; acked: number }>(
        `SELECT id, token, extract(epoch FROM lease_until) * 1000 AS until, (SELECT count(*)::int FROM ${S}.evals WHERE state = 'acked') AS acked
           FROM ${S}.evals WHERE state = 'unacked'`,
      );
      for (const row of rows) {
        const last = seen.get(row.token);
        if (last === undefined) seen.set(row.token, { until: Number(row.until), renewals: 0, id: row.id });
        else if (Number(row.until) > last.until) seen.set(row.token, { until: Number(row.until), renewals: last.renewals + 1, id: row.id });
      }
      const stranded = [...seen.values()].filter((s) => s.renewals >= 2);
      assert.deepEqual(stranded.map((s) => s.id), [], 'deliveries whose leases were renewed twice after the database came back');
      const acked = rows[0]?.acked ?? (await admin.query(`SELECT count(*)::int AS n FROM ${S}.evals WHERE state = 'acked'`)).rows[0].n;
      return acked === TOTAL ? true : undefined;
    }, 20);

    // Nothing lost, nothing twice: each record written by one commit, every evaluation acked, none anywhere else.
    assert.deepEqual((await admin.query(`SELECT state, count(*)::int AS n FROM ${S}.evals GROUP BY state`)).rows, [{ state: 'acked', n: TOTAL }]);
    const written = (await admin.query(`SELECT count(*)::int AS n, count(*) FILTER (WHERE create_index <> modify_index)::int AS rewritten FROM ${S}.state_records`)).rows[0];
    assert.deepEqual(written, { n: TOTAL, rewritten: 0 });
    const outcomes = await Promise.all(handles.map((h) => h.done));
    assert.ok(outcomes.every((o, i) => o.status === 'acked' && o.value === `r${i}`));
    // The process itself holds nothing any more.
    assert.equal((await engine.idle()).processed >= TOTAL, true);
  } finally {
    partition.heal();
    await engine.stop();
    await client.close();
    await partition.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});
