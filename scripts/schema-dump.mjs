// Writes test/postgres/schema.dump: what PostgreSQL holds after a fresh migrate() (see test/postgres/schema-dump.ts).
// Run it after `npm run build`, with TICKPOOL_TEST_DATABASE_URL set (scripts/test-postgres.sh start prints it).
import { writeFileSync } from 'node:fs';
import pg from 'pg';
import { describeSchema } from '../dist/test/postgres/schema-dump.js';
import { migratedSchema, schemaName } from '../dist/test/postgres/helpers.js';

const pool = new pg.Pool({ connectionString: process.env.TICKPOOL_TEST_DATABASE_URL });
const schema = schemaName('dump');
try {
  await migratedSchema(schema);
  writeFileSync(new URL('../test/postgres/schema.dump', import.meta.url), await describeSchema(pool, schema));
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
}
