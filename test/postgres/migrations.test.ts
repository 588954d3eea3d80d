import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { pino } from 'pino';
import { BackendUnavailableError, SchemaVersionError } from '../../src/errors.js';
import { Database } from '../../src/postgres/database.js';
import { migrate, migrations, SCHEMA_VERSION } from '../../src/postgres/migrate.js';
import { schemaNames } from '../../src/postgres/names.js';
import { adminPool, databaseUrl, dropSchema, migratedSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { describeSchema } from './schema-dump.js';

/** The broker's per-call functions, which plan their statements once per session. */
const GENERIC_PLAN_FUNCTIONS = ['enqueue', 'lease_ready', 'ack', 'ack_many', 'ack_fenced', 'nack', 'fail', 'remove'];
const DUMP = new URL('../../../test/postgres/schema.dump', import.meta.url);

requireDatabaseInCI();
const silent = pino({ level: 'silent' });
const database = (): Database =>
  new Database({ connectionString: databaseUrl, pool: undefined, applicationName: 'tickpool-test', onIdleError: (e) => silent.warn(e) });

describe('migrations', { skip: skipWithoutDatabase }, () => {
  const admin = skipWithoutDatabase === false ? adminPool() : undefined;
  const schemas: string[] = [];
  after(async () => {
    for (const s of schemas) await dropSchema(admin!, s);
    await admin?.end();
  });

  test('the first start applies every migration, a second applies none, and the schema records its version', async () => {
    const schema = schemaName();
    schemas.push(schema);
    const db = database();
    try {
      assert.deepEqual(await migrate(db, schemaNames(schema)), migrations.map((m) => m.version));
      assert.deepEqual(await migrate(db, schemaNames(schema)), []);
      const { rows } = await admin!.query(`SELECT version, name FROM "${schema}".migrations ORDER BY version`);
      assert.deepEqual(rows, migrations.map((m) => ({ version: m.version, name: m.name })));
    } finally {
      await db.close();
    }
  });

  test('a fresh schema is exactly the checked-in dump (run `node scripts/schema-dump.mjs` after changing a migration)', async () => {
    const schema = schemaName();
    schemas.push(schema);
    await migratedSchema(schema);
    assert.equal(await describeSchema(admin!, schema), readFileSync(DUMP, 'utf8'));
  });

  test('a schema made by a pre-release tickpool is refused with ERR_SCHEMA_VERSION, saying to drop it, and nothing is changed', async () => {
    const schema = schemaName();
    schemas.push(schema);
    // What the pre-release runner left: a migration log without names, at its version 14, beside the schema's tables.
    await admin!.query(`CREATE SCHEMA "${schema}"`);
    await admin!.query(`CREATE TABLE "${schema}".migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    await admin!.query(`INSERT INTO "${schema}".migrations (version) SELECT generate_series(1, 14)`);
    await admin!.query(`CREATE TABLE "${schema}".evals (id text PRIMARY KEY)`);
    const db = database();
    try {
      await assert.rejects(migrate(db, schemaNames(schema)), (e: unknown) =>
        e instanceof SchemaVersionError && e.code === 'ERR_SCHEMA_VERSION' && e.details?.['reason'] === 'pre-release' && e.details['found'] === 14
        && e.message.includes(`DROP SCHEMA "${schema}" CASCADE`));
      const { rows } = await admin!.query(`SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1`, [schema]);
      assert.equal(rows[0].n, 2);
      const columns = await admin!.query(`SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'migrations' ORDER BY 1`, [schema]);
      assert.deepEqual(columns.rows.map((r: { column_name: string }) => r.column_name), ['applied_at', 'version']);
    } finally {
      await db.close();
    }
  });

  test('the broker\'s per-call functions plan their statements once per session, not at every call', async () => {
    const schema = schemaName();
    schemas.push(schema);
    await migratedSchema(schema);
    const { rows } = await admin!.query<{ proname: string; proconfig: string[] | null }>(
      `SELECT p.proname, p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = $1 AND p.proname = ANY($2::text[]) ORDER BY p.proname`,
      [schema, GENERIC_PLAN_FUNCTIONS],
    );
    // Each named function exists once (no overload left behind by a later migration) and carries the setting.
    assert.deepEqual(rows.map((r) => r.proname), [...GENERIC_PLAN_FUNCTIONS].sort());
    for (const row of rows) assert.deepEqual(row.proconfig, ['plan_cache_mode=force_generic_plan'], row.proname);
  });

  test('concurrent starts apply each migration once (the transaction-scoped lock serializes them)', async () => {
    const schema = schemaName();
    schemas.push(schema);
    const dbs = Array.from({ length: 6 }, database);
    try {
      const applied = await Promise.all(dbs.map((db) => migrate(db, schemaNames(schema))));
      assert.deepEqual(applied.flat().sort(), migrations.map((m) => m.version).sort());
      // No advisory lock outlives its transaction: an idle session holds none (a session-level lock would stay).
      const { rows } = await admin!.query(
        `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' AND a.state = 'idle'`,
      );
      assert.equal(rows[0].n, 0);
    } finally {
      await Promise.all(dbs.map((db) => db.close()));
    }
  });

  test('a schema migrated by newer code is refused with ERR_SCHEMA_VERSION, and nothing is changed', async () => {
    const schema = schemaName();
    schemas.push(schema);
    const db = database();
    try {
      await migrate(db, schemaNames(schema));
      await admin!.query(`INSERT INTO "${schema}".migrations (version, name) VALUES ($1, 'later')`, [SCHEMA_VERSION + 1]);
      await assert.rejects(migrate(db, schemaNames(schema)), (e: unknown) => e instanceof SchemaVersionError && e.code === 'ERR_SCHEMA_VERSION' && e.message.includes(`version ${SCHEMA_VERSION} or older`));
      const { rows } = await admin!.query(`SELECT max(version)::int AS v FROM "${schema}".migrations`);
      assert.equal(rows[0].v, SCHEMA_VERSION + 1);
    } finally {
      await db.close();
    }
  });
});

test('an unreachable database rejects with ERR_BACKEND_UNAVAILABLE', async () => {
  // Port 1 on loopback: nothing listens there, so the connection is refused at once.
  const db = new Database({ connectionString: 'postgres://u:p@127.0.0.1:1/none', pool: undefined, applicationName: 'tickpool-test', onIdleError: () => {} });
  try {
    await assert.rejects(migrate(db, schemaNames('tickpool')), (e: unknown) => e instanceof BackendUnavailableError && e.code === 'ERR_BACKEND_UNAVAILABLE');
  } finally {
    await db.close();
  }
});
