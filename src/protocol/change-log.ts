/**
 * The change log: every commit of the state store, written once by main into shared memory and read by every pool
 * thread's replica up to where it needs to be. Main pays one encoding per commit whatever the thread count; a thread
 * reads the commits it has not applied before it starts an item. Imported by both sides.
 *
 * Layout: a header of Int32 words, then a ring of `capacity` bytes (a power of two) of records, each
 * `[u32 length][u32 pad][f64 index][changes…]`, 8-byte aligned, never split across the ring's end: a record that
 * does not fit before the end leaves a `WRAP` length there and starts at offset 0.
 * - `HEAD` (Int32): the position (bytes ever written, wrapping at 2^32) just after the last complete record,
 *   published with `Atomics.store` after the record's bytes: a reader that loads `HEAD` sees every record before it.
 * - `RESERVED` (Int32): where the record being written ends, published before its bytes are written: the furthest
 *   the writer may be touching.
 * - `WAITERS` (Int32): readers waiting for a commit they need (`changed`); main notifies `HEAD` after an append only
 *   while there are some, so a commit costs nothing more when nobody waits.
 * Main never waits for a reader. A reader that fell more than a ring behind finds its records overwritten: it loads
 * `RESERVED` after decoding a record, and when the writer may have reached into the bytes it read (a seqlock's
 * check), it stops and says so (`lapped`). Its replica must then be reset from a full copy of the state, which
 * comes with the position it is current at.
 *
 * Positions are compared by wrapping 32-bit difference, valid while a reader is less than 2^31 bytes behind (the
 * ring is far smaller, so a reader that far behind has lapped anyway).
 */
import type { ChangeSet, RecordChange } from '../state/types.js';
import { ByteReader, ByteWriter, type SharedBuffers } from './byte-codec.js';

const HEADER_BYTES = 64;
const HEAD = 0;
const RESERVED = 1;
const WAITERS = 2;
const WRAP = 0xffffffff;
const RECORD_HEADER_BYTES = 16;
const KIND_PUT = 1;
const KIND_DELETE = 2;
/** Default ring size: thousands of commits of dozens of writes each before a thread far behind must be reset. */
export const DEFAULT_CHANGE_LOG_BYTES = 32 * 1024 * 1024;

/** Values in the state hold no shared memory (the store refuses it), so no buffer needs a number here. */
const NO_SHARED: SharedBuffers = Object.freeze({ idOf: () => undefined, bufferOf: () => undefined });

const align8 = (n: number): number => (n + 7) & ~7;

function ringCapacity(buffer: SharedArrayBuffer): number {
  return buffer.byteLength - HEADER_BYTES;
}

/**
 * The bytes of a change's value when it holds them already (a value kept sealed: see `state/sealed.ts`), so that
 * they are copied into the log as they are; undefined for a value to encode.
 */
export type SealedBytesOf = (change: RecordChange) => Uint8Array | undefined;

/** What a reader makes of a value's bytes (copied out of the ring): a sealed value, decoded where it is read. */
export type Seal = (bytes: Uint8Array) => unknown;

/** Main: appends each commit. */
export class ChangeLogWriter {
  readonly buffer: SharedArrayBuffer;
  readonly #head: Int32Array;
  readonly #ring: Uint8Array;
  readonly #capacity: number;
  readonly #mask: number;
  readonly #writer = new ByteWriter(NO_SHARED, 4096);
  readonly #sealedBytes: SealedBytesOf;
  #position = 0;

  constructor(capacity = DEFAULT_CHANGE_LOG_BYTES, sealedBytes: SealedBytesOf = () => undefined) {
    this.#sealedBytes = sealedBytes;
    if (!Number.isInteger(Math.log2(capacity)) || capacity < 4096) throw new RangeError(`Expected a power of two of at least 4096 bytes, got ${capacity}`);
    this.buffer = new SharedArrayBuffer(HEADER_BYTES + capacity);
    this.#head = new Int32Array(this.buffer, 0, HEADER_BYTES / 4);
    this.#ring = new Uint8Array(this.buffer, HEADER_BYTES, capacity);
    this.#capacity = capacity;
    this.#mask = capacity - 1;
  }

  /** Where the next record goes: a reader that starts here reads every commit appended from now on. */
  get position(): number {
    return this.#position;
  }

  /**
   * Appends one commit. A change set larger than the whole ring cannot be read by anyone: false then, and the
   * readers must be reset past it (the caller resets them from a full copy).
   */
  append(change: ChangeSet): boolean {
    const w = this.#writer;
    w.reset();
    w.u32(0);
    w.u32(0);
    w.f64(change.index);
    w.u32(change.changes.length);
    for (const c of change.changes) writeChange(w, c, this.#sealedBytes);
    const length = align8(w.length);
    if (length > this.#capacity) return false;
    let at = this.#position & this.#mask;
    const skip = at + length > this.#capacity ? this.#capacity - at : 0;
    Atomics.store(this.#head, RESERVED, (this.#position + skip + length) | 0);
    if (skip > 0) {
      // Does not fit before the end: the rest of the ring is skipped.
      new DataView(this.#ring.buffer, this.#ring.byteOffset + at, 4).setUint32(0, WRAP, true);
      this.#position = (this.#position + skip) | 0;
      at = 0;
    }
    const bytes = w.bytes;
    new DataView(bytes.buffer, bytes.byteOffset, 4).setUint32(0, length, true);
    this.#ring.set(bytes, at);
    this.#position = (this.#position + length) | 0;
    Atomics.store(this.#head, HEAD, this.#position);
    if (Atomics.load(this.#head, WAITERS) > 0) Atomics.notify(this.#head, HEAD);
    return true;
  }
}

function writeChange(w: ByteWriter, c: RecordChange, sealedBytes: SealedBytesOf): void {
  w.string(c.table);
  w.string(c.key);
  w.f64(c.createIndex);
  w.f64(c.modifyIndex);
  const sealed = sealedBytes(c);
  if (sealed !== undefined) {
    w.u8(KIND_PUT);
    w.blob(sealed);
  } else if (c.value === undefined) w.u8(KIND_DELETE);
  else {
    w.u8(KIND_PUT);
    const at = w.startBlob();
    w.value(c.value);
    w.endBlob(at);
  }
}

/** What a reader found: it caught up, or it had fallen a ring behind (and must be reset from a full copy). */
export type CatchUp = 'caught-up' | 'lapped';

/** A thread: reads the commits after its position. */
export class ChangeLogReader {
  readonly #head: Int32Array;
  readonly #ring: Uint8Array;
  readonly #view: DataView;
  readonly #capacity: number;
  readonly #mask: number;
  readonly #reader = new ByteReader(NO_SHARED);
  readonly #seal: Seal;
  #position: number;

  /** `seal` makes each put's value from its bytes (by default it decodes them at once). */
  constructor(buffer: SharedArrayBuffer, position: number, seal?: Seal) {
    this.#seal = seal ?? decodeNow;
    this.#capacity = ringCapacity(buffer);
    this.#mask = this.#capacity - 1;
    this.#head = new Int32Array(buffer, 0, HEADER_BYTES / 4);
    this.#ring = new Uint8Array(buffer, HEADER_BYTES, this.#capacity);
    this.#view = new DataView(buffer, HEADER_BYTES, this.#capacity);
    this.#position = position;
  }

  /** Whether the writer has appended anything this reader has not read. */
  get behind(): boolean {
    return Atomics.load(this.#head, HEAD) !== this.#position;
  }

  /**
   * Resolves once the writer appended past this reader's position, or after `timeoutMs` (whichever comes first):
   * how a thread waiting for an index learns of the commit it needs without polling.
   */
  async changed(timeoutMs: number): Promise<void> {
    const head = Atomics.load(this.#head, HEAD);
    if (head !== this.#position) return;
    Atomics.add(this.#head, WAITERS, 1);
    try {
      const waited = Atomics.waitAsync(this.#head, HEAD, head, timeoutMs);
      if (waited.async) await waited.value;
    } finally {
      Atomics.sub(this.#head, WAITERS, 1);
    }
  }

  /** Starts over at `position` (the one a full copy of the state was taken at). */
  reset(position: number): void {
    this.#position = position;
  }

  /** Reads every record up to the writer's head, in order, calling `apply` with each. */
  catchUp(apply: (change: ChangeSet) => void): CatchUp {
    const head = Atomics.load(this.#head, HEAD);
    while (this.#position !== head) {
      if (this.#overwritten()) return 'lapped';
      const at = this.#position & this.#mask;
      const length = this.#view.getUint32(at, true);
      if (length === WRAP) {
        this.#position = (this.#position + (this.#capacity - at)) | 0;
        continue;
      }
      let change: ChangeSet;
      try {
        if (length < RECORD_HEADER_BYTES || at + length > this.#capacity) throw new RangeError(`a record of ${length} bytes at ${at}`);
        change = this.#decode(at);
      } catch (error) {
        // Torn bytes of a record the writer came round to can read as anything: they mean lapped, nothing else.
        if (this.#overwritten()) return 'lapped';
        throw error;
      }
      // The writer may have come round into these bytes while they were read: then they cannot be trusted.
      if (this.#overwritten()) return 'lapped';
      this.#position = (this.#position + length) | 0;
      apply(change);
    }
    return 'caught-up';
  }

  /** The writer may be touching (or has touched) the bytes at this reader's position: they are a ring old. */
  #overwritten(): boolean {
    return ((Atomics.load(this.#head, RESERVED) - this.#position) | 0) > this.#capacity;
  }

  #decode(at: number): ChangeSet {
    const r = this.#reader;
    r.reset(this.#ring, at + 8);
    const index = r.f64();
    const count = r.u32();
    const changes = new Array<RecordChange>(count);
    for (let i = 0; i < count; i++) {
      const table = r.string();
      const key = r.string();
      const createIndex = r.f64();
      const modifyIndex = r.f64();
      const value = r.u8() === KIND_PUT ? this.#seal(r.blob()) : undefined;
      changes[i] = { table, key, value, createIndex, modifyIndex };
    }
    return { index, changes };
  }
}

const nowReader = new ByteReader(NO_SHARED);
function decodeNow(bytes: Uint8Array): unknown {
  nowReader.reset(bytes, 0);
  return nowReader.value();
}

export const changeLogLayout = Object.freeze({ HEADER_BYTES, RECORD_HEADER_BYTES });
