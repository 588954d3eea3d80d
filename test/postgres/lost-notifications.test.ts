/**
 * Notifications are hints; polling is the backstop, and a lost notification must cost at most a poll interval, never
 * a delivery. The engine process here reaches the database through a proxy that drops every NotificationResponse
 * (LISTEN succeeds, nothing is ever heard), and through PgBouncer in transaction pooling, where the same happens
 * (when TICKPOOL_TEST_PGBOUNCER_URL names one: `.ci/run` starts it with scripts/test-pgbouncer.sh). An idle enqueue
 * leases its evaluation to that waiting process and tells it in a notification it never hears; the process's next
 * poll finds the lease and takes it, its delivery count unchanged. With `deliveryLimit: 1`, a lease left to run out
 * would send the evaluation to `_failed` unrun: every one must be acked at its first delivery instead.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openBackend } from './backend-harness.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { EngineProcess, until } from './processes.js';
import { Partition } from './proxy.js';

requireDatabaseInCI();

const broker = { nackTimeoutMs: 3_000, initialNackDelayMs: 0, subsequentNackDelayMs: 0, deliveryLimit: 1 };

const pgbouncerUrl = process.env['TICKPOOL_TEST_PGBOUNCER_URL'] || undefined;
const NO_PGBOUNCER = 'set TICKPOOL_TEST_PGBOUNCER_URL to run this through PgBouncer (eval "$(bash scripts/test-pgbouncer.sh start)" starts one)';

interface Route {
  readonly name: string;
  readonly skip: string | false;
  /** The URL the engine process connects to, and how to take the route down afterwards. */
  readonly open: () => Promise<{ url: string; close: () => Promise<void> }>;
}

const routes: readonly Route[] = [
  {
    name: 'a proxy that drops every notification',
    skip: skipWithoutDatabase,
    open: async () => {
      const partition = new Partition(Number(new URL(databaseUrl!).port), { dropNotifications: true });
      const url = new URL(databaseUrl!);
      url.port = String(await partition.port);
      return { url: url.href, close: () => partition.close() };
    },
  },
  {
    name: 'PgBouncer in transaction pooling',
    // Under CI the pooler is part of the run (.ci/run starts it): its absence fails there, as the database's does.
    skip: skipWithoutDatabase !== false ? skipWithoutDatabase : pgbouncerUrl === undefined && process.env['CI'] !== 'true' ? NO_PGBOUNCER : false,
    open: () => {
      assert.ok(pgbouncerUrl !== undefined, `CI must run this through PgBouncer: ${NO_PGBOUNCER}`);
      return Promise.resolve({ url: pgbouncerUrl, close: () => Promise.resolve() });
    },
  },
];

for (const route of routes) test(`behind ${route.name}, each idle enqueue offered to the waiting process runs at its first delivery`, { skip: route.skip, timeout: 120_000 }, async () => {
  const schema = schemaName('lostnote');
  const admin = adminPool();
  const S = `"${schema}"`;
  const { url, close } = await route.open();
  const client = await openBackend({ schema, tables: ['records'], broker: { ...broker, knownTypes: ['create'] } });
  const engine = await EngineProcess.start({ name: 'deaf', url, schema, broker });
  try {
    let offered = 0;
    for (let i = 0; i < 5; i++) {
      // The engine process stands as waiting with offers (its last fetch found nothing): the enqueue will offer to it.
      await until('the engine process standing for offers', 30_000, async () => {
        const { rows } = await admin.query(`SELECT 1 FROM ${S}.waiting_dequeues WHERE holder = $1 AND offer_channel IS NOT NULL AND until > clock_timestamp()`, [engine.nodeId]);
        return rows.length > 0 ? true : undefined;
      }, 5);
      const handle = client.broker.enqueue({ id: `idle${i}`, type: 'create', payload: { key: `r${i}` } });
      await handle.accepted;
      const { rows } = await admin.query<{ holder: string | null }>(`SELECT holder FROM ${S}.evals WHERE id = $1`, [`idle${i}`]);
      if (rows[0]?.holder === engine.nodeId) offered++;
      const outcome = await handle.done;
      assert.deepEqual({ status: outcome.status, deliveries: outcome.deliveries, value: outcome.value }, { status: 'acked', deliveries: 1, value: `r${i}` }, `idle${i}`);
    }
    assert.ok(offered > 0, 'at least one enqueue went as an offer the process never heard');
    assert.equal((await admin.query(`SELECT count(*)::int AS n FROM ${S}.evals WHERE queue = '_failed'`)).rows[0].n, 0, 'nothing dead-lettered');
  } finally {
    await engine.stop();
    await client.close();
    await close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});
