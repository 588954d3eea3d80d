/**
 * Outcomes that were settled in another process. This process keeps its handles by id (weakly: a handle its caller
 * dropped is forgotten), settles them at once for what it settles itself, and for the handles someone waits on
 * (`done` was read) looks the outcome up in the database: a handle's own when its `done` is first read (it may have
 * settled already), the ones a notification names when it says outcomes of evaluations enqueued here were stored
 * elsewhere, and every awaited one for a notification that names none, after a reconnect, and every `pollMs` as the
 * backstop. So a look-up costs what was settled, not what is awaited. One look-up at a time; hints that come during
 * one are folded into the next.
 */
import { AbortedError, SupersededError } from '../../errors.js';
import type { Clock, TimerHandle } from '../../clock.js';
import type { Logger } from '../../observability/logger.js';
import { decodeError, decodeValue, type StoredError } from '../codec.js';
import type { Database } from '../database.js';
import type { PgHandle } from '../pg-handle.js';
import type { BrokerQueries } from './queries.js';

/** `outcome` as the broker's functions store it. */
export type StoredOutcome =
  | { readonly status: 'acked'; readonly index: number; readonly attempts: number; readonly deliveries: number }
  | { readonly status: 'failed'; readonly error: StoredError }
  | { readonly status: 'superseded'; readonly by: string }
  | { readonly status: 'removed'; readonly cause: StoredError | null };

/** Settles `handle` with a stored outcome. */
export function settleFromStore(handle: PgHandle, outcome: StoredOutcome, value: Buffer | null): void {
  switch (outcome.status) {
    case 'acked':
      handle.acked(value === null ? undefined : decodeValue(value), Number(outcome.index), Number(outcome.attempts), Number(outcome.deliveries));
      return;
    case 'failed':
      handle.rejected(() => decodeError(outcome.error));
      return;
    case 'superseded':
      handle.rejected(() => new SupersededError(handle.id, outcome.by));
      return;
    case 'removed': {
      const cause = outcome.cause === null || outcome.cause === undefined ? undefined : decodeError(outcome.cause);
      handle.rejected(() => new AbortedError(`evaluation ${JSON.stringify(handle.id)}`, { cause }));
      return;
    }
  }
}

export class OutcomeWatch {
  readonly #db: Database;
  readonly #queries: BrokerQueries;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #pollMs: number;
  readonly #handles = new Map<string, WeakRef<PgHandle>>();
  readonly #forget = new FinalizationRegistry<string>((id) => {
    if (this.#handles.get(id)?.deref() === undefined) this.#handles.delete(id);
  });
  /** Read and not settled: kept strongly, since someone awaits them. */
  readonly #watched = new Map<string, PgHandle>();
  /** Awaited ids a hint named, for the next look-up. */
  readonly #named = new Set<string>();
  /** The next look-up covers every awaited id. */
  #everything = false;
  #checking = false;
  #again = false;
  #timer: TimerHandle | undefined;
  #closed = false;

  constructor(db: Database, queries: BrokerQueries, clock: Clock, logger: Logger, pollMs: number) {
    this.#db = db;
    this.#queries = queries;
    this.#clock = clock;
    this.#logger = logger;
    this.#pollMs = pollMs;
  }

  /** Handles someone waits on. */
  get size(): number {
    return this.#watched.size;
  }

  /** This process's handle for `id`, if it still has one. */
  get(id: string): PgHandle | undefined {
    const handle = this.#handles.get(id)?.deref();
    if (handle === undefined) this.#handles.delete(id);
    return handle;
  }

  track(handle: PgHandle): void {
    this.#handles.set(handle.id, new WeakRef(handle));
    this.#forget.register(handle, handle.id);
  }

  /** `done` was read: look for its outcome soon, and until it is found. */
  watch(handle: PgHandle): void {
    if (this.#closed || handle.settled) return;
    this.#watched.set(handle.id, handle);
    this.hint([handle.id]);
  }

  /** Settles this process's handle for `id`, if any, with `settle`; stops watching it. */
  settle(id: string, settle: (handle: PgHandle) => void): void {
    const handle = this.get(id);
    if (handle === undefined) return;
    settle(handle);
    if (handle.settled) this.#watched.delete(id);
  }

  /** Every unsettled handle this process has. */
  *unsettled(): Generator<PgHandle> {
    for (const ref of this.#handles.values()) {
      const handle = ref.deref();
      if (handle !== undefined && !handle.settled) yield handle;
    }
  }

  /**
   * The outcomes of `ids` may have been stored (of any awaited one, without `ids`): look now, or right after the
   * look-up in progress.
   */
  hint(ids?: readonly string[]): void {
    if (this.#closed || this.#watched.size === 0) return;
    if (ids === undefined) this.#everything = true;
    else for (const id of ids) if (this.#watched.has(id)) this.#named.add(id);
    if (!this.#everything && this.#named.size === 0) return;
    if (this.#checking) {
      this.#again = true;
      return;
    }
    void this.#check();
  }

  async #check(): Promise<void> {
    this.#checking = true;
    try {
      do {
        this.#again = false;
        const ids = this.#everything ? [...this.#watched.keys()] : [...this.#named].filter((id) => this.#watched.has(id));
        this.#everything = false;
        this.#named.clear();
        if (ids.length === 0) break;
        try {
          const rows = await this.#db.query<{ id: string; outcome: StoredOutcome; value: Buffer | null }>(
            this.#queries.outcomes,
            [ids],
            'an outcome look-up',
          );
          for (const row of rows) {
            const handle = this.#watched.get(row.id);
            if (handle === undefined) continue;
            settleFromStore(handle, row.outcome, row.value);
            this.#watched.delete(row.id);
          }
        } catch (error) {
          // The next poll looks up every awaited id, these with them.
          this.#logger.warn({ err: error }, 'outcome look-up failed; retrying at the next poll');
          break;
        }
      } while (this.#again && !this.#closed);
    } finally {
      this.#checking = false;
      this.#arm();
    }
  }

  #arm(): void {
    if (this.#closed || this.#watched.size === 0 || this.#timer !== undefined) return;
    this.#timer = this.#clock.setTimer(() => {
      this.#timer = undefined;
      this.hint();
      this.#arm();
    }, this.#pollMs, { unref: true });
  }

  close(): void {
    this.#closed = true;
    if (this.#timer !== undefined) this.#clock.clearTimer(this.#timer);
    this.#timer = undefined;
    this.#watched.clear();
    this.#named.clear();
  }
}
