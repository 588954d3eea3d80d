/**
 * Versioned, idempotent migrations. Every process runs `migrate()` at start; one transaction holds a
 * transaction-scoped advisory lock while it reads the version and applies what is missing, so concurrent starts
 * apply each migration once, and the lock is gone with the transaction (a session lock would outlive a crash of
 * its holder behind a pooler, and would fence nothing).
 */
import { SchemaVersionError } from '../errors.js';
import type { Database } from './database.js';
import type { SchemaNames } from './names.js';
import { ackRowsSchema } from './ack-rows-schema.js';
import { commitWritesSchema } from './commit-writes-schema.js';
import { dropLiveIndexSchema } from './drop-live-index-schema.js';
import { genericPlansSchema } from './generic-plans-schema.js';
import { leaseCommitSchema } from './lease-commit-schema.js';
import { leaseReadySchema } from './lease-ready-schema.js';
import { namedOutcomesSchema } from './named-outcomes-schema.js';
import { offerSchema } from './offer-schema.js';
import { originOutcomesSchema } from './origin-outcomes-schema.js';
import { outcomeIdsSchema } from './outcome-ids-schema.js';
import { schemaV1 } from './schema-v1.js';
import { shortHoldSchema } from './short-hold-schema.js';
import { runWritesSchema } from './tasks/run-writes-schema.js';
import { tasksSchema } from './tasks/schema.js';
import { waitingDequeuesSchema } from './waiting-dequeues-schema.js';
import { trimRunRowsSchema } from './tasks/trim-run-rows-schema.js';

export interface Migration {
  readonly version: number;
  readonly sql: (names: SchemaNames) => string;
}

export const migrations: readonly Migration[] = Object.freeze([
  { version: 1, sql: (n: SchemaNames) => schemaV1(n.S, n.K, n.channel) },
  { version: 2, sql: (n: SchemaNames) => tasksSchema(n.S, n.channel) },
  { version: 3, sql: (n: SchemaNames) => runWritesSchema(n.S) },
  { version: 4, sql: (n: SchemaNames) => ackRowsSchema(n.S, n.channel) + leaseReadySchema(n.S) },
  { version: 5, sql: (n: SchemaNames) => dropLiveIndexSchema(n.S) },
  { version: 6, sql: (n: SchemaNames) => commitWritesSchema(n.S, n.channel) },
  { version: 7, sql: (n: SchemaNames) => trimRunRowsSchema(n.S) },
  { version: 8, sql: (n: SchemaNames) => outcomeIdsSchema(n.S, n.channel) },
  { version: 9, sql: (n: SchemaNames) => namedOutcomesSchema(n.S, n.K, n.channel) },
  // The replaced lease_ready first: a CREATE OR REPLACE would drop the plan setting the second part gives it.
  { version: 10, sql: (n: SchemaNames) => leaseCommitSchema(n.S) + genericPlansSchema(n.schema) },
  { version: 11, sql: (n: SchemaNames) => waitingDequeuesSchema(n.schema, n.S, n.K, n.channel) },
  { version: 12, sql: (n: SchemaNames) => offerSchema(n.schema, n.S, n.K, n.channel) },
  { version: 13, sql: (n: SchemaNames) => originOutcomesSchema(n.S, n.K, n.channel) },
  { version: 14, sql: (n: SchemaNames) => shortHoldSchema(n.S) },
]);

/** The schema version this code writes and reads. */
export const SCHEMA_VERSION = migrations[migrations.length - 1]!.version;

/**
 * Brings the schema to `SCHEMA_VERSION`; answers with the versions it applied (none when another process had).
 * Rejects with `SchemaVersionError` when the database is at a newer version, changing nothing.
 */
export async function migrate(db: Database, names: SchemaNames, list: readonly Migration[] = migrations): Promise<number[]> {
  const latest = list[list.length - 1]?.version ?? 0;
  return db.transaction(async (session) => {
    await session.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [names.migrationLock]);
    await session.query(`CREATE SCHEMA IF NOT EXISTS ${names.S}`);
    await session.query(
      `CREATE TABLE IF NOT EXISTS ${names.S}.migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const [row] = await session.query<{ version: number }>(`SELECT coalesce(max(version), 0)::int AS version FROM ${names.S}.migrations`);
    const current = row?.version ?? 0;
    if (current > latest) throw new SchemaVersionError(names.schema, current, latest);
    const applied: number[] = [];
    for (const migration of list) {
      if (migration.version <= current) continue;
      await session.query(migration.sql(names));
      await session.query(`INSERT INTO ${names.S}.migrations (version) VALUES ($1)`, [migration.version]);
      applied.push(migration.version);
    }
    return applied;
  }, 'the schema migration');
}
