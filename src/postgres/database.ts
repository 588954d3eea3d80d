/**
 * The backend's access to PostgreSQL: a pool (its own, made from a connection string, or the caller's), one-statement
 * queries and transactions, and the one place where a driver error becomes a tickpool error.
 *
 * No session state is ever set (no `SET`, no named prepared statements, no session-level advisory locks): each
 * transaction stands alone, so a transaction pooler in front of the database changes nothing. Only LISTEN needs a
 * session of its own, and it gets a dedicated client (`listener.ts`), not a pooled one.
 */
import { Client, Pool, type ClientConfig, type PoolClient } from 'pg';
import { BackendUnavailableError, TickpoolError } from '../errors.js';
import type { PoolLike } from './options.js';

/**
 * SQLSTATEs that mean the server or the connection is gone (class 08), shutting down or full, or that the server
 * refused this process's login (class 28: the role or its password; 3D000: no such database). A refused login is
 * no refusal of a statement: it comes only when a connection is made, and this process cannot use the database until
 * its configuration or the server changes, as with a host that cannot be reached.
 */
const UNAVAILABLE_STATES = new Set([
  '57P01', '57P02', '57P03', '53300', '08000', '08001', '08003', '08004', '08006', '08007', '08P01', '28000', '28P01', '3D000',
]);
/** Node's socket error codes for a peer that cannot be reached or went away. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ECONNABORTED']);
/** node-postgres reports a dropped connection or a connect timeout with a message and no code. */
const DRIVER_MESSAGES = /Connection terminated|connection error|Connection ended|timeout exceeded when trying to connect|Client was closed|not queryable|Cannot use a pool after calling end/i;

/** True when `error` says the database cannot be reached or the connection broke (not a refusal of the statement). */
export function isUnavailable(error: unknown): boolean {
  if (error instanceof BackendUnavailableError) return true;
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (UNAVAILABLE_STATES.has(code) || SOCKET_CODES.has(code))) return true;
  if (error instanceof AggregateError) return error.errors.some(isUnavailable);
  return DRIVER_MESSAGES.test(error.message);
}

/**
 * `error` as the caller should see it: a connection failure becomes `BackendUnavailableError` (its `cause` the
 * driver's error, `details.ambiguous` when it broke during a COMMIT, whose outcome is then unknown); a tickpool
 * error stays itself; anything else (a bug in a statement) is left as it is.
 */
export function backendError(error: unknown, operation: string, ambiguous = false): unknown {
  if (error instanceof TickpoolError) return error;
  if (!isUnavailable(error)) return error;
  const reason = error instanceof Error ? error.message : String(error);
  return new BackendUnavailableError(`Expected the PostgreSQL database to answer ${operation}, but: ${reason}`, {
    cause: error,
    details: { operation, ambiguous },
  });
}

/**
 * Whether the server refused a statement for what it carried (a value it cannot hold, a limit): an error with a
 * SQLSTATE of class 22 (data exception) or 54 (program limit exceeded). Such a statement changed nothing, and the
 * same statement without the offending input would have gone through: a batch that meets one is split.
 */
export function refusedInput(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && !(error instanceof TickpoolError) && (code.startsWith('22') || code.startsWith('54'));
}

/** Whether a `BackendUnavailableError` came from a COMMIT whose outcome is unknown (it may have landed). */
export function isAmbiguous(error: unknown): boolean {
  return error instanceof BackendUnavailableError && error.details?.['ambiguous'] === true;
}

/**
 * A result row. The backend's declarations name no type of `pg` (whose types are not a dependency of the package):
 * rows, sessions and the listening client are described here.
 */
export type Row = { [column: string]: unknown };

/** The dedicated client LISTEN runs on (a `pg.Client`). */
export interface ListenClient {
  connect(): Promise<void>;
  query(text: string): Promise<unknown>;
  on(event: 'notification', listener: (message: { readonly channel: string; readonly payload?: string | undefined }) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
  end(): Promise<void>;
}

/** One client of the pool, for the statements of one transaction. */
export interface Session {
  query<R extends Row = Row>(text: string, values?: readonly unknown[]): Promise<R[]>;
}

export interface DatabaseOptions {
  readonly connectionString: string | undefined;
  readonly pool: PoolLike | undefined;
  /** `application_name` of every connection this backend opens: lets an operator (or a test) find them. */
  readonly applicationName: string;
  /** Called with errors of idle clients (a dropped connection nobody was using): they must not crash the process. */
  readonly onIdleError: (error: Error) => void;
}

/** Longest wait for a connection, ms: an unreachable database must fail a call, not hang it. */
const CONNECT_TIMEOUT_MS = 10_000;

export class Database {
  readonly #pool: Pool;
  readonly #owned: boolean;
  readonly #clientConfig: ClientConfig;
  readonly #onIdleError: (error: Error) => void;
  #closed = false;

  constructor(options: DatabaseOptions) {
    this.#onIdleError = options.onIdleError;
    if (options.pool !== undefined) {
      this.#pool = options.pool as unknown as Pool;
      this.#owned = false;
      const poolOptions = (options.pool.options ?? {}) as ClientConfig;
      this.#clientConfig = { ...poolOptions, application_name: options.applicationName };
    } else {
      this.#clientConfig = {
        connectionString: options.connectionString,
        application_name: options.applicationName,
        connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
        keepAlive: true,
      };
      this.#pool = new Pool({ ...this.#clientConfig, max: 10, idleTimeoutMillis: 30_000 });
      this.#owned = true;
    }
    this.#pool.on('error', this.#onIdleError);
  }

  /** A client of its own (not from the pool) with the pool's settings: for LISTEN, which needs its session. */
  newClient(): ListenClient {
    return new Client(this.#clientConfig) as unknown as ListenClient;
  }

  /** One statement in its own implicit transaction. */
  async query<R extends Row = Row>(text: string, values: readonly unknown[] = [], operation = 'a query'): Promise<R[]> {
    try {
      const result = await this.#pool.query<R>(text, values as unknown[]);
      return result.rows;
    } catch (error) {
      throw backendError(error, operation);
    }
  }

  /**
   * Runs `fn` in a transaction on one client: BEGIN, `fn`, COMMIT; ROLLBACK when `fn` throws. A connection that breaks
   * during the COMMIT rejects with an ambiguous `BackendUnavailableError` (see `isAmbiguous`); a client whose
   * connection broke is destroyed rather than returned to the pool.
   */
  async transaction<T>(fn: (session: Session) => Promise<T>, operation = 'a transaction'): Promise<T> {
    let client: PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (error) {
      throw backendError(error, operation);
    }
    const session: Session = {
      async query<R extends Row>(text: string, values: readonly unknown[] = []): Promise<R[]> {
        // No values: the simple protocol, which takes several statements at once (a migration).
        return (await client.query<R>(text, values.length === 0 ? undefined : (values as unknown[]))).rows;
      },
    };
    let broken: unknown;
    // A checked-out client's connection errors are ours to handle (the pool listens only to idle ones): without a
    // listener a dropped connection would be an uncaught 'error' event. The query in progress rejects as well.
    const onError = (error: Error): void => {
      broken = error;
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      let result: T;
      try {
        result = await fn(session);
      } catch (error) {
        if (isUnavailable(error)) broken = error;
        else await client.query('ROLLBACK').catch((rollback: unknown) => (broken = rollback));
        throw error;
      }
      try {
        await client.query('COMMIT');
      } catch (error) {
        broken = error;
        throw backendError(error, operation, isUnavailable(error));
      }
      return result;
    } catch (error) {
      if (broken === undefined && isUnavailable(error)) broken = error;
      throw backendError(error, operation);
    } finally {
      client.off('error', onError);
      client.release(broken instanceof Error ? broken : broken === undefined ? undefined : true);
    }
  }

  /** Ends the pool if the backend made it; a caller's pool is left to its owner. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#pool.off?.('error', this.#onIdleError);
    if (this.#owned) await this.#pool.end();
  }
}
