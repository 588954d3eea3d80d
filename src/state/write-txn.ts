import { InvalidArgumentError, InvalidStateError } from '../errors.js';
import type { StoredRecord, WriteTxn } from './types.js';
import { ownValue } from './values.js';
import type { TablesDraft } from './versioned-tables.js';

/**
 * The face of a draft given to `StateStore.write`. It validates input before the draft is touched, so a rejected
 * call leaves the transaction as it was, and it refuses use after the transaction ended (a reference that escaped
 * the callback must not write into a version that is already published).
 */
export class Transaction implements WriteTxn {
  #draft: TablesDraft | undefined;

  constructor(draft: TablesDraft) {
    this.#draft = draft;
  }

  get<T = unknown>(table: string, key: string): StoredRecord<T> | undefined {
    return this.#open('get').get(table, key) as StoredRecord<T> | undefined;
  }

  put(table: string, key: string, value: unknown): void {
    const draft = this.#open('put');
    checkKey(key);
    draft.put(table, key, ownValue(value, `value of ${table}/${key}`));
  }

  delete(table: string, key: string): void {
    const draft = this.#open('delete');
    checkKey(key);
    draft.delete(table, key);
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
  if (typeof key !== 'string' || key.length === 0) throw new InvalidArgumentError('key', 'a non-empty string', key);
}
