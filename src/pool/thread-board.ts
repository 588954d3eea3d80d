/**
 * Per-thread words in shared memory, laid out in one place (imported by main and pool threads):
 * - `APPLIED_INDEX`: the index the thread's replica has applied (the thread writes, main reads).
 * - `SPARE`: padding (one 16-byte row per thread).
 *
 * A doorbell for parking idle threads in `Atomics.wait` (Piscina's sync mode) was measured here and dropped: it did
 * not lower the idle dispatch latency (the thread's wake-up was never the slow part) and the `Atomics.notify` on
 * every send under load cost a third of the throughput.
 */
const Field = Object.freeze({ APPLIED_INDEX: 0, SPARE: 1 });
const INT32S_PER_THREAD = 2;

export class ThreadBoard {
  readonly #words: Int32Array;

  private constructor(buffer: SharedArrayBuffer) {
    this.#words = new Int32Array(buffer);
  }

  static create(threads: number): ThreadBoard {
    return new ThreadBoard(new SharedArrayBuffer(threads * INT32S_PER_THREAD * Int32Array.BYTES_PER_ELEMENT));
  }

  static attach(buffer: SharedArrayBuffer): ThreadBoard {
    return new ThreadBoard(buffer);
  }

  get buffer(): SharedArrayBuffer {
    return this.#words.buffer as SharedArrayBuffer;
  }

  appliedIndex(thread: number): number {
    return Atomics.load(this.#words, thread * INT32S_PER_THREAD + Field.APPLIED_INDEX);
  }

  publishAppliedIndex(thread: number, index: number): void {
    Atomics.store(this.#words, thread * INT32S_PER_THREAD + Field.APPLIED_INDEX, index);
  }
}
