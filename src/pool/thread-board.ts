/**
 * Shared words between main and the pool threads, laid out in one place (imported by both sides). One row per
 * thread, after one header row; a row is a 64-byte cache line, so that one thread's writes never invalidate the
 * line main or another thread reads:
 * - header `COMMITTED_INDEX`: the state store's index, published by main on every commit. A thread compares it
 *   with its replica between items and pulls the pending change sets when it is behind, so the items of one batch
 *   see each other's commits instead of all planning against the state the batch was sent with.
 * - per thread `APPLIED_INDEX` (Int32): the index the thread's replica has applied (thread writes, main reads).
 * - per thread `PARKED` (Int32): the doorbell. A thread with nothing to do sets it and sleeps on it in
 *   `Atomics.wait`; main, after posting to the thread, wakes it only if it is set. Under load threads never park,
 *   so a send costs one load and no system call (an earlier doorbell that notified on every send cost a third of
 *   the throughput).
 * - per thread `BUSY_MS` (Float64): milliseconds spent running items, for utilization. A statistic with a single
 *   writer: a plain store is enough.
 */
const ROW_BYTES = 64;
const HEADER = Object.freeze({ COMMITTED_INDEX: 0 });
const ROW = Object.freeze({ APPLIED_INDEX_INT32: 0, PARKED_INT32: 1, BUSY_MS_FLOAT64: 1 });
const AWAKE = 0;
const PARKED = 1;

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

  /**
   * Thread side, step 1 of parking: from here on, main rings before it expects this thread to read its port.
   * The thread must look at its port once more after this: a message posted just before the mark was not rung for.
   */
  markParked(thread: number): void {
    Atomics.store(this.#int32, this.#parkedAt(thread), PARKED);
  }

  /**
   * Thread side, step 2: sleeps until main rings or `timeoutMs` passes (returns at once if it rang already).
   * False when it timed out.
   */
  park(thread: number, timeoutMs: number): boolean {
    const at = this.#parkedAt(thread);
    if (Atomics.wait(this.#int32, at, PARKED, timeoutMs) !== 'timed-out') return true; // main set AWAKE
    Atomics.store(this.#int32, at, AWAKE);
    return false;
  }

  /** Thread side: gives up parking without sleeping. */
  unpark(thread: number): void {
    Atomics.store(this.#int32, this.#parkedAt(thread), AWAKE);
  }

  /**
   * Main side, after every post to `thread`: wakes it if it sleeps in `park`. A thread that is running (the
   * usual case under load) costs one load and no system call.
   */
  ring(thread: number): void {
    const at = this.#parkedAt(thread);
    if (Atomics.load(this.#int32, at) === AWAKE) return;
    Atomics.store(this.#int32, at, AWAKE);
    Atomics.notify(this.#int32, at, 1);
  }

  /** Whether the thread sleeps between items right now (for tests and stats). */
  isParked(thread: number): boolean {
    return Atomics.load(this.#int32, this.#parkedAt(thread)) === PARKED;
  }

  #parkedAt(thread: number): number {
    return ((thread + 1) * ROW_BYTES) / 4 + ROW.PARKED_INT32;
  }

  addBusy(thread: number, ms: number): void {
    this.#float64[((thread + 1) * ROW_BYTES) / 8 + ROW.BUSY_MS_FLOAT64]! += ms;
  }

  busyMs(thread: number): number {
    return this.#float64[((thread + 1) * ROW_BYTES) / 8 + ROW.BUSY_MS_FLOAT64]!;
  }
}
