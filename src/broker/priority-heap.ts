/**
 * A binary min-heap whose nodes remember their own position (`heapIndex`), so any node can be removed or
 * re-sifted in O(log n) without a search. The broker keeps one per ready queue and one per job's pending set.
 *
 * Invariant: a node is in at most one `PriorityHeap` at a time; `heapIndex` is its slot there, or -1 when it is
 * in none. The broker relies on this to tell "ready" from "pending" without a second field.
 */
export interface HeapNode {
  heapIndex: number;
}

/** `before(a, b)` is true when `a` must leave the heap before `b`; it must be a strict weak order. */
export type Before<T> = (a: T, b: T) => boolean;

export class PriorityHeap<T extends HeapNode> {
  readonly #nodes: T[] = [];
  readonly #before: Before<T>;

  constructor(before: Before<T>) {
    this.#before = before;
  }

  get size(): number {
    return this.#nodes.length;
  }

  peek(): T | undefined {
    return this.#nodes[0];
  }

  push(node: T): void {
    const at = this.#nodes.length;
    this.#nodes.push(node);
    node.heapIndex = at;
    this.#up(at);
  }

  pop(): T | undefined {
    const nodes = this.#nodes;
    const top = nodes[0];
    if (top === undefined) return undefined;
    const last = nodes.pop()!;
    top.heapIndex = -1;
    if (last !== top) {
      nodes[0] = last;
      last.heapIndex = 0;
      this.#down(0);
    }
    return top;
  }

  /** Removes `node` if it is in this heap; returns whether it was. */
  remove(node: T): boolean {
    const at = node.heapIndex;
    const nodes = this.#nodes;
    if (at < 0 || at >= nodes.length || nodes[at] !== node) return false;
    const last = nodes.pop()!;
    node.heapIndex = -1;
    if (last !== node) {
      nodes[at] = last;
      last.heapIndex = at;
      // The moved node may belong above or below its new slot.
      if (at > 0 && this.#before(last, nodes[(at - 1) >> 1]!)) this.#up(at);
      else this.#down(at);
    }
    return true;
  }

  has(node: T): boolean {
    const at = node.heapIndex;
    return at >= 0 && this.#nodes[at] === node;
  }

  /** Empties the heap and returns its nodes in no particular order. */
  drain(): T[] {
    const nodes = this.#nodes.splice(0);
    for (const node of nodes) node.heapIndex = -1;
    return nodes;
  }

  /** The nodes in heap order (not sorted); for stats and tests. */
  values(): readonly T[] {
    return this.#nodes;
  }

  #up(at: number): void {
    const nodes = this.#nodes;
    const node = nodes[at]!;
    while (at > 0) {
      const parentAt = (at - 1) >> 1;
      const parent = nodes[parentAt]!;
      if (!this.#before(node, parent)) break;
      nodes[at] = parent;
      parent.heapIndex = at;
      at = parentAt;
    }
    nodes[at] = node;
    node.heapIndex = at;
  }

  #down(at: number): void {
    const nodes = this.#nodes;
    const length = nodes.length;
    const node = nodes[at]!;
    for (;;) {
      const leftAt = 2 * at + 1;
      if (leftAt >= length) break;
      const rightAt = leftAt + 1;
      let childAt = leftAt;
      let child = nodes[leftAt]!;
      if (rightAt < length) {
        const right = nodes[rightAt]!;
        if (this.#before(right, child)) {
          childAt = rightAt;
          child = right;
        }
      }
      if (!this.#before(child, node)) break;
      nodes[at] = child;
      child.heapIndex = at;
      at = childAt;
    }
    nodes[at] = node;
    node.heapIndex = at;
  }
}
