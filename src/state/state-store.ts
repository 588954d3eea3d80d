import type { StateBackend } from '../backend/state-backend.js';
import { InvalidArgumentError, InvalidOptionError, InvalidStateError } from '../errors.js';
import { TypedEmitter } from '../events.js';
import { assertKey } from '../storable-key.js';
import { createDefaultLogger, isLogger, type Logger } from '../observability/logger.js';
import { ChangeHistory } from './change-history.js';
import type { ChangeSet, Snapshot, WriteTxn } from './types.js';
import { TablesVersion } from './versioned-tables.js';
import { waitForFeedIndex } from './wait-for-feed-index.js';
import { runTransaction, Transaction } from './write-txn.js';

export interface StateStoreOptions {
  /** The tables of the store, fixed for its lifetime. Default: none. */
  readonly tables?: readonly string[];
  /** How many committed change sets `changesSince` can replay. Default 10 000; 0 keeps none. */
  readonly historyLimit?: number;
  /** Receives errors thrown by change listeners. Default: a pino logger at `warn`. */
  readonly logger?: Logger;
}

export const stateStoreDefaults = Object.freeze({ historyLimit: 10_000 });

interface StoreEvents {
  'state:change': ChangeSet;
}

/**
 * The main thread's versioned state: named tables of records. Each write transaction that changes something commits
 * at the next index and goes out on the change stream; snapshots are immutable and cost O(1). The in-memory
 * `StateBackend`: the store is its own replica, and every method answers synchronously.
 */
export class StateStore implements StateBackend {
  readonly #names: readonly string[];
  readonly #history: ChangeHistory;
  readonly #events: TypedEmitter<StoreEvents>;
  #logger: Logger | undefined;
  #version: TablesVersion;
  #writing = false;
  /** Committed change sets not yet delivered to listeners; see `#publish`. */
  readonly #outbox: ChangeSet[] = [];
  #delivering = false;

  constructor(options: StateStoreOptions = {}) {
    if (options === null || typeof options !== 'object') throw new InvalidOptionError('options', 'an object', options);
    const { tables = [], historyLimit = stateStoreDefaults.historyLimit, logger } = options;
    if (!Array.isArray(tables)) throw new InvalidOptionError('tables', 'an array of table names', tables);
    const seen = new Set<string>();
    for (const name of tables as unknown[]) {
      if (typeof name !== 'string' || name.length === 0 || seen.has(name)) {
        throw new InvalidOptionError('tables', 'an array of distinct non-empty strings', tables);
      }
      // A table's name is stored with each of its records' keys (storable-key.ts).
      assertKey(`tables[${seen.size}]`, name, InvalidOptionError);
      seen.add(name);
    }
    if (!Number.isSafeInteger(historyLimit) || historyLimit < 0) {
      throw new InvalidOptionError('historyLimit', 'an integer >= 0', historyLimit);
    }
    if (logger !== undefined && !isLogger(logger)) throw new InvalidOptionError('logger', 'a pino-compatible logger', logger);
    this.#logger = logger;
    this.#names = Object.freeze([...seen]);
    this.#history = new ChangeHistory(historyLimit);
    this.#version = TablesVersion.empty(this.#names, true);
    this.#events = new TypedEmitter<StoreEvents>(() => (this.#logger ??= createDefaultLogger('tickpool:state')));
  }

  /** Index of the last committed transaction (0 for an empty store). */
  get index(): number {
    return this.#version.index;
  }

  tables(): readonly string[] {
    return this.#names;
  }

  /** The state as of now. Immutable: later writes never show through. O(1): a committed version is never changed. */
  snapshot(): Snapshot {
    return this.#version;
  }

  /**
   * Runs `fn` as one transaction. If it throws, nothing is committed and the error propagates. If it changed
   * something, the transaction commits at `index + 1`, is delivered to change listeners before `write` returns,
   * and its change set is returned. A transaction with no net change commits nothing and returns
   * `{ index: <current>, changes: [] }`. `fn` must be synchronous; transactions cannot nest.
   */
  write(fn: (txn: WriteTxn) => void): ChangeSet {
    if (typeof fn !== 'function') throw new InvalidArgumentError('fn', 'a function', fn);
    if (this.#writing) {
      throw new InvalidStateError('Expected write() outside any other write transaction, but it was called from inside one');
    }
    const draft = this.#version.draft(this.#version.index + 1, true);
    const txn = new Transaction(draft);
    this.#writing = true;
    try {
      runTransaction(txn, fn);
    } finally {
      this.#writing = false;
    }
    const { version, changes } = draft.finish();
    if (changes.length === 0) return Object.freeze({ index: this.#version.index, changes });
    this.#version = version;
    const set: ChangeSet = Object.freeze({ index: version.index, changes });
    this.#history.push(set);
    this.#publish(set);
    return set;
  }

  /**
   * Subscribes to the change stream: every committed change set, in commit order, synchronously after its commit.
   * A throwing listener is logged and does not affect the commit or other listeners. Returns the unsubscribe.
   */
  onChange(listener: (change: ChangeSet) => void): () => void {
    if (typeof listener !== 'function') throw new InvalidArgumentError('listener', 'a function', listener);
    return this.#events.on('state:change', listener);
  }

  /**
   * Resolves once the store is at `index` or beyond: `undefined` at once when it already is (nothing to wait for,
   * no promise), else a promise settled by the commit that reaches it, or rejected with `AbortedError` when `signal`
   * aborts. Throws `InvalidArgumentError` for an index that is not an integer >= 0.
   */
  waitForIndex(index: number, signal?: AbortSignal): Promise<void> | undefined {
    return waitForFeedIndex(this, index, signal);
  }

  /**
   * The change sets committed after `index`, in order, for a replica that is at `index`. `undefined` when the
   * history no longer reaches back that far: the replica must then be reset with `full()`.
   */
  changesSince(index: number): readonly ChangeSet[] | undefined {
    if (!Number.isSafeInteger(index) || index < 0 || index > this.#version.index) {
      throw new InvalidArgumentError('index', `an integer from 0 to the store index ${this.#version.index}`, index);
    }
    return this.#history.since(index, this.#version.index);
  }

  /** The whole state at the current index as one change set of puts (to seed a replica with `reset`). */
  full(): ChangeSet {
    return Object.freeze({ index: this.#version.index, changes: Object.freeze([...this.#version.records()]) });
  }

  #publish(set: ChangeSet): void {
    // A listener may write again. Its change set is delivered after the current one has reached every listener,
    // so each listener sees the stream in commit order.
    this.#outbox.push(set);
    if (this.#delivering) return;
    this.#delivering = true;
    try {
      for (let next = this.#outbox.shift(); next !== undefined; next = this.#outbox.shift()) {
        this.#events.emit('state:change', next);
      }
    } finally {
      this.#delivering = false;
    }
  }
}
