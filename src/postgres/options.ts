/**
 * `postgresBackend()`'s options: one object, validated where it is given, defaults in one place.
 */
import { InvalidOptionError } from '../errors.js';
import { assertKnownKeys, optionsObject } from '../option-checks.js';

export interface PostgresBackendOptions {
  /** A libpq connection string (`postgres://user:pass@host:port/db`); the backend owns the pool it makes from it. */
  readonly connectionString?: string;
  /**
   * A `pg.Pool` the caller owns (node-postgres): the backend borrows its clients and never ends it. Exactly one of
   * `connectionString` and `pool`.
   */
  readonly pool?: PoolLike;
  /**
   * The PostgreSQL schema holding the backend's tables: a lowercase SQL identifier (letters, digits, `_`, at most 40
   * characters). Engines that share a schema share one broker and one state store.
   * @default 'tickpool'
   */
  readonly schema?: string;
  /**
   * The backstop: how often a process looks for work, outcomes and state changes when no notification came, ms.
   * Notifications (LISTEN/NOTIFY) are hints; this bounds how late anything is found when they are lost.
   * @default 1000
   */
  readonly pollMs?: number;
  /**
   * Runs kept per task in the shared run log (`engine.tasks.runLog.runs(id)`); older ended runs are dropped.
   * @default 100
   */
  readonly runLogLimit?: number;
}

/** What the backend needs of a `pg.Pool` (checked by shape: the caller's copy of `pg` may not be ours). */
export interface PoolLike {
  connect(): Promise<unknown>;
  query(text: string, values?: unknown[]): Promise<unknown>;
  on(event: 'error', listener: (error: Error) => void): unknown;
  off?(event: 'error', listener: (error: Error) => void): unknown;
  end(): Promise<void>;
  readonly options?: unknown;
}

export interface ResolvedPostgresOptions {
  readonly connectionString: string | undefined;
  readonly pool: PoolLike | undefined;
  readonly schema: string;
  readonly pollMs: number;
  readonly runLogLimit: number;
}

export const postgresDefaults = Object.freeze({ schema: 'tickpool', pollMs: 1000, runLogLimit: 100 });

/** Lowercase so that it needs no quoting anywhere; short so that `<schema>_<channel>` stays within 63 bytes. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,39}$/;
/**
 * Names PostgreSQL keeps for itself: it refuses to create a schema named `pg_…` (SQLSTATE 42939), and
 * `information_schema` is the system's (its tables are the superuser's). Refused here, at the option, instead of by
 * `start()` with the driver's error.
 */
const RESERVED_SCHEMA = /^(pg_|information_schema$)/;

export function resolvePostgresOptions(options: unknown): ResolvedPostgresOptions {
  const o = optionsObject(options, 'an object { connectionString | pool, schema?, pollMs?, runLogLimit? }');
  assertKnownKeys('', o, ['connectionString', 'pool', 'schema', 'pollMs', 'runLogLimit']);
  const { connectionString, pool } = o;
  if (connectionString === undefined && pool === undefined) {
    throw new InvalidOptionError('connectionString', 'a PostgreSQL connection string, or a `pool` option instead', connectionString);
  }
  if (connectionString !== undefined && pool !== undefined) {
    throw new InvalidOptionError('pool', 'absent when `connectionString` is given (one of the two)', pool);
  }
  if (connectionString !== undefined && (typeof connectionString !== 'string' || connectionString.length === 0)) {
    throw new InvalidOptionError('connectionString', 'a non-empty string like postgres://user:pass@host:5432/db', connectionString);
  }
  if (pool !== undefined && !isPoolLike(pool)) {
    throw new InvalidOptionError('pool', 'a pg.Pool (connect, query, on, end)', pool);
  }
  const schema = o['schema'] ?? postgresDefaults.schema;
  if (typeof schema !== 'string' || !SCHEMA_NAME.test(schema) || RESERVED_SCHEMA.test(schema)) {
    throw new InvalidOptionError(
      'schema',
      'a lowercase SQL identifier: a letter or _, then letters, digits or _, at most 40 characters, neither `pg_…` nor `information_schema` (PostgreSQL keeps those)',
      schema,
    );
  }
  const pollMs = o['pollMs'] ?? postgresDefaults.pollMs;
  if (typeof pollMs !== 'number' || !Number.isInteger(pollMs) || pollMs < 10 || pollMs > 3_600_000) {
    throw new InvalidOptionError('pollMs', 'an integer number of ms from 10 to 3600000', pollMs);
  }
  const runLogLimit = o['runLogLimit'] ?? postgresDefaults.runLogLimit;
  if (typeof runLogLimit !== 'number' || !Number.isInteger(runLogLimit) || runLogLimit < 1 || runLogLimit > 100_000) {
    throw new InvalidOptionError('runLogLimit', 'an integer from 1 to 100000', runLogLimit);
  }
  return {
    connectionString: connectionString as string | undefined,
    pool: pool as PoolLike | undefined,
    schema,
    pollMs,
    runLogLimit,
  };
}

function isPoolLike(value: unknown): value is PoolLike {
  if (value === null || typeof value !== 'object') return false;
  const p = value as Record<string, unknown>;
  return ['connect', 'query', 'on', 'end'].every((name) => typeof p[name] === 'function');
}
