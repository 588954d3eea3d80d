/**
 * Three engine processes on one database, nothing lost on kill -9: real child processes, a real PostgreSQL.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DeliveryLimitError } from '../../src/errors.js';
import type { PostgresBackend } from '../../src/postgres/backend.js';
import { openBackend } from './backend-harness.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { EngineProcess, until } from './processes.js';
import { Partition } from './proxy.js';

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

  test('every record exactly once, nothing left ready or unacked, the dead process’s deliveries redelivered once their leases (at most nackTimeoutMs) end', async () => {
    const S = `"${schema}"`;
    const handles = [];
    for (let i = 0; i < TOTAL; i++) handles.push(client.broker.enqueue({ id: `e${i}`, type: 'create', payload: { key: `r${i}` } }));
    await Promise.all(handles.map((h) => h.accepted));

    const count = async (): Promise<number> => (await admin!.query(`SELECT count(*)::int AS n FROM ${S}.state_records WHERE tbl = 'records'`)).rows[0].n;
    await until('a third of the records', 300_000, async () => ((await count()) >= TOTAL / 3 ? true : undefined));
    const victim = children[2]!;
    victim.kill9();
    const { signal } = await victim.exited;
    assert.equal(signal, 'SIGKILL');
    // What the dead process held, and whether each lease ends within nackTimeoutMs of now (database time): the
    // bound on its redelivery is in the rows, not in how fast this machine runs the test.
    const { rows: heldRows } = await admin!.query<{ id: string; deliveries: number; within: boolean }>(
      `SELECT id, deliveries, lease_until <= now() + $2 * interval '1 millisecond' AS within FROM ${S}.evals WHERE holder = $1 AND state = 'unacked'`,
      [victim.nodeId, NACK_TIMEOUT_MS],
    );
    const held = heldRows.map((r) => r.id);
    assert.ok(held.length > 0, 'the killed process held deliveries when it died');
    assert.deepEqual(heldRows.filter((r) => !r.within).map((r) => r.id), [], `every lease ends within nackTimeoutMs (${NACK_TIMEOUT_MS} ms)`);

    // Each left the dead process as a nack timeout (a later delivery elsewhere, or done after one).
    await until('the dead process’s deliveries to be redelivered', 60_000, async () => {
      const { rows } = await admin!.query(`SELECT count(*)::int AS n FROM ${S}.evals WHERE id = ANY($1) AND (state <> 'unacked' OR holder IS DISTINCT FROM $2)`, [held, victim.nodeId]);
      return rows[0].n === held.length ? true : undefined;
    }, 10);
    const { rows: after } = await admin!.query<{ id: string; deliveries: number; reason: string | null }>(
      `SELECT id, deliveries, last_reason->>'code' AS reason FROM ${S}.evals WHERE id = ANY($1)`,
      [held],
    );
    for (const row of after) assert.equal(row.reason, 'ERR_NACK_TIMEOUT_REACHED', `${row.id} left the dead process by its lease`);

    await until('every record', 300_000, async () => ((await count()) >= TOTAL ? true : undefined), 100);
    // Every evaluation acked (in its plan's commit), none left anywhere else.
    await until('every evaluation to be acked', 30_000, async () => {
      const { rows } = await admin!.query(`SELECT count(*)::int AS n FROM ${S}.evals WHERE state = 'acked'`);
      return rows[0].n === TOTAL ? true : undefined;
    });
    // The dead process's were delivered again before they were acked.
    const { rows: redelivered } = await admin!.query<{ id: string; deliveries: number }>(`SELECT id, deliveries FROM ${S}.evals WHERE id = ANY($1)`, [held]);
    const before = new Map(heldRows.map((r) => [r.id, r.deliveries]));
    assert.deepEqual(redelivered.filter((r) => !(r.deliveries > before.get(r.id)!)).map((r) => r.id), []);
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

describe('a poison evaluation that takes its process down on every delivery', { skip: skipWithoutDatabase, timeout: 300_000 }, () => {
  test('ends in _failed with ERR_DELIVERY_LIMIT after deliveryLimit deliveries, each one a dead process', async () => {
    const schema = schemaName('poison');
    const admin = adminPool();
    const limit = 3;
    const poisonBroker = { nackTimeoutMs: 1_500, initialNackDelayMs: 0, subsequentNackDelayMs: 0, deliveryLimit: limit };
    const client = await openBackend({ schema, tables: ['records'], broker: { ...poisonBroker, knownTypes: ['poison'] } });
    const live = new Set<EngineProcess>();
    let deaths = 0;
    let spawned = 0;
    let stopping = false;
    // Two engines at all times: each one that dies is replaced, as an orchestrator would.
    const spawn = async (): Promise<void> => {
      const child = await EngineProcess.start({ name: `p${++spawned}`, url: databaseUrl!, schema, broker: poisonBroker });
      live.add(child);
      void child.exited.then(({ signal }) => {
        live.delete(child);
        if (signal === 'SIGKILL') deaths++;
        if (!stopping && spawned < 10) void spawn();
      });
    };
    try {
      await spawn();
      await spawn();
      const handle = client.broker.enqueue({ id: 'poison', type: 'poison' });
      await handle.accepted;
      const failure = await handle.done.then(
        () => assert.fail('the poison evaluation was acked'),
        (error: unknown) => error,
      );
      assert.ok(failure instanceof DeliveryLimitError, String(failure));
      assert.equal(failure.code, 'ERR_DELIVERY_LIMIT');
      const { rows } = await admin.query(`SELECT state, queue, deliveries FROM "${schema}".evals WHERE id = 'poison'`);
      assert.deepEqual(rows, [{ state: 'ready', queue: '_failed', deliveries: limit }]);
      assert.equal(deaths, limit, 'one dead process per delivery');
    } finally {
      stopping = true;
      await Promise.allSettled([...live].map((c) => c.stop()));
      await client.close();
      await dropSchema(admin, schema);
      await admin.end();
    }
  });
});

describe('a process cut off from the database past its lease', { skip: skipWithoutDatabase, timeout: 300_000 }, () => {
  test('commits nothing afterwards: its plan meets the fence in the commit, after another process redelivered and committed', async () => {
    const schema = schemaName('cut');
    const admin = adminPool();
    const cutBroker = { nackTimeoutMs: 1_500, initialNackDelayMs: 0, subsequentNackDelayMs: 0, deliveryLimit: 5 };
    const client = await openBackend({ schema, tables: ['records'], broker: { ...cutBroker, knownTypes: ['held'] } });
    const target = new URL(databaseUrl!);
    const partition = new Partition(Number(target.port));
    const proxied = new URL(databaseUrl!);
    proxied.port = String(await partition.port);
    const gate = join(mkdtempSync(join(tmpdir(), 'tickpool-gate-')), 'open');
    const children: EngineProcess[] = [];
    const S = `"${schema}"`;
    try {
      const cut = await EngineProcess.start({ name: 'cut', url: proxied.href, schema, broker: cutBroker, gate });
      children.push(cut);
      await client.broker.enqueue({ id: 'h1', type: 'held', payload: { key: 'k' } }).accepted;
      await until('the cut-off process to hold the evaluation', 30_000, async () => {
        const { rows } = await admin.query(`SELECT holder FROM ${S}.evals WHERE id = 'h1' AND state = 'unacked'`);
        return rows[0]?.holder === cut.nodeId ? true : undefined;
      });
      partition.hold();
      // Another process takes over once the lease has ended (nothing of the cut process reaches the database).
      children.push(await EngineProcess.start({ name: 'other', url: databaseUrl!, schema, broker: cutBroker }));
      await until('the other process to commit the record', 30_000, async () => {
        const { rows } = await admin.query(`SELECT r.key FROM ${S}.state_records r JOIN ${S}.evals e ON e.id = 'h1' AND e.state = 'acked' WHERE r.key = 'k'`);
        return rows.length === 1 ? true : undefined;
      });
      // The cut process's scheduler now returns its plan, which waits in the partition on its way to the database.
      writeFileSync(gate, '');
      await cut.activity('submitting');
      partition.release();
      const report = await cut.idle();
      const refused = Object.entries(report.refusals).filter(([key]) => key.startsWith('submit:') || key.startsWith('ack:'));
      assert.ok(refused.length > 0, `the cut process's plan was refused: ${JSON.stringify(report.refusals)}`);
      const log = (await admin.query(`SELECT count(*)::int AS n FROM ${S}.state_log`)).rows[0].n;
      assert.equal(log, 1, 'one commit: the other process’s');
      const records = (await admin.query(`SELECT key, value FROM ${S}.state_records ORDER BY key`)).rows;
      assert.deepEqual(records.map((r: { key: string }) => r.key), ['k'], 'nothing of the cut process’s plan');
      const e = (await admin.query(`SELECT state, deliveries FROM ${S}.evals WHERE id = 'h1'`)).rows[0];
      assert.deepEqual(e, { state: 'acked', deliveries: 2 });
    } finally {
      partition.release();
      await Promise.allSettled(children.map((c) => c.stop()));
      await partition.close();
      await client.close();
      await dropSchema(admin, schema);
      await admin.end();
    }
  });
});
