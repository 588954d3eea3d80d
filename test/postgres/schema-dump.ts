/**
 * A text picture of one backend schema, read from the catalogs: sequences, tables (columns in their order, their
 * constraints), indexes, functions (as PostgreSQL prints them back, settings included), triggers, and the rows a
 * fresh migration leaves in its tables. Every part is sorted by name, so two schemas built by different SQL compare
 * equal exactly when PostgreSQL holds the same objects. The schema's name and its job-lock key are written as
 * `{{schema}}` and `{{K}}`, so the picture does not depend on which schema a test made.
 */
import type { Pool } from 'pg';
import { schemaNames } from '../../src/postgres/names.js';

/** Tables whose rows belong to the picture: a fresh schema's seed rows. The migration log's times do not. */
const SEEDED_TABLES: readonly string[] = ['state_counter', 'task_catalog'];

export async function describeSchema(pool: Pool, schema: string): Promise<string> {
  const parts: string[] = [];
  const q = async <T extends object>(text: string): Promise<T[]> => (await pool.query<T>(text, [schema])).rows;

  for (const s of await q<{ name: string; type: string; start: string; increment: string }>(
    `SELECT sequencename AS name, data_type::text AS type, start_value::text AS start, increment_by::text AS increment
       FROM pg_sequences WHERE schemaname = $1 ORDER BY sequencename`,
  )) {
    parts.push(`SEQUENCE ${s.name} ${s.type} START ${s.start} INCREMENT ${s.increment}`);
  }

  const tables = await q<{ oid: number; name: string; unlogged: boolean }>(
    `SELECT c.oid::int AS oid, c.relname AS name, c.relpersistence = 'u' AS unlogged FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') ORDER BY c.relname`,
  );
  for (const t of tables) {
    const columns = (await pool.query<{ line: string }>(
      `SELECT '  ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
              || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
              || coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '') AS line
         FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
      [t.oid],
    )).rows.map((r) => r.line);
    const constraints = (await pool.query<{ line: string }>(
      `SELECT '  CONSTRAINT ' || conname || ' ' || pg_get_constraintdef(oid) AS line FROM pg_constraint
        WHERE conrelid = $1 ORDER BY conname`,
      [t.oid],
    )).rows.map((r) => r.line);
    parts.push(`${t.unlogged ? 'UNLOGGED ' : ''}TABLE ${t.name}\n${[...columns, ...constraints].join('\n')}`);
  }

  for (const i of await q<{ def: string }>(
    `SELECT indexdef AS def FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname`,
  )) {
    parts.push(`${i.def};`);
  }

  for (const f of await q<{ def: string }>(
    `SELECT pg_get_functiondef(p.oid) AS def FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = $1 ORDER BY p.proname, pg_get_function_identity_arguments(p.oid)`,
  )) {
    parts.push(`${f.def.trimEnd()};`);
  }

  for (const t of await q<{ def: string }>(
    `SELECT pg_get_triggerdef(tg.oid) AS def FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT tg.tgisinternal ORDER BY tg.tgname`,
  )) {
    parts.push(`${t.def};`);
  }

  for (const table of SEEDED_TABLES) {
    const { rows } = await pool.query(`SELECT * FROM "${schema}".${table} ORDER BY 1`);
    parts.push(`ROWS ${table}\n${rows.map((r) => `  ${JSON.stringify(r)}`).join('\n')}`);
  }

  const names = schemaNames(schema);
  return `${parts.join('\n\n')}\n`.replaceAll(schema, '{{schema}}').replaceAll(String(names.K), '{{K}}');
}
