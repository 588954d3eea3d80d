/**
 * The PostgreSQL tests' database. They run against a real PostgreSQL named by TICKPOOL_TEST_DATABASE_URL
 * (`eval "$(bash scripts/test-postgres.sh start)"` starts a throwaway one); without it they are skipped with a
 * message saying so, except under CI (CI=true), where a missing database fails the run. Each test gets a schema of
 * its own, dropped afterwards.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { Pool } from 'pg';
import { pino } from 'pino';
import { Database } from '../../src/postgres/database.js';
import { migrate } from '../../src/postgres/migrate.js';
import { schemaNames } from '../../src/postgres/names.js';

export const databaseUrl: string | undefined = process.env['TICKPOOL_TEST_DATABASE_URL'] || undefined;

const HOW = 'set TICKPOOL_TEST_DATABASE_URL to run the PostgreSQL tests (eval "$(bash scripts/test-postgres.sh start)" starts a throwaway PostgreSQL 15)';

/** `skip` for a `describe`/`test` that needs the database: false when there is one, the reason otherwise. */
export const skipWithoutDatabase: string | false = databaseUrl === undefined ? HOW : false;

/** Under CI a run without the database is a failure, not a skip (one test per file that uses the database). */
export function requireDatabaseInCI(): void {
  test('the PostgreSQL test database is configured', { skip: process.env['CI'] === 'true' ? false : skipWithoutDatabase === false ? false : HOW }, () => {
    assert.ok(databaseUrl !== undefined, `CI must run the PostgreSQL tests: ${HOW}`);
  });
}

/** The largest body an enqueue offers in a notification (`enqueue` in src/postgres/migrations/001_schema.sql). */
export const MAX_OFFER_BODY_BYTES = 5_000;

/** A fresh schema name, unique across processes and runs. */
export function schemaName(prefix = 't'): string {
  return `${prefix}_${process.pid}_${randomBytes(5).toString('hex')}`;
}

/** An admin pool of the test database, for setting up and looking at what the backend wrote. */
export function adminPool(): Pool {
  if (databaseUrl === undefined) throw new Error(HOW);
  return new Pool({ connectionString: databaseUrl, max: 4 });
}

/** Creates `schema` at the code's version, as a starting process would, with no backend left running on it. */
export async function migratedSchema(schema: string): Promise<void> {
  const silent = pino({ level: 'silent' });
  const db = new Database({ connectionString: databaseUrl, pool: undefined, applicationName: 'tickpool-test', onIdleError: (e) => silent.warn(e) });
  try {
    await migrate(db, schemaNames(schema));
  } finally {
    await db.close();
  }
}

/** Drops the schema (and everything in it). */
export async function dropSchema(pool: Pool, schema: string): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}
