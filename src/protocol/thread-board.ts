/**
 * Shared words between main and the pool threads, laid out in one place (imported by both sides). One 16-byte row
 * per thread, after one header row:
 * - per thread `APPLIED_INDEX` (Int32): the index the thread's replica has applied (thread writes, main reads).
 * - per thread `POSTED` (Int32): a count main raises after each message it posts to the thread. A thread busy with
 *   items reads it between two of them instead of its port: when it moves, a message is waiting, and the thread
 *   takes it with `receiveMessageOnPort` without going back to its event loop.
 * - per thread `BUSY_MS` (Float64): milliseconds spent running items, for utilization. A statistic with a single
 *   writer: a plain store is enough.
 */
const ROW_BYTES = 16;
const ROW = Object.freeze({ APPLIED_INDEX_INT32: 0, POSTED_INT32: 1, BUSY_MS_FLOAT64: 1 });

export class ThreadBoard {
  readonly #int32: Int32Array;
  readonly #float64: Float64Array;

  private constructor(buffer: SharedArrayBuffer) {
    this.#int32 = new Int32Array(buffer);
    this.#float64 = new Float64Array(buffer);
  }

  static create(threads: number): ThreadBoard {
    return new ThreadBoard(new SharedArrayBuffer((threads + 1) * ROW_BYTES));
  }

  static attach(buffer: SharedArrayBuffer): ThreadBoard {
    return new ThreadBoard(buffer);
  }

  get buffer(): SharedArrayBuffer {
    return this.#int32.buffer as SharedArrayBuffer;
  }

  appliedIndex(thread: number): number {
    return Atomics.load(this.#int32, ((thread + 1) * ROW_BYTES) / 4 + ROW.APPLIED_INDEX_INT32);
  }

  publishAppliedIndex(thread: number, index: number): void {
    Atomics.store(this.#int32, ((thread + 1) * ROW_BYTES) / 4 + ROW.APPLIED_INDEX_INT32, index);
  }

  /** Main: a message was posted to `thread`. */
  ring(thread: number): void {
    Atomics.add(this.#int32, ((thread + 1) * ROW_BYTES) / 4 + ROW.POSTED_INT32, 1);
  }

  /** How many messages main has posted to `thread`. */
  posted(thread: number): number {
    return Atomics.load(this.#int32, ((thread + 1) * ROW_BYTES) / 4 + ROW.POSTED_INT32);
  }

  addBusy(thread: number, ms: number): void {
    this.#float64[((thread + 1) * ROW_BYTES) / 8 + ROW.BUSY_MS_FLOAT64]! += ms;
  }

  busyMs(thread: number): number {
    return this.#float64[((thread + 1) * ROW_BYTES) / 8 + ROW.BUSY_MS_FLOAT64]!;
  }
}
