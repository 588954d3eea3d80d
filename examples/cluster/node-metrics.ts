/**
 * A stream of generated node metrics in shared memory: the main thread writes CPU and memory samples of every node
 * every 20 ms into a ring of one-second blocks; the `downsample` task reads a whole second on a pool thread. No
 * message carries the samples: the task's payload carries the buffer once, shared.
 *
 * Layout: an Int32 header of two words per block (the second it holds, counted from `origin`, and the samples
 * written so far), then the samples as Float32: block × node × sample × {cpu, memory}, each a fraction of the node's
 * capacity. The header is written with `Atomics.store` after the samples and read with `Atomics.load` before them,
 * which orders the plain sample writes for the reader.
 */

export const SAMPLES_PER_SECOND = 50;
export const RING_SECONDS = 4;
const HEADER_WORDS = RING_SECONDS * 2;

export interface StreamRef {
  readonly buffer: SharedArrayBuffer;
  readonly nodes: number;
  /** Epoch second the header's seconds count from (an Int32 of epoch seconds would end in 2038). */
  readonly origin: number;
}

/** Reading side (pool thread): the samples of epoch second `second`, or why they cannot be read. */
export type SecondOfSamples =
  | { readonly status: 'ready'; readonly samples: Float32Array }
  | { readonly status: 'not-yet' | 'expired'; readonly holds: number; readonly written: number };

function views(ref: StreamRef): { header: Int32Array; data: Float32Array } {
  return {
    header: new Int32Array(ref.buffer, 0, HEADER_WORDS),
    data: new Float32Array(ref.buffer, HEADER_WORDS * Int32Array.BYTES_PER_ELEMENT),
  };
}

function blockLength(nodes: number): number {
  return nodes * SAMPLES_PER_SECOND * 2;
}

export function readSecond(ref: StreamRef, second: number): SecondOfSamples {
  const { header, data } = views(ref);
  const block = second % RING_SECONDS;
  const wanted = second - ref.origin;
  const holds = Atomics.load(header, block * 2);
  const written = Atomics.load(header, block * 2 + 1);
  if (holds > wanted) return { status: 'expired', holds: holds + ref.origin, written };
  if (holds < wanted || written < SAMPLES_PER_SECOND) return { status: 'not-yet', holds: holds + ref.origin, written };
  const length = blockLength(ref.nodes);
  // A copy: the writer reuses the block RING_SECONDS later, and a late reader must not see it change underfoot.
  const samples = data.slice(block * length, (block + 1) * length);
  // Re-check after the copy: if the writer moved into this block meanwhile, the copy may be torn.
  const after = Atomics.load(header, block * 2);
  if (after !== wanted) return { status: 'expired', holds: after + ref.origin, written };
  return { status: 'ready', samples };
}

/** Writing side (main thread). */
export class NodeMetricsStream {
  readonly ref: StreamRef;
  readonly #header: Int32Array;
  readonly #data: Float32Array;
  /** Allocated fraction of each node (CPU, memory), the mean the samples wander around. */
  readonly #base: Float32Array;
  readonly #random: () => number;
  #timer: NodeJS.Timeout | undefined;
  #second = -1;
  #next = 0;

  constructor(nodes: number, random: () => number) {
    const bytes = HEADER_WORDS * Int32Array.BYTES_PER_ELEMENT + RING_SECONDS * blockLength(nodes) * Float32Array.BYTES_PER_ELEMENT;
    const buffer = new SharedArrayBuffer(bytes);
    this.ref = { buffer, nodes, origin: Math.floor(Date.now() / 1000) - RING_SECONDS };
    ({ header: this.#header, data: this.#data } = views(this.ref));
    for (let b = 0; b < RING_SECONDS; b++) Atomics.store(this.#header, b * 2, -1);
    this.#base = new Float32Array(nodes * 2);
    this.#random = random;
  }

  /** Sets the allocated fraction node `index` reports around. */
  setBase(index: number, cpu: number, memory: number): void {
    this.#base[index * 2] = cpu;
    this.#base[index * 2 + 1] = memory;
  }

  start(): void {
    this.#write();
    this.#timer = setInterval(() => this.#write(), 1000 / SAMPLES_PER_SECOND);
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Writes every sample due up to now; a late timer fills the gap, so each completed second has all its samples. */
  #write(): void {
    const now = Date.now();
    const second = Math.floor(now / 1000);
    const due = Math.floor(((now % 1000) * SAMPLES_PER_SECOND) / 1000) + 1;
    if (second !== this.#second) {
      if (this.#second >= 0) this.#fill(this.#second, SAMPLES_PER_SECOND);
      this.#second = second;
      this.#next = 0;
      const block = second % RING_SECONDS;
      // Claim the block for the new second first: a reader of the old second then sees it expired.
      Atomics.store(this.#header, block * 2 + 1, 0);
      Atomics.store(this.#header, block * 2, second - this.ref.origin);
    }
    this.#fill(second, due);
  }

  #fill(second: number, upTo: number): void {
    const nodes = this.ref.nodes;
    const block = second % RING_SECONDS;
    const offset = block * blockLength(nodes);
    for (let s = this.#next; s < upTo; s++) {
      for (let n = 0; n < nodes; n++) {
        // Allocations use part of the CPU they reserve, with noise and rare spikes; memory stays near its reservation.
        const spike = this.#random() < 0.005 ? 0.6 * this.#random() : 0;
        const at = offset + (n * SAMPLES_PER_SECOND + s) * 2;
        this.#data[at] = Math.min(1, this.#base[n * 2]! * (0.3 + 0.5 * this.#random()) + spike);
        this.#data[at + 1] = Math.min(1, this.#base[n * 2 + 1]! * (0.85 + 0.1 * this.#random()));
      }
    }
    if (upTo > this.#next) {
      this.#next = upTo;
      Atomics.store(this.#header, block * 2 + 1, upTo);
    }
  }
}
