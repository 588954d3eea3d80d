/**
 * A pool thread's results, in shared memory: one ring per thread, written by that thread (one producer) and drained
 * by main (one consumer), in batches. A thread appends the result of each item as it ends, before it takes the next
 * one, so a result never waits behind another item, and it survives the thread (main drains a dead thread's ring
 * before it accounts for what the thread held). Imported by both sides.
 *
 * Layout: `HEAD` (Int32: main's read position) and `TAIL` (Int32: the thread's write position, stored after the
 * record's bytes), then a ring of `capacity` bytes of records `[u32 size][u32 length][bytes…]` (`size`: the
 * record's bytes in the ring, 8-byte aligned; `length`: its own), never split
 * across the ring's end (`WRAP` marks the skipped rest). Positions wrap at 2^32 and are compared by difference.
 * A record that does not fit (main is far behind, or the record is huge) is not written: the thread sends that
 * result by message instead.
 */

const HEAD = 0;
const TAIL = 1;
const HEADER_BYTES = 16;
const WRAP = 0xffffffff;
/** Default ring: thousands of ordinary results, and any result of up to a quarter of it. */
export const DEFAULT_RESULT_RING_BYTES = 1024 * 1024;

const align8 = (n: number): number => (n + 7) & ~7;

export function createResultRing(capacity = DEFAULT_RESULT_RING_BYTES): SharedArrayBuffer {
  if (!Number.isInteger(Math.log2(capacity)) || capacity < 1024) throw new RangeError(`Expected a power of two of at least 1024 bytes, got ${capacity}`);
  return new SharedArrayBuffer(HEADER_BYTES + capacity);
}

/** The thread's end. */
export class ResultRingWriter {
  readonly #words: Int32Array;
  readonly #ring: Uint8Array;
  readonly #view: DataView;
  readonly #capacity: number;
  #tail: number;

  constructor(buffer: SharedArrayBuffer) {
    this.#words = new Int32Array(buffer, 0, HEADER_BYTES / 4);
    this.#capacity = buffer.byteLength - HEADER_BYTES;
    this.#ring = new Uint8Array(buffer, HEADER_BYTES, this.#capacity);
    this.#view = new DataView(buffer, HEADER_BYTES, this.#capacity);
    this.#tail = Atomics.load(this.#words, TAIL);
  }

  /** Appends one record; false (nothing written) when it does not fit now, or is larger than a quarter of the ring. */
  append(record: Uint8Array): boolean {
    const length = align8(8 + record.length);
    if (length > this.#capacity / 4) return false;
    const head = Atomics.load(this.#words, HEAD);
    let at = this.#tail & (this.#capacity - 1);
    const skip = at + length > this.#capacity ? this.#capacity - at : 0;
    if (((this.#tail - head) | 0) + skip + length > this.#capacity) return false;
    if (skip > 0) {
      this.#view.setUint32(at, WRAP, true);
      this.#tail = (this.#tail + skip) | 0;
      at = 0;
    }
    this.#view.setUint32(at, length, true);
    this.#view.setUint32(at + 4, record.length, true);
    this.#ring.set(record, at + 8);
    this.#tail = (this.#tail + length) | 0;
    Atomics.store(this.#words, TAIL, this.#tail);
    return true;
  }
}

/** Main's end. */
export class ResultRingReader {
  readonly #words: Int32Array;
  readonly #ring: Uint8Array;
  readonly #view: DataView;
  readonly #capacity: number;

  constructor(buffer: SharedArrayBuffer) {
    this.#words = new Int32Array(buffer, 0, HEADER_BYTES / 4);
    this.#capacity = buffer.byteLength - HEADER_BYTES;
    this.#ring = new Uint8Array(buffer, HEADER_BYTES, this.#capacity);
    this.#view = new DataView(buffer, HEADER_BYTES, this.#capacity);
  }

  /** Whether the thread appended anything main has not read. */
  get pending(): boolean {
    return Atomics.load(this.#words, TAIL) !== Atomics.load(this.#words, HEAD);
  }

  /**
   * Calls `visit` with each record appended so far, in order: `ring` and `at`..`at + length` are its bytes, valid
   * only during the call (the thread may write there again once the call returned). Returns how many it visited.
   */
  drain(visit: (ring: Uint8Array, at: number, length: number) => void): number {
    const tail = Atomics.load(this.#words, TAIL);
    let head = Atomics.load(this.#words, HEAD);
    let count = 0;
    while (head !== tail) {
      let at = head & (this.#capacity - 1);
      let length = this.#view.getUint32(at, true);
      if (length === WRAP) {
        head = (head + (this.#capacity - at)) | 0;
        at = 0;
        length = this.#view.getUint32(0, true);
      }
      const size = this.#view.getUint32(at + 4, true);
      visit(this.#ring, at + 8, size);
      head = (head + length) | 0;
      // Given back record by record: a thread waiting for room sees it as soon as it is there.
      Atomics.store(this.#words, HEAD, head);
      count++;
    }
    return count;
  }
}
