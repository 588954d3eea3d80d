/**
 * Types of the versioned state store, its replicas and the plan applier.
 *
 * Glossary
 * - index: the number of the write transaction that produced a state. The empty store is at index 0; every
 *   transaction that changes at least one record commits at `index + 1`. Indexes are therefore consecutive, which is
 *   what lets a replica detect a missed change set.
 * - record: one value in a named table under a string key, with `createIndex` (the transaction that created it) and
 *   `modifyIndex` (the transaction that last wrote it: its version).
 * - snapshot: an immutable view of every table at one index. Later writes never show through.
 * - change set: the net effect of one committed transaction, in commit order on the change stream.
 * - plan: writes a scheduler wants to make, each carrying the `modifyIndex` it read (optimistic concurrency).
 *
 * Invariants
 * - Records and their values handed out by a snapshot, a transaction or the change stream are frozen (deeply for
 *   plain objects and arrays; the contents of `Map`, `Set` and typed arrays cannot be frozen by JavaScript and are
 *   read-only by contract). Mutating them is a bug even where the language does not stop it.
 * - Values are structured-cloneable, because change sets cross to pool threads, and hold no shared memory (a
 *   `SharedArrayBuffer` or a view on one is refused with `InvalidArgumentError`: a copy of it is the same memory, so
 *   it could not be kept unchanged).
 */

export interface StoredRecord<T = unknown> {
  readonly table: string;
  readonly key: string;
  readonly value: T;
  readonly createIndex: number;
  /** Index of the transaction that last wrote this record: its version. */
  readonly modifyIndex: number;
}

/** One record's net change in a transaction. `value === undefined` means the record was deleted. */
export interface RecordChange {
  readonly table: string;
  readonly key: string;
  readonly value: unknown;
  readonly createIndex: number;
  readonly modifyIndex: number;
}

/** The net changes of one committed transaction (or, from `full()`, the whole state at `index`). */
export interface ChangeSet {
  readonly index: number;
  readonly changes: readonly RecordChange[];
}

/** An immutable view of the state at `index`. */
export interface Snapshot {
  readonly index: number;
  get<T = unknown>(table: string, key: string): StoredRecord<T> | undefined;
  /** Every record of `table`, in no particular order (stable for a given set of keys). */
  list<T = unknown>(table: string): IterableIterator<StoredRecord<T>>;
  size(table: string): number;
  tables(): readonly string[];
}

/** One write of a plan. */
export interface PlanWrite {
  readonly table: string;
  readonly key: string;
  /** The new value; required unless `delete` is true. */
  readonly value?: unknown;
  readonly delete?: boolean;
  /** The `modifyIndex` the scheduler read; 0 means it expected the record to be absent. */
  readonly readIndex: number;
}

export interface Plan {
  readonly evalId?: string;
  /** 1..100, default 50. Higher priorities are applied first; equal priorities in arrival order. */
  readonly priority?: number;
  readonly writes: readonly PlanWrite[];
  /** When true, any rejected write rejects the whole plan (Nomad's gang commit). */
  readonly allAtOnce?: boolean;
}

export interface PlanResult {
  /** Index of the commit; 0 when nothing was committed. */
  readonly index: number;
  /** Writes that were not committed (the caller's own write objects, as submitted). */
  readonly rejected: readonly PlanWrite[];
  /** 0 when nothing was rejected; otherwise the store index the scheduler must see before it retries. */
  readonly refreshIndex: number;
}

/**
 * A user check run by the plan applier on the writes that survived the version check (Nomad's per-node fit check).
 * Returns the writes to reject; returning nothing accepts them all. It runs on the main thread, synchronously and
 * serially with every other plan, so it must be fast. The plan it sees is built from frozen copies made when the plan
 * was submitted (what will commit), not the caller's objects; writes are matched by table and key.
 */
export type EvaluatePlan = (state: Snapshot, plan: Plan) => readonly PlanWrite[] | undefined | void;

/** A write transaction. Valid only while the function given to `StateStore.write` runs. */
export interface WriteTxn {
  /** Reads through the transaction: its own earlier writes are visible. */
  get<T = unknown>(table: string, key: string): StoredRecord<T> | undefined;
  put(table: string, key: string, value: unknown): void;
  delete(table: string, key: string): void;
}
