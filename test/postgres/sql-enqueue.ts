/** Enqueueing through the schema's `enqueue` function directly, as no engine process: none kicks itself. */
import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { encodeValue } from '../../src/postgres/codec.js';

/**
 * Enqueues `ids` of type `type` in one call (priority 50, each its own job), with bodies carrying `pad` characters
 * of payload; answers the state each was admitted in.
 */
export async function enqueueInSql(pool: Pool | PoolClient, S: string, ids: readonly string[], type: string, pad = 0): Promise<string[]> {
  const { rows } = await pool.query<{ state: string }>(
    `SELECT * FROM ${S}.enqueue($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::bigint[], $7::bigint[], $8::float8[],
       $9::float8[], $10::bytea[], $11::jsonb[], $12::uuid)`,
    [ids, ids.map(() => 'default'), ids, ids.map(() => type), ids.map(() => 50), ids.map(() => 0), ids.map(() => 0), ids.map(() => null),
      ids.map(() => null), ids.map((id) => encodeValue({ id, jobId: id, type, priority: 50, ...(pad > 0 ? { payload: 'x'.repeat(pad) } : {}) })), ids.map(() => null), randomUUID()],
  );
  return rows.map((r) => r.state);
}
