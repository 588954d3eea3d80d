/**
 * Values kept as their bytes until someone reads them. A plan's values come from a pool thread as bytes, are stored
 * by main and go into the change log as the same bytes, and every replica stores them as bytes again: a value is
 * decoded only where it is read (on main: `snapshot().get(…).value`, `evaluatePlan`, a change listener; on a thread:
 * a scheduler's `ctx.snapshot`), once per place, and most records are never read on most threads. `record.value` is
 * decoded on first read, frozen and owned, and the same object every time.
 *
 * A sealed value's bytes are those of `ByteWriter.value` and hold no shared memory (the store refuses it), so they are
 * decoded without a registry. The bytes are never changed once sealed.
 */
import { ByteReader, type SharedBuffers } from '../protocol/byte-codec.js';
import type { PlanWrite, RecordChange, StoredRecord } from './types.js';
import { adoptValue } from './values.js';

const NO_SHARED: SharedBuffers = Object.freeze({ idOf: () => undefined, bufferOf: () => undefined });
/** Decoding never nests (a value's decode reads no other sealed value), so one reader serves every decode. */
const reader = new ByteReader(NO_SHARED);

export class SealedValue {
  readonly bytes: Uint8Array;
  #value: unknown;
  #open = false;

  /** `bytes`: the value's encoding (`ByteWriter.value`), owned by this sealed value from now on. */
  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
  }

  /** The value, decoded on first use (frozen and owned, as every stored value). */
  open(): unknown {
    if (!this.#open) {
      reader.reset(this.bytes, 0);
      this.#value = adoptValue(reader.value());
      this.#open = true;
    }
    return this.#value;
  }
}

/**
 * What a sealed record and a sealed write share: the bytes, and `value` opened from them where someone reads it.
 * `value` is a getter on the class (an object literal with a getter costs ten times as much to make, and one is made
 * per write): so a spread or a structured clone of the holder does not carry the value, while `holder.value`,
 * destructuring and `JSON.stringify` (through `toJSON`) do.
 */
abstract class SealedHolder {
  readonly #sealed: SealedValue;

  constructor(sealed: SealedValue) {
    this.#sealed = sealed;
  }

  get value(): unknown {
    return this.#sealed.open();
  }

  get sealed(): SealedValue {
    return this.#sealed;
  }
}

/** A record whose value is sealed. */
class SealedRecord extends SealedHolder implements StoredRecord {
  readonly table: string;
  readonly key: string;
  readonly createIndex: number;
  readonly modifyIndex: number;

  constructor(table: string, key: string, sealed: SealedValue, createIndex: number, modifyIndex: number) {
    super(sealed);
    this.table = table;
    this.key = key;
    this.createIndex = createIndex;
    this.modifyIndex = modifyIndex;
    Object.freeze(this);
  }

  toJSON(): StoredRecord {
    return { table: this.table, key: this.key, value: this.value, createIndex: this.createIndex, modifyIndex: this.modifyIndex };
  }
}

/** A plan write whose value is sealed (from a pool thread): `value` reads it, the applier stores the bytes. */
class SealedWrite extends SealedHolder implements PlanWrite {
  readonly table: string;
  readonly key: string;
  readonly readIndex: number;

  constructor(table: string, key: string, sealed: SealedValue, readIndex: number) {
    super(sealed);
    this.table = table;
    this.key = key;
    this.readIndex = readIndex;
    Object.freeze(this);
  }

  toJSON(): PlanWrite {
    return { table: this.table, key: this.key, value: this.value, readIndex: this.readIndex };
  }
}

/** The sealed value a record or a write holds, if it holds one. */
export function sealedOf(holder: unknown): SealedValue | undefined {
  return holder instanceof SealedHolder ? holder.sealed : undefined;
}

/** A frozen record of `value`, which may be sealed (then `record.value` decodes it on first read). */
export function storedRecord(table: string, key: string, value: unknown, createIndex: number, modifyIndex: number): StoredRecord {
  if (value instanceof SealedValue) return new SealedRecord(table, key, value, createIndex, modifyIndex);
  return Object.freeze({ table, key, value, createIndex, modifyIndex });
}

/**
 * The record a put change stores (it came from the change stream or the log): frozen, its value adopted, or kept
 * sealed when it came sealed.
 */
export function adoptRecord(c: RecordChange): StoredRecord {
  const sealed = sealedOf(c);
  const value = sealed ?? (c.value instanceof SealedValue ? c.value : adoptValue(c.value));
  return storedRecord(c.table, c.key, value, c.createIndex, c.modifyIndex);
}

/** The bytes a change holds sealed, for the change log to copy as they are. */
export function sealedBytesOf(change: RecordChange): Uint8Array | undefined {
  return sealedOf(change)?.bytes;
}

/** A value's bytes (copied out of the log or a result ring) kept sealed. */
export function seal(bytes: Uint8Array): SealedValue {
  return new SealedValue(bytes);
}

/**
 * A frozen plan write of `value`, which may be sealed: its `value` reads the decoded value (what `evaluatePlan`
 * sees), and the plan applier stores the sealed bytes as they are.
 */
export function planWrite(table: string, key: string, value: unknown, readIndex: number): PlanWrite {
  if (value instanceof SealedValue) return new SealedWrite(table, key, value, readIndex);
  return Object.freeze({ table, key, value, readIndex });
}

/** What to store for a record or write: its sealed value when it holds one, else its (decoded) value. */
export function storedValue(holder: { readonly value?: unknown }): unknown {
  return sealedOf(holder) ?? holder.value;
}
