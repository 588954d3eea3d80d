import { PriorityHeap, type HeapNode } from './priority-heap.js';

/** What the line needs of an entry: its priority (1..100) and a total order within one priority. */
export interface LineNode extends HeapNode {
  readonly priority: number;
  /** The line's own mark (see `RunMark`); 0 for a node that was never pushed. */
  lineMark: number;
}

/** Where a node is in a bucket's in-order run. A node in the late heap is `NONE` there (its `heapIndex` says). */
const RunMark = {
  NONE: 0,
  IN_RUN: 1,
  /** Removed from the line while in the middle of a run: skipped (and dropped) when the run's head reaches it. */
  REMOVED: 2,
} as const;

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

  /**
   * Removes `node` if it is in the line; returns whether it was. O(1) for a node in a bucket's run (it is marked and
   * skipped when reached), O(log n) in a bucket's late heap. A removed node must not be pushed again.
   */
  remove(node: T): boolean {
    const bucket = this.#buckets[node.priority];
    if (bucket === undefined || !bucket.remove(node)) return false;
    this.#size--;
    if (bucket.size === 0 && node.priority === this.#top) {
      let next = this.#top - 1;
      while (next > 0 && (this.#buckets[next]?.size ?? 0) === 0) next--;
      this.#top = next;
    }
    return true;
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

class Bucket<T extends LineNode> {
  /** Entries in order from `head`: each arrived after the one before it. Some may be marked REMOVED. */
  #run: (T | undefined)[] = [];
  #head = 0;
  /** Entries of the run marked REMOVED and not yet dropped. */
  #removed = 0;
  /** Entries that arrived before the run's tail in the order. */
  readonly #late: PriorityHeap<T>;
  readonly #before: (a: T, b: T) => boolean;

  constructor(before: (a: T, b: T) => boolean) {
    this.#before = before;
    this.#late = new PriorityHeap<T>(before);
  }

  get size(): number {
    return this.#run.length - this.#head - this.#removed + this.#late.size;
  }

  push(node: T): void {
    const run = this.#run;
    // A REMOVED tail still orders the run: what comes after it arrived after it.
    if (run.length === this.#head || this.#before(run[run.length - 1]!, node)) {
      node.lineMark = RunMark.IN_RUN;
      run.push(node);
    } else {
      node.lineMark = RunMark.NONE;
      this.#late.push(node);
    }
  }

  remove(node: T): boolean {
    if (node.lineMark === RunMark.IN_RUN) {
      node.lineMark = RunMark.REMOVED;
      this.#removed++;
      this.#skipRemoved();
      return true;
    }
    return node.lineMark === RunMark.NONE && this.#late.remove(node);
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
    first.lineMark = RunMark.NONE;
    this.#advance();
    this.#skipRemoved();
    return first;
  }

  drainInto(out: T[]): void {
    for (let i = this.#head; i < this.#run.length; i++) {
      const node = this.#run[i]!;
      if (node.lineMark === RunMark.IN_RUN) out.push(node);
      node.lineMark = RunMark.NONE;
    }
    this.#run = [];
    this.#head = 0;
    this.#removed = 0;
    for (const node of this.#late.drain()) out.push(node);
  }

  /** Invariant after every operation: the run's head, if any, is a live node (peek and pop read it as is). */
  #skipRemoved(): void {
    while (this.#removed > 0 && this.#head < this.#run.length && this.#run[this.#head]!.lineMark === RunMark.REMOVED) {
      this.#run[this.#head]!.lineMark = RunMark.NONE;
      this.#removed--;
      this.#advance();
    }
  }

  #advance(): void {
    this.#run[this.#head++] = undefined;
    if (this.#head === this.#run.length) {
      this.#run = [];
      this.#head = 0;
    } else if (this.#head >= 4096 && this.#head * 2 >= this.#run.length) {
      // Drop the consumed prefix once it is most of the array: amortized O(1) per pop, bounded memory.
      this.#run = this.#run.slice(this.#head);
      this.#head = 0;
    }
  }
}
