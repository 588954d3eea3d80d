/** Records the ids of each outcome look-up a backend sends through a pool the test owns. */
import type { Pool, QueryConfig } from 'pg';

/** Pushes the ids of each outcome look-up sent through `pool` to `lookUps` once it has answered, then calls `answered`. */
export function recordLookUps(pool: Pool, lookUps: string[][], answered: () => void = () => undefined): void {
  const query = pool.query.bind(pool) as (text: string | QueryConfig, values?: unknown[]) => Promise<unknown>;
  (pool as { query: unknown }).query = async (text: string | QueryConfig, values?: unknown[]) => {
    const sql = typeof text === 'string' ? text : text.text;
    const result = await query(text, values);
    if (sql.includes('outcome IS NOT NULL') && sql.includes('ANY(')) {
      lookUps.push([...((values?.[0] as string[]) ?? [])]);
      answered();
    }
    return result;
  };
}
