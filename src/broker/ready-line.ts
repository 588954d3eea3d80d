import { PriorityHeap, type HeapNode } from './priority-heap.js';

/** What the line needs of an entry: its priority (1..100) and a total order within one priority. */
export interface LineNode extends HeapNode {
  readonly priority: number;
}

/**
 * A priority queue for the broker's ready evaluations, in the same total order as a binary heap over `before`,
 * but built for how evaluations arrive: one bucket per priority (1..100), and in each bucket a FIFO run of entries
 * that arrived in order plus a small heap for the few that did not (a nacked evaluation keeps its old enqueue
 * order; an explicit `createIndex` may be older than the tail). Most pushes and pops are then O(1) array moves
 * with no comparisons, where a heap of a 100k backlog walked 17 levels of cold entries on every pop.
 */
export class ReadyLine<T extends LineNode> {
  readonly #before: (a: T, b: T) => boolean;
  readonly #buckets: (Bucket<T> | undefined)[] = [];
  /** Highest priority with a non-empty bucket; 0 when the line is empty. */
  #top = 0;
  #size = 0;

  constructor(before: (a: T, b: T) => boolean) {
    this.#before = before;
  }

  get size(): number {
    return this.#size;
  }

  peek(): T | undefined {
    return this.#top === 0 ? undefined : this.#buckets[this.#top]!.peek();
  }

  push(node: T): void {
    const priority = node.priority;
    let bucket = this.#buckets[priority];
    if (bucket === undefined) {
      bucket = new Bucket<T>(this.#before);
      this.#buckets[priority] = bucket;
    }
    bucket.push(node);
    this.#size++;
    if (priority > this.#top) this.#top = priority;
  }

  pop(): T | undefined {
    if (this.#top === 0) return undefined;
    const bucket = this.#buckets[this.#top]!;
    const node = bucket.pop();
    this.#size--;
    if (bucket.size === 0) {
      let next = this.#top - 1;
      while (next > 0 && (this.#buckets[next]?.size ?? 0) === 0) next--;
      this.#top = next;
    }
    return node;
  }

  /** Removes and returns every node (in no particular order). */
  drain(): T[] {
    const out: T[] = [];
    for (const bucket of this.#buckets) if (bucket !== undefined) bucket.drainInto(out);
    this.#size = 0;
    this.#top = 0;
    return out;
  }
}

class Bucket<T extends HeapNode> {
  /** Entries in order from `head`: each arrived after the one before it. */
  #run: (T | undefined)[] = [];
  #head = 0;
  /** Entries that arrived before the run's tail in the order. */
  readonly #late: PriorityHeap<T>;
  readonly #before: (a: T, b: T) => boolean;

  constructor(before: (a: T, b: T) => boolean) {
    this.#before = before;
    this.#late = new PriorityHeap<T>(before);
  }

  get size(): number {
    return this.#run.length - this.#head + this.#late.size;
  }

  push(node: T): void {
    const run = this.#run;
    if (run.length === this.#head || this.#before(run[run.length - 1]!, node)) run.push(node);
    else this.#late.push(node);
  }

  peek(): T | undefined {
    const first = this.#head < this.#run.length ? this.#run[this.#head] : undefined;
    const late = this.#late.peek();
    if (first === undefined) return late;
    if (late === undefined) return first;
    return this.#before(late, first) ? late : first;
  }

  pop(): T | undefined {
    const first = this.#head < this.#run.length ? this.#run[this.#head] : undefined;
    const late = this.#late.peek();
    if (first === undefined || (late !== undefined && this.#before(late, first))) return this.#late.pop();
    this.#run[this.#head++] = undefined;
    if (this.#head === this.#run.length) {
      this.#run = [];
      this.#head = 0;
    } else if (this.#head >= 4096 && this.#head * 2 >= this.#run.length) {
      // Drop the consumed prefix once it is most of the array: amortized O(1) per pop, bounded memory.
      this.#run = this.#run.slice(this.#head);
      this.#head = 0;
    }
    return first;
  }

  drainInto(out: T[]): void {
    for (let i = this.#head; i < this.#run.length; i++) out.push(this.#run[i]!);
    this.#run = [];
    this.#head = 0;
    for (const node of this.#late.drain()) out.push(node);
  }
}
