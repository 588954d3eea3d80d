/**
 * A PostgreSQL backend made the way an engine makes it, on a schema of its own, for tests that drive its parts
 * directly (broker, state store, plan committer) without pool threads.
 */
import { pino } from 'pino';
import type { Pool } from 'pg';
import { Registry } from 'prom-client';
import type { BrokerSettings } from '../../src/backend/backend.js';
import { systemClock, type Clock } from '../../src/clock.js';
import type { EvaluatePlan } from '../../src/state/types.js';
import { postgresBackend, type PostgresBackend } from '../../src/postgres/backend.js';
import { databaseUrl } from './helpers.js';

export const silentLogger = pino({ level: 'silent' });

export interface HarnessOptions {
  readonly schema: string;
  readonly tables?: readonly string[];
  readonly broker?: Partial<BrokerSettings>;
  readonly evaluatePlan?: EvaluatePlan;
  readonly clock?: Clock;
  readonly pollMs?: number;
  /** The database to connect to (default the test database; a proxy of it in fault tests). */
  readonly url?: string;
  /** A pool the test owns (and may watch), instead of one the backend makes from `url`. */
  readonly pool?: Pool;
}

/** An opened backend; `close()` it (the schema is the caller's to drop). */
export async function openBackend(options: HarnessOptions): Promise<PostgresBackend> {
  const source = options.pool !== undefined ? { pool: options.pool } : { connectionString: options.url ?? databaseUrl! };
  const factory = postgresBackend({ ...source, schema: options.schema, pollMs: options.pollMs ?? 1000 });
  const backend = factory.create({
    clock: options.clock ?? systemClock,
    logger: silentLogger,
    registry: new Registry(),
    tables: options.tables ?? ['allocs'],
    evaluatePlan: options.evaluatePlan,
    broker: { knownTypes: ['service', 'batch', 'a', 'b'], maxPayloadBytes: 1 << 20, ...options.broker },
  });
  await backend.open();
  return backend;
}
