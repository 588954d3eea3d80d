import { InvalidArgumentError, InvalidStateError } from '../errors.js';
import { assertKey } from '../storable-key.js';
import type { StoredRecord, WriteTxn } from './types.js';
import { SealedValue } from './sealed.js';
import { ownValue } from './values.js';
import type { TablesDraft } from './versioned-tables.js';

/** Told of each write a transaction accepts: the owned, frozen value, or `undefined` for a delete. */
export type WriteRecorder = (table: string, key: string, value: unknown) => void;

/**
 * The face of a draft given to the callback of `write(fn)`. It validates input before the draft is touched, so a
 * rejected call leaves the transaction as it was, and it refuses use after the transaction ended (a reference that
 * escaped the callback must not write into a version that is already published). With a recorder, every accepted
 * write is also reported (a shared store replays them at its commit).
 */
export class Transaction implements WriteTxn {
  #draft: TablesDraft | undefined;
  readonly #record: WriteRecorder | undefined;

  constructor(draft: TablesDraft, record?: WriteRecorder) {
    this.#draft = draft;
    this.#record = record;
  }

  get<T = unknown>(table: string, key: string): StoredRecord<T> | undefined {
    return this.#open('get').get(table, key) as StoredRecord<T> | undefined;
  }

  put(table: string, key: string, value: unknown): void {
    const draft = this.#open('put');
    checkKey(key);
    // A sealed value (a plan's, from a pool thread) is immutable bytes already: stored as it is.
    const owned = value instanceof SealedValue ? value : ownValue(value, `value of ${table}/${key}`);
    draft.put(table, key, owned);
    this.#record?.(table, key, owned);
  }

  delete(table: string, key: string): void {
    const draft = this.#open('delete');
    checkKey(key);
    draft.delete(table, key);
    this.#record?.(table, key, undefined);
  }

  close(): void {
    this.#draft = undefined;
  }

  #open(operation: string): TablesDraft {
    if (this.#draft === undefined) {
      throw new InvalidStateError(`Expected ${operation}() inside the write() callback, but its transaction has ended`);
    }
    return this.#draft;
  }
}

function checkKey(key: unknown): void {
  // The plans' rule (storable-key.ts): a direct write shares its commit batch with plans on PostgreSQL.
  assertKey('key', key, InvalidArgumentError);
}

/**
 * Runs `fn` on `txn` and ends the transaction, whatever `fn` does. An async `fn` is refused: its writes after the
 * first `await` would land outside the transaction, so none of it may commit (its promise's rejection is swallowed,
 * nobody else awaits it).
 */
export function runTransaction(txn: Transaction, fn: (txn: WriteTxn) => void): void {
  try {
    const result: unknown = fn(txn);
    if (result !== null && typeof result === 'object' && typeof (result as { then?: unknown }).then === 'function') {
      (result as Promise<unknown>).then(undefined, () => {});
      throw new InvalidArgumentError('fn', 'a synchronous function', result);
    }
  } finally {
    txn.close();
  }
}
