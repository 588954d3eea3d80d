/**
 * Per-thread words in shared memory, laid out in one place (imported by main and pool threads):
 * - `APPLIED_INDEX`: the index the thread's replica has applied (the thread writes, main reads).
 * - `DOORBELL`: bumped by main after every message it posts, so an idle thread parked in `Atomics.wait` wakes at
 *   once and pulls the message with `receiveMessageOnPort` — faster than waiting for its event loop to notice.
 * - `PARKED`: 1 while the thread is parked (for stats and tests).
 */
const Field = Object.freeze({ APPLIED_INDEX: 0, DOORBELL: 1, PARKED: 2, SPARE: 3 });
const INT32S_PER_THREAD = 4;

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

  /** Main: a message was posted to `thread`; wake it if it is parked. */
  ring(thread: number): void {
    const at = thread * INT32S_PER_THREAD + Field.DOORBELL;
    Atomics.add(this.#words, at, 1);
    if (Atomics.load(this.#words, thread * INT32S_PER_THREAD + Field.PARKED) === 1) Atomics.notify(this.#words, at, 1);
  }

  /** Thread: the doorbell value to wait on (read it before checking the port, then park on it). */
  doorbell(thread: number): number {
    return Atomics.load(this.#words, thread * INT32S_PER_THREAD + Field.DOORBELL);
  }

  /** Thread: blocks until the doorbell moves past `seen` or `timeoutMs` passes. */
  park(thread: number, seen: number, timeoutMs: number): void {
    const parked = thread * INT32S_PER_THREAD + Field.PARKED;
    Atomics.store(this.#words, parked, 1);
    Atomics.wait(this.#words, thread * INT32S_PER_THREAD + Field.DOORBELL, seen, timeoutMs);
    Atomics.store(this.#words, parked, 0);
  }

  isParked(thread: number): boolean {
    return Atomics.load(this.#words, thread * INT32S_PER_THREAD + Field.PARKED) === 1;
  }
}
