/**
 * Pending plans ordered by priority (higher first), then arrival (first in, first out), as in Nomad's plan queue.
 * A binary heap: O(log n) push and pop. Arrival is a sequence number, not a timestamp, so two plans submitted in the
 * same millisecond still keep their order.
 */
export interface Queued {
  readonly priority: number;
  readonly seq: number;
}

function before(a: Queued, b: Queued): boolean {
  return a.priority !== b.priority ? a.priority > b.priority : a.seq < b.seq;
}

export class PlanQueue<T extends Queued> {
  readonly #heap: T[] = [];

  get size(): number {
    return this.#heap.length;
  }

  push(item: T): void {
    const heap = this.#heap;
    heap.push(item);
    let at = heap.length - 1;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (!before(item, heap[parent]!)) break;
      heap[at] = heap[parent]!;
      at = parent;
    }
    heap[at] = item;
  }

  pop(): T | undefined {
    const heap = this.#heap;
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    let at = 0;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child = right < heap.length && before(heap[right]!, heap[left]!) ? right : left;
      if (!before(heap[child]!, last)) break;
      heap[at] = heap[child]!;
      at = child;
    }
    heap[at] = last;
    return top;
  }

  /** Removes and returns everything, in no particular order. */
  drain(): T[] {
    return this.#heap.splice(0);
  }
}
