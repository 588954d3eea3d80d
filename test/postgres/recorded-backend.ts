/**
 * A PostgreSQL backend on a manual clock whose fetch and ack statements are recorded as they are sent, for tests of
 * how the broker batches its round trips: `lease N` for a fetch of up to N rows, `ack N` for a batch of N acks.
 */
import { Pool, type QueryConfig } from 'pg';
import type { PostgresBackend } from '../../src/postgres/backend.js';
import { WatchedClock } from '../helpers/watched-clock.js';
import { openBackend } from './backend-harness.js';
import { databaseUrl } from './helpers.js';

export interface RecordedBackend {
  readonly backend: PostgresBackend;
  /** The pool the backend runs on (the test ends it). */
  readonly pool: Pool;
  readonly clock: WatchedClock;
  /** The fetch and ack statements sent so far, in order. */
  readonly sent: string[];
  /** Settles once every fetch sent so far has been answered (or failed). */
  fetchesAnswered(): Promise<void>;
}

/** The statement kinds of `sent` without their row counts. */
export const kinds = (sent: readonly string[]): string[] => sent.map((s) => s.split(' ')[0]!);

function recordStatements(pool: Pool, sent: string[], fetches: Set<Promise<unknown>>): void {
  const query = pool.query.bind(pool) as (text: string | QueryConfig, values?: unknown[]) => Promise<unknown>;
  (pool as { query: unknown }).query = (text: string | QueryConfig, values?: unknown[]) => {
    const sql = typeof text === 'string' ? text : text.text;
    if (sql.includes('ack_many(')) sent.push(`ack ${(values?.[0] as unknown[]).length}`);
    if (!sql.includes('lease_ready(')) return query(text, values);
    sent.push(`lease ${String(values?.[1])}`);
    const answered = query(text, values);
    const done: Promise<unknown> = answered.then(
      (): boolean => fetches.delete(done),
      (): boolean => fetches.delete(done),
    );
    fetches.add(done);
    return answered;
  };
}

/** Opens a backend on `schema` (type `service` known; long nack delays) with its statements recorded. */
export async function openRecordedBackend(schema: string, nackTimeoutMs = 600_000, pollMs = 1000): Promise<RecordedBackend> {
  const pool = new Pool({ connectionString: databaseUrl, max: 4 });
  const sent: string[] = [];
  const fetches = new Set<Promise<unknown>>();
  recordStatements(pool, sent, fetches);
  const clock = new WatchedClock(1_000_000);
  const backend = await openBackend({
    schema,
    pool,
    clock,
    pollMs,
    broker: { nackTimeoutMs, deliveryLimit: 3, initialNackDelayMs: 100_000, subsequentNackDelayMs: 200_000, knownTypes: ['service'] },
  });
  const fetchesAnswered = async (): Promise<void> => {
    await Promise.all([...fetches]);
  };
  return { backend, pool, clock, sent, fetchesAnswered };
}
