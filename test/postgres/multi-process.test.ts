/**
 * Three engine processes on one database, nothing lost on kill -9: real child processes, a real PostgreSQL.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PostgresBackend } from '../../src/postgres/backend.js';
import { openBackend } from './backend-harness.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { EngineProcess, until } from './processes.js';

requireDatabaseInCI();

const TOTAL = 20_000;
const NACK_TIMEOUT_MS = 3_000;
const broker = { nackTimeoutMs: NACK_TIMEOUT_MS, initialNackDelayMs: 0, subsequentNackDelayMs: 0, deliveryLimit: 5 };

describe('three engine processes, one killed with SIGKILL a third of the way', { skip: skipWithoutDatabase, timeout: 600_000 }, () => {
  const schema = schemaName('mp');
  const admin = skipWithoutDatabase === false ? adminPool() : undefined;
  let client: PostgresBackend;
  const children: EngineProcess[] = [];

  before(async () => {
    // The enqueuing client: a backend of its own (no workers), like a web process in front of the engines.
    client = await openBackend({ schema, tables: ['records'], broker: { ...broker, knownTypes: ['create'] } });
    for (const name of ['one', 'two', 'three']) children.push(await EngineProcess.start({ name, url: databaseUrl!, schema, broker }));
  });

  after(async () => {
    await Promise.allSettled(children.map((c) => c.stop()));
    await client?.close();
    if (admin !== undefined) {
      await dropSchema(admin, schema);
      await admin.end();
    }
  });

  test('every record exactly once, nothing left ready or unacked, the dead process’s deliveries redelivered within nackTimeoutMs + 1 s', async () => {
    const S = `"${schema}"`;
    const handles = [];
    for (let i = 0; i < TOTAL; i++) handles.push(client.broker.enqueue({ id: `e${i}`, type: 'create', payload: { key: `r${i}` } }));
    await Promise.all(handles.map((h) => h.accepted));

    const count = async (): Promise<number> => (await admin!.query(`SELECT count(*)::int AS n FROM ${S}.state_records WHERE tbl = 'records'`)).rows[0].n;
    await until('a third of the records', 300_000, async () => ((await count()) >= TOTAL / 3 ? true : undefined));
    const victim = children[2]!;
    victim.kill9();
    const killedAt = Date.now();
    const { signal } = await victim.exited;
    assert.equal(signal, 'SIGKILL');
    const held: string[] = (await admin!.query(`SELECT id FROM ${S}.evals WHERE holder = $1 AND state = 'unacked'`, [victim.nodeId])).rows.map((r: { id: string }) => r.id);
    assert.ok(held.length > 0, 'the killed process held deliveries when it died');

    // When each of them left the dead process (reaped and delivered to another, or done).
    const redeliveredAt = new Map<string, number>();
    await until('the dead process’s deliveries to be redelivered', 60_000, async () => {
      const { rows } = await admin!.query(`SELECT id FROM ${S}.evals WHERE id = ANY($1) AND (state <> 'unacked' OR holder IS DISTINCT FROM $2)`, [held, victim.nodeId]);
      const now = Date.now();
      for (const { id } of rows as { id: string }[]) if (!redeliveredAt.has(id)) redeliveredAt.set(id, now);
      return redeliveredAt.size === held.length ? true : undefined;
    }, 10);
    const latest = Math.max(...redeliveredAt.values()) - killedAt;
    assert.ok(latest <= NACK_TIMEOUT_MS + 1_000, `redelivered ${latest} ms after the kill (nackTimeoutMs ${NACK_TIMEOUT_MS})`);

    await until('every record', 300_000, async () => ((await count()) >= TOTAL ? true : undefined), 100);
    // Every evaluation acked (in its plan's commit), none left anywhere else.
    await until('every evaluation to be acked', 30_000, async () => {
      const { rows } = await admin!.query(`SELECT count(*)::int AS n FROM ${S}.evals WHERE state = 'acked'`);
      return rows[0].n === TOTAL ? true : undefined;
    });
    const states = (await admin!.query(`SELECT state, count(*)::int AS n FROM ${S}.evals GROUP BY state`)).rows;
    assert.deepEqual(states, [{ state: 'acked', n: TOTAL }]);
    const stats = await client.broker.stats();
    assert.deepEqual({ ...stats, byScheduler: undefined }, { totalReady: 0, totalUnacked: 0, totalPending: 0, totalWaiting: 0, totalCancelable: 0, totalFailed: 0, byScheduler: undefined });

    // Exactly once: TOTAL records, each written by one commit and never again, and TOTAL commits in all.
    const records = (await admin!.query(`SELECT count(*)::int AS n, count(*) FILTER (WHERE create_index <> modify_index)::int AS rewritten FROM ${S}.state_records`)).rows[0];
    assert.deepEqual(records, { n: TOTAL, rewritten: 0 });
    const log = (await admin!.query(`SELECT count(*)::int AS n, min(index)::int AS lo, max(index)::int AS hi FROM ${S}.state_log`)).rows[0];
    assert.deepEqual(log, { n: TOTAL, lo: 1, hi: TOTAL }, 'one gap-free log entry per record');
    const counter = (await admin!.query(`SELECT index::int AS i FROM ${S}.state_counter`)).rows[0].i;
    assert.equal(counter, TOTAL);
    // The outcomes reached the enqueuing process, which ran none of them.
    const outcomes = await Promise.all(handles.slice(0, 200).map((h) => h.done));
    assert.ok(outcomes.every((o, i) => o.status === 'acked' && o.value === `r${i}` && o.index > 0));
  });
});
