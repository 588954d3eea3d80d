/**
 * Shared words between main and the pool threads, laid out in one place (imported by both sides). One 16-byte row
 * per thread, after one header row:
 * - header `COMMITTED_INDEX`: the state store's index, published by main on every commit. A thread compares it
 *   with its replica between items and pulls the pending change sets when it is behind, so the items of one batch
 *   see each other's commits instead of all planning against the state the batch was sent with.
 * - per thread `APPLIED_INDEX` (Int32): the index the thread's replica has applied (thread writes, main reads).
 * - per thread `BUSY_MS` (Float64): milliseconds spent running items, for utilization. A statistic with a single
 *   writer: a plain store is enough.
 *
 * A doorbell for parking idle threads in `Atomics.wait` (Piscina's sync mode) was measured here and dropped, five
 * times. Notified on every send it cost a third of the throughput under load. Rung only for a parked thread, it
 * costs nothing under load and takes `postMessage` to an idle thread from 8.8 to 1–2 µs on main, but the
 * `Atomics.notify` then blocks main while the thread wakes, and the idle dispatch latency did not move (pinned to one
 * CPU it was 0.5–1 µs worse). Parking inside the promise job that ends a batch was 1–2 µs faster, but it held back
 * the promise jobs and next-tick callbacks the items left behind until the next wake; parking from a fresh
 * event-loop turn, which does not, loses that gain (the doorbell is in `git show a26d540`; figures in the README).
 */
const ROW_BYTES = 16;
const HEADER = Object.freeze({ COMMITTED_INDEX: 0 });
const ROW = Object.freeze({ APPLIED_INDEX_INT32: 0, BUSY_MS_FLOAT64: 1 });

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

  publishCommittedIndex(index: number): void {
    Atomics.store(this.#int32, HEADER.COMMITTED_INDEX, index);
  }

  committedIndex(): number {
    return Atomics.load(this.#int32, HEADER.COMMITTED_INDEX);
  }

  appliedIndex(thread: number): number {
    return Atomics.load(this.#int32, ((thread + 1) * ROW_BYTES) / 4 + ROW.APPLIED_INDEX_INT32);
  }

  publishAppliedIndex(thread: number, index: number): void {
    Atomics.store(this.#int32, ((thread + 1) * ROW_BYTES) / 4 + ROW.APPLIED_INDEX_INT32, index);
  }

  addBusy(thread: number, ms: number): void {
    this.#float64[((thread + 1) * ROW_BYTES) / 8 + ROW.BUSY_MS_FLOAT64]! += ms;
  }

  busyMs(thread: number): number {
    return this.#float64[((thread + 1) * ROW_BYTES) / 8 + ROW.BUSY_MS_FLOAT64]!;
  }
}
