import { InvalidArgumentError, UnknownTableError } from '../errors.js';
import { HashTrie, newEditToken, type EditToken } from './hash-trie.js';
import { storedRecord } from './sealed.js';
import type { RecordChange, Snapshot, StoredRecord } from './types.js';

/**
 * Versions of a set of named tables, shared by the main-thread `StateStore` and the thread-side `Replica`.
 *
 * A `TablesVersion` is the whole state at one index and is itself the `Snapshot`: taking a snapshot is handing out
 * the current version (no copy). A `TablesDraft` builds the next version from a base with structural sharing
 * (see `hash-trie.ts`); the base never changes, so every snapshot stays valid for as long as someone holds it.
 *
 * `strict` decides how an unknown table name reads. The store knows its tables and throws `UnknownTableError`.
 * A replica learns tables only from the records it receives, so there an unknown table reads as empty.
 */

type Table = HashTrie<StoredRecord>;

function checkKey(key: unknown): asserts key is string {
  if (typeof key !== 'string') throw new InvalidArgumentError('key', 'a string', key);
}

export class TablesVersion implements Snapshot {
  readonly index: number;
  readonly #tables: ReadonlyMap<string, Table>;
  readonly #strict: boolean;
  #names: readonly string[] | undefined;

  /** Internal: use `TablesVersion.empty` and `draft().finish()`. */
  constructor(index: number, tables: ReadonlyMap<string, Table>, strict: boolean, names?: readonly string[]) {
    this.index = index;
    this.#tables = tables;
    this.#strict = strict;
    this.#names = names;
  }

  /** The empty state at `index` (0 unless seeding), with `names` as its tables. */
  static empty(names: readonly string[], strict: boolean, index = 0): TablesVersion {
    const tables = new Map<string, Table>();
    for (const name of names) tables.set(name, HashTrie.empty());
    return new TablesVersion(index, tables, strict, strict ? Object.freeze([...names]) : undefined);
  }

  get<T = unknown>(table: string, key: string): StoredRecord<T> | undefined {
    const records = this.#table(table);
    checkKey(key);
    return records?.get(key) as StoredRecord<T> | undefined;
  }

  list<T = unknown>(table: string): IterableIterator<StoredRecord<T>> {
    const records = this.#table(table) ?? HashTrie.empty<StoredRecord>();
    return records.values() as IterableIterator<StoredRecord<T>>;
  }

  size(table: string): number {
    return this.#table(table)?.size ?? 0;
  }

  tables(): readonly string[] {
    this.#names ??= Object.freeze([...this.#tables.keys()]);
    return this.#names;
  }

  /** Every record, table by table, as puts: the change set that seeds a replica. */
  *records(): Generator<StoredRecord, void, undefined> {
    for (const table of this.#tables.values()) yield* table.values();
  }

  /** Starts the next version, to be committed at `index`. With `track`, `finish()` reports the net changes. */
  draft(index: number, track: boolean): TablesDraft {
    return new TablesDraft(this, new Map(this.#tables), this.#strict, this.#strict ? this.tables() : undefined, index, track);
  }

  #table(table: string): Table | undefined {
    const records = this.#tables.get(table);
    if (records === undefined && this.#strict) throw new UnknownTableError(table, this.tables());
    return records;
  }
}

interface Touched {
  readonly table: string;
  readonly key: string;
  readonly before: StoredRecord | undefined;
}

/** A version under construction. Writes under one edit token, so a transaction copies each trie path at most once. */
export class TablesDraft {
  readonly index: number;
  readonly #base: TablesVersion;
  readonly #tables: Map<string, Table>;
  readonly #strict: boolean;
  readonly #names: readonly string[] | undefined;
  readonly #edit: EditToken = newEditToken();
  /** First-touch order of every written key, with the record it had in the base; undefined when not tracking. */
  readonly #touched: Touched[] | undefined;
  readonly #seen = new Map<string, Set<string>>();

  /** Internal: use `TablesVersion.draft`. */
  constructor(base: TablesVersion, tables: Map<string, Table>, strict: boolean, names: readonly string[] | undefined, index: number, track: boolean) {
    this.#base = base;
    this.#tables = tables;
    this.#strict = strict;
    this.#names = names;
    this.index = index;
    this.#touched = track ? [] : undefined;
  }

  get(table: string, key: string): StoredRecord | undefined {
    const records = this.#table(table, false);
    checkKey(key);
    return records?.get(key);
  }

  /** Writes `value` (already owned and frozen by the caller, or sealed) under the draft's index. */
  put(table: string, key: string, value: unknown): StoredRecord {
    const records = this.#table(table, true)!;
    checkKey(key);
    this.#touch(table, key);
    const createIndex = records.get(key)?.createIndex ?? this.index;
    const record = storedRecord(table, key, value, createIndex, this.index);
    this.#tables.set(table, records.set(key, record, this.#edit));
    return record;
  }

  /** Stores a record as it is (a replica replaying the store's change stream keeps the store's indexes). */
  putRecord(record: StoredRecord): void {
    const records = this.#table(record.table, true)!;
    this.#touch(record.table, record.key);
    this.#tables.set(record.table, records.set(record.key, record, this.#edit));
  }

  delete(table: string, key: string): void {
    const records = this.#table(table, false);
    checkKey(key);
    if (records === undefined || records.get(key) === undefined) return;
    this.#touch(table, key);
    this.#tables.set(table, records.delete(key, this.#edit));
  }

  /**
   * Ends the draft. `changes` holds one entry per record whose state differs from the base, in first-touch order:
   * the stored record for a put, a record with `value: undefined` for a delete. A key written and then removed
   * again within the draft changes nothing and is left out. The draft must not be used afterwards.
   */
  finish(): { readonly version: TablesVersion; readonly changes: readonly RecordChange[] } {
    const version = new TablesVersion(this.index, this.#tables, this.#strict, this.#names);
    const changes: RecordChange[] = [];
    for (const { table, key, before } of this.#touched ?? []) {
      const after = this.#tables.get(table)?.get(key);
      if (after !== undefined) changes.push(after);
      else if (before !== undefined) {
        changes.push(Object.freeze({ table, key, value: undefined, createIndex: before.createIndex, modifyIndex: this.index }));
      }
    }
    return { version, changes: Object.freeze(changes) };
  }

  #touch(table: string, key: string): void {
    if (this.#touched === undefined) return;
    let keys = this.#seen.get(table);
    if (keys === undefined) this.#seen.set(table, (keys = new Set()));
    if (keys.has(key)) return;
    keys.add(key);
    this.#touched.push({ table, key, before: this.#base.get(table, key) });
  }

  #table(table: string, create: boolean): Table | undefined {
    const records = this.#tables.get(table);
    if (records !== undefined) return records;
    if (this.#strict) throw new UnknownTableError(table, this.#names ?? []);
    if (!create) return undefined;
    if (typeof table !== 'string') throw new InvalidArgumentError('table', 'a string', table);
    const empty = HashTrie.empty<StoredRecord>();
    this.#tables.set(table, empty);
    return empty;
  }
}
