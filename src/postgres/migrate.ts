/**
 * Versioned, idempotent migrations from the numbered `.sql` files in `migrations/` (`001_schema.sql` is the whole
 * schema; a later change is a new file that restates each function it changes in full). Every process runs
 * `migrate()` at start; one transaction holds a transaction-scoped advisory lock while it reads the version and
 * applies what is missing, so concurrent starts apply each file once, and the lock is gone with the transaction (a
 * session lock would outlive a crash of its holder behind a pooler, and would fence nothing).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { SchemaVersionError } from '../errors.js';
import type { Database } from './database.js';
import type { SchemaNames } from './names.js';

export interface Migration {
  readonly version: number;
  /** The file's name without its number and extension, recorded with the version. */
  readonly name: string;
  readonly sql: (names: SchemaNames) => string;
}

const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);
const FILE_NAME = /^(\d{3})_([a-z0-9_]+)\.sql$/;

/** The file's SQL for one schema: `{{schema}}` is its name, `{{job_lock_space}}` the first key of its job locks. */
export function migrationSql(text: string, names: SchemaNames): string {
  const sql = text.replaceAll('{{schema}}', names.schema).replaceAll('{{job_lock_space}}', String(names.K));
  const left = /\{\{[^}]*\}\}/.exec(sql);
  if (left !== null) throw new Error(`a migration holds the unknown placeholder ${left[0]}`);
  return sql;
}

function loadMigrations(): readonly Migration[] {
  const files = readdirSync(MIGRATIONS_DIR).filter((f) => f.endsWith('.sql')).sort();
  return Object.freeze(
    files.map((file, i) => {
      const match = FILE_NAME.exec(file);
      // Numbered from 1 without gaps: a version is applied exactly when every one before it was.
      if (match === null || Number(match[1]) !== i + 1) throw new Error(`migrations/${file} is not named ${String(i + 1).padStart(3, '0')}_<name>.sql`);
      const text = readFileSync(new URL(file, MIGRATIONS_DIR), 'utf8');
      return { version: i + 1, name: match[2]!, sql: (names: SchemaNames) => migrationSql(text, names) };
    }),
  );
}

export const migrations: readonly Migration[] = loadMigrations();

/** The schema version this code writes and reads. */
export const SCHEMA_VERSION = migrations[migrations.length - 1]!.version;

/**
 * Brings the schema to `SCHEMA_VERSION`; answers with the versions it applied (none when another process had).
 * Rejects with `SchemaVersionError`, changing nothing, when the database is at a newer version or was made by a
 * pre-release tickpool's migrations (their log has no `name` column).
 */
export async function migrate(db: Database, names: SchemaNames, list: readonly Migration[] = migrations): Promise<number[]> {
  const latest = list[list.length - 1]?.version ?? 0;
  return db.transaction(async (session) => {
    await session.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [names.migrationLock]);
    const [log] = await session.query<{ exists: boolean; named: boolean }>(
      `SELECT to_regclass($1) IS NOT NULL AS exists,
              EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = $2 AND table_name = 'migrations' AND column_name = 'name') AS named`,
      [`${names.S}.migrations`, names.schema],
    );
    if (log?.exists === true && !log.named) {
      const [row] = await session.query<{ version: number }>(`SELECT coalesce(max(version), 0)::int AS version FROM ${names.S}.migrations`);
      throw new SchemaVersionError(names.schema, row?.version ?? 0, latest, 'pre-release');
    }
    await session.query(`CREATE SCHEMA IF NOT EXISTS ${names.S}`);
    await session.query(
      `CREATE TABLE IF NOT EXISTS ${names.S}.migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const [row] = await session.query<{ version: number }>(`SELECT coalesce(max(version), 0)::int AS version FROM ${names.S}.migrations`);
    const current = row?.version ?? 0;
    if (current > latest) throw new SchemaVersionError(names.schema, current, latest);
    const applied: number[] = [];
    for (const migration of list) {
      if (migration.version <= current) continue;
      await session.query(migration.sql(names));
      await session.query(`INSERT INTO ${names.S}.migrations (version, name) VALUES ($1, $2)`, [migration.version, migration.name]);
      applied.push(migration.version);
    }
    return applied;
  }, 'the schema migration');
}
