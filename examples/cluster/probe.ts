/**
 * Measurements that cross threads without messages: one `SharedArrayBuffer` of 64-bit words, written by the
 * schedulers on pool threads and read by the main thread.
 *
 * - Dispatch latency: main writes the enqueue time of an evaluation into a stamp slot and hands the slot to the
 *   scheduler in the evaluation's payload; the scheduler writes the time it was entered (first delivery only).
 *   Both sides read `process.hrtime.bigint()`, one monotonic clock for the whole process.
 * - Busy time: each scheduler adds the nanoseconds it ran to its thread's word, so thread utilization is
 *   scheduler time / wall time, whatever the pool does between items.
 * - Counters the schedulers own (allocations they found no room for).
 *
 * Layout (BigInt64 words): [0, MAX_THREADS) busy ns per thread · [MAX_THREADS] unplaced allocations ·
 * then two words per stamp slot: enqueued ns, entered ns (0 = not yet).
 */

const MAX_THREADS = 512;
const UNPLACED = MAX_THREADS;
const HEADER_WORDS = MAX_THREADS + 1;

/** What an evaluation's payload carries so its scheduler can stamp its entry. `slot` is -1 when not measured. */
export interface ProbeRef {
  readonly buffer: SharedArrayBuffer;
  readonly slot: number;
}

function stampAt(slot: number): number {
  return HEADER_WORDS + slot * 2;
}

function wordsOf(ref: ProbeRef): BigInt64Array {
  return new BigInt64Array(ref.buffer);
}

/** Thread side: called first thing in a scheduler. Returns the entry time, for `leave`. */
export function enter(ref: ProbeRef | undefined): bigint {
  const now = process.hrtime.bigint();
  if (ref !== undefined && ref.slot >= 0) Atomics.compareExchange(wordsOf(ref), stampAt(ref.slot) + 1, 0n, now);
  return now;
}

/** Thread side: adds the time since `entered` to this thread's busy time. */
export function leave(ref: ProbeRef | undefined, threadIndex: number, entered: bigint): void {
  if (ref === undefined || threadIndex < 0 || threadIndex >= MAX_THREADS) return;
  Atomics.add(wordsOf(ref), threadIndex, process.hrtime.bigint() - entered);
}

/** Thread side: counts allocations that fit on no node. */
export function countUnplaced(ref: ProbeRef | undefined, n: number): void {
  if (ref !== undefined && n > 0) Atomics.add(wordsOf(ref), UNPLACED, BigInt(n));
}

/** Main side: owns the buffer and hands out stamp slots. */
export class Probe {
  readonly #buffer: SharedArrayBuffer;
  readonly #words: BigInt64Array;
  readonly #free: number[] = [];

  constructor(slots = 1 << 16) {
    this.#buffer = new SharedArrayBuffer((HEADER_WORDS + slots * 2) * BigInt64Array.BYTES_PER_ELEMENT);
    this.#words = new BigInt64Array(this.#buffer);
    for (let s = slots - 1; s >= 0; s--) this.#free.push(s);
  }

  /** Takes a slot and stamps the enqueue time; the ref goes into the evaluation's payload. */
  stampEnqueue(): ProbeRef {
    const slot = this.#free.pop() ?? -1;
    if (slot >= 0) {
      Atomics.store(this.#words, stampAt(slot) + 1, 0n);
      Atomics.store(this.#words, stampAt(slot), process.hrtime.bigint());
    }
    return { buffer: this.#buffer, slot };
  }

  /** Enqueue → scheduler entry in ns, or undefined when the scheduler never entered (or the slot is unmeasured). */
  dispatchNs(ref: ProbeRef): bigint | undefined {
    if (ref.slot < 0) return undefined;
    const entered = Atomics.load(this.#words, stampAt(ref.slot) + 1);
    if (entered === 0n) return undefined;
    const ns = entered - Atomics.load(this.#words, stampAt(ref.slot));
    return ns > 0n ? ns : undefined;
  }

  /** Enqueue → now in ns (called on ack: the end-to-end latency), or undefined for an unmeasured slot. */
  sinceEnqueueNs(ref: ProbeRef): bigint | undefined {
    if (ref.slot < 0) return undefined;
    return process.hrtime.bigint() - Atomics.load(this.#words, stampAt(ref.slot));
  }

  /** The evaluation is over (acked, failed or superseded): its slot can be reused. */
  release(ref: ProbeRef): void {
    if (ref.slot >= 0 && ref.buffer === this.#buffer) this.#free.push(ref.slot);
  }

  /** Nanoseconds the schedulers ran, summed over threads. */
  busyNs(): bigint {
    let sum = 0n;
    for (let t = 0; t < MAX_THREADS; t++) sum += Atomics.load(this.#words, t);
    return sum;
  }

  unplaced(): number {
    return Number(Atomics.load(this.#words, UNPLACED));
  }
}
