/**
 * The state store in PostgreSQL as this process sees it: a replica of the committed state, fed by the change log.
 * Every read (`index`, `snapshot()`, `full()`) is the replica, synchronous and immutable at one index. The replica
 * tails `state_log` in index order: on a notification of a commit (a hint), after every reconnect of the listener
 * (notifications in between are lost), every `pollMs` as the backstop, inside every commit of this process's plan
 * committer (which holds the counter lock, so the log is complete up to the counter), and when someone waits for an
 * index it has not reached. The log's indexes are gap-free, so a change set is applied only right after the one
 * before it; a log that no longer reaches back (compacted) reloads the whole state.
 */
import type { ChangeSet, RecordChange, Snapshot, WriteTxn } from '../state/types.js';
import type { StateBackend } from '../backend/state-backend.js';
import type { Clock, TimerHandle } from '../clock.js';
import { InvalidArgumentError, InvalidStateError } from '../errors.js';
import { TypedEmitter } from '../events.js';
import type { Logger } from '../observability/logger.js';
import { adoptRecord } from '../state/sealed.js';
import { TablesVersion } from '../state/versioned-tables.js';
import { waitForFeedIndex } from '../state/wait-for-feed-index.js';
import { runTransaction, Transaction } from '../state/write-txn.js';
import { decodeValue } from './codec.js';
import type { Database, Session } from './database.js';
import type { SchemaNames } from './names.js';
import { CATCH_UP_ROWS, stateQueries, type StateQueries } from './state-queries.js';

/** One write of `state.write(fn)`, replayed at commit against the committed state. */
export interface WriteOp {
  readonly table: string;
  readonly key: string;
  /** `undefined`: a delete. Owned and frozen. */
  readonly value: unknown;
}

/** Commits the writes of one `state.write` (the plan committer, serially with the plans). */
export type DirectWriter = (ops: readonly WriteOp[]) => Promise<ChangeSet>;

interface StateEvents {
  'state:change': ChangeSet;
}

export class PgState implements StateBackend {
  readonly #db: Database;
  readonly #queries: StateQueries;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #pollMs: number;
  readonly #tables: readonly string[];
  readonly #known: ReadonlySet<string>;
  readonly #events: TypedEmitter<StateEvents>;
  #version: TablesVersion;
  #writer: DirectWriter | undefined;
  #writing = false;
  #catchUp: Promise<void> | undefined;
  #again = false;
  #timer: TimerHandle | undefined;
  #open = false;
  #closed = false;
  /** Change sets applied and not yet delivered to listeners (a listener that writes sees them in order). */
  readonly #outbox: ChangeSet[] = [];
  #delivering = false;

  constructor(db: Database, names: SchemaNames, tables: readonly string[], clock: Clock, logger: Logger, pollMs: number) {
    this.#db = db;
    this.#queries = stateQueries(names.S);
    this.#clock = clock;
    this.#logger = logger;
    this.#pollMs = pollMs;
    this.#tables = Object.freeze([...tables]);
    this.#known = new Set(tables);
    this.#version = TablesVersion.empty(this.#tables, true);
    this.#events = new TypedEmitter<StateEvents>(() => this.#logger);
  }

  /** Who commits `write`'s transactions (set by the backend: the plan committer). */
  set writer(writer: DirectWriter) {
    this.#writer = writer;
  }

  get index(): number {
    return this.#version.index;
  }

  snapshot(): Snapshot {
    return this.#version;
  }

  /** The replica's current version (for the plan committer, which builds on it). */
  get version(): TablesVersion {
    return this.#version;
  }

  tables(): readonly string[] {
    return this.#tables;
  }

  full(): ChangeSet {
    return Object.freeze({ index: this.#version.index, changes: Object.freeze([...this.#version.records()]) });
  }

  onChange(listener: (change: ChangeSet) => void): () => void {
    if (typeof listener !== 'function') throw new InvalidArgumentError('listener', 'a function', listener);
    return this.#events.on('state:change', listener);
  }

  write(fn: (txn: WriteTxn) => void): Promise<ChangeSet> {
    if (typeof fn !== 'function') throw new InvalidArgumentError('fn', 'a function', fn);
    if (this.#writing) throw new InvalidStateError('Expected write() outside any other write transaction, but it was called from inside one');
    if (this.#writer === undefined || this.#closed) {
      throw new InvalidStateError(`Expected an open PostgreSQL state store to write to, but it is ${this.#closed ? 'closed' : 'not open yet'}`);
    }
    // Reads see the replica plus the transaction's own writes; the writes are recorded and replayed at the commit.
    const ops: WriteOp[] = [];
    const txn = new Transaction(this.#version.draft(this.#version.index + 1, false), (table, key, value) => ops.push({ table, key, value }));
    this.#writing = true;
    try {
      runTransaction(txn, fn);
    } finally {
      this.#writing = false;
    }
    return this.#writer(ops);
  }

  waitForIndex(index: number, signal?: AbortSignal): Promise<void> | undefined {
    const waiting = waitForFeedIndex(this, index, signal);
    // Waiting on an index the replica has not reached: catch up now rather than at the next notification or poll.
    if (waiting !== undefined && signal?.aborted !== true) this.hint();
    return waiting;
  }

  // ───────────────────────────── the replica's feed ─────────────────────────────

  /** Loads the whole committed state (at open, and when the log no longer reaches back to the replica). */
  async load(): Promise<void> {
    const q = this.#queries;
    const { index, rows } = await this.#db.transaction(async (session) => {
      await session.query(q.readOnlySnapshot);
      const [counter] = await session.query<{ index: string }>(q.counter);
      const records = await session.query<{ tbl: string; key: string; value: Buffer; create_index: string; modify_index: string }>(q.records, [this.#tables]);
      return { index: Number(counter?.index ?? 0), rows: records };
    }, 'a state load');
    const draft = TablesVersion.empty(this.#tables, true, index).draft(index, false);
    for (const row of rows) {
      draft.putRecord(
        adoptRecord({ table: row.tbl, key: row.key, value: decodeValue(row.value), createIndex: Number(row.create_index), modifyIndex: Number(row.modify_index) }),
      );
    }
    const reloaded = this.#open;
    this.#version = draft.finish().version;
    // A reload jumps: threads whose copy now has a gap reseed themselves from full() (see ChangeFeed).
    if (reloaded) this.#publish(Object.freeze({ index, changes: Object.freeze([]) }));
  }

  /** Starts tailing (after `load()`). */
  start(): void {
    this.#open = true;
    this.#arm();
  }

  /** A commit may have happened: catch up now (or right after the catch-up in progress). */
  hint(): void {
    if (!this.#open || this.#closed) return;
    if (this.#catchUp !== undefined) {
      this.#again = true;
      return;
    }
    this.#catchUp = this.#tail().finally(() => {
      this.#catchUp = undefined;
    });
  }

  async #tail(): Promise<void> {
    try {
      do {
        this.#again = false;
        await this.catchUpWith({ query: (text, values) => this.#db.query(text, values, 'the state log') });
      } while (this.#again && !this.#closed);
    } catch (error) {
      this.#logger.warn({ err: error }, 'state log catch-up failed; retrying at the next poll');
    }
  }

  /**
   * Applies the log after the replica's index, up to `until` (or to its end), reading with `query` (a pool query, or
   * the plan committer's session inside its transaction).
   */
  async catchUpWith(session: Session, until = Number.POSITIVE_INFINITY): Promise<void> {
    while (this.#version.index < until && !this.#closed) {
      const from = this.#version.index;
      const rows = await session.query<{ index: string; changes: Buffer }>(this.#queries.logAfter, [from]);
      if (rows.length === 0) return;
      if (Number(rows[0]!.index) > this.#version.index + 1) {
        // Compacted past the replica (or another reader moved it meanwhile): only a reload is exact.
        if (this.#version.index !== from) continue;
        await this.load();
        continue;
      }
      this.applyLogRows(rows);
      if (rows.length < CATCH_UP_ROWS) return;
    }
  }

  /** Applies log rows (in index order) from the next one on; rows at or below the replica's index are skipped. */
  applyLogRows(rows: readonly { readonly index: string; readonly changes: Buffer }[]): void {
    for (const row of rows) {
      const index = Number(row.index);
      if (index !== this.#version.index + 1) continue;
      this.applyChanges(index, decodeValue(row.changes) as RecordChange[]);
    }
  }

  /**
   * Applies the change set committed at `index` (records as the committer wrote them), if it is the next one; one at
   * or below the replica's index was applied already. Changes to tables this process does not have are left out,
   * but the index still moves: indexes stay gap-free for every process, whatever its tables.
   */
  applyChanges(index: number, changes: readonly RecordChange[]): void {
    if (index !== this.#version.index + 1) return;
    const draft = this.#version.draft(index, false);
    const kept: RecordChange[] = [];
    for (const c of changes) {
      if (!this.#known.has(c.table)) continue;
      if (c.value === undefined) {
        draft.delete(c.table, c.key);
        kept.push(Object.freeze({ table: c.table, key: c.key, value: undefined, createIndex: c.createIndex, modifyIndex: c.modifyIndex }));
      } else {
        const record = adoptRecord(c);
        draft.putRecord(record);
        kept.push(record);
      }
    }
    this.#version = draft.finish().version;
    this.#publish(Object.freeze({ index, changes: Object.freeze(kept) }));
  }

  #publish(set: ChangeSet): void {
    this.#outbox.push(set);
    if (this.#delivering) return;
    this.#delivering = true;
    try {
      for (let next = this.#outbox.shift(); next !== undefined; next = this.#outbox.shift()) this.#events.emit('state:change', next);
    } finally {
      this.#delivering = false;
    }
  }

  #arm(): void {
    if (this.#closed || this.#timer !== undefined) return;
    this.#timer = this.#clock.setTimer(() => {
      this.#timer = undefined;
      this.hint();
      this.#arm();
    }, this.#pollMs, { unref: true });
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer !== undefined) this.#clock.clearTimer(this.#timer);
    this.#timer = undefined;
    await this.#catchUp;
  }
}
