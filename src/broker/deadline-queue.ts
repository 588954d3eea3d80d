import type { Clock, TimerHandle } from '../clock.js';

/**
 * Every deadline the broker keeps (nack deadlines of unacked evaluations, `wait`/`waitUntil` delays, nack
 * re-enqueue delays) lives in this one queue, and the queue keeps at most ONE clock timer armed: the one for its
 * earliest deadline. A timer per evaluation would cost a Node timer allocation and a `clearTimeout` per
 * dequeue/ack; here a dequeue pushes into a heap and an ack removes from it.
 *
 * Re-arming is lazy. Removing the earliest deadline leaves the timer armed: when it fires early it finds nothing
 * due and re-arms for the new earliest. The timer is moved only when a new deadline is earlier than the armed one.
 * Because nack deadlines are `now + nackTimeout` and time only moves forward, the steady state of
 * dequeue → ack arms no timer at all.
 *
 * Deadlines fire when `now >= due`, in due order; equal dues fire in the order they were scheduled.
 *
 * The sift code repeats `PriorityHeap`'s on purpose: an entry can be in a ready or pending heap and in this one at
 * once, so the two need different position fields, and a `PriorityHeap` generic over its position field (keyed
 * access `node[key]`) cuts the broker's cycles per second by a quarter or more. Fixed field names keep both
 * monomorphic.
 */
export interface DeadlineNode {
  /** Epoch ms at which the node is due; meaningful only while scheduled. */
  due: number;
  /** Slot in the queue's heap, -1 when not scheduled. */
  deadlineIndex: number;
  /** Scheduling order, the tie-break between equal dues. */
  deadlineSeq: number;
}

export class DeadlineQueue<T extends DeadlineNode> {
  readonly #clock: Clock;
  readonly #onDue: (node: T) => void;
  readonly #nodes: T[] = [];
  #seq = 0;
  #timer: TimerHandle | undefined;
  #timerDue = Number.POSITIVE_INFINITY;
  #firing = false;
  readonly #fire = (): void => this.#onTimer();
  readonly #unref: boolean;

  /**
   * `onDue` is called with each node once it is due, after the node has left the queue. With `unref` (the
   * default) the armed timer does not keep the process alive.
   */
  constructor(clock: Clock, onDue: (node: T) => void, options: { readonly unref?: boolean } = {}) {
    this.#clock = clock;
    this.#onDue = onDue;
    this.#unref = options.unref ?? true;
  }

  get size(): number {
    return this.#nodes.length;
  }

  /** Due time of the earliest deadline, if any. */
  peekDue(): number | undefined {
    return this.#nodes[0]?.due;
  }

  /** Whether a clock timer is currently armed (for tests: at most one ever is). */
  get armed(): boolean {
    return this.#timer !== undefined;
  }

  has(node: T): boolean {
    const at = node.deadlineIndex;
    return at >= 0 && this.#nodes[at] === node;
  }

  /** Schedules `node` at `due`, or moves it there if it is already scheduled. */
  schedule(node: T, due: number): void {
    if (this.has(node)) this.#removeAt(node.deadlineIndex);
    node.due = due;
    node.deadlineSeq = this.#seq++;
    const at = this.#nodes.length;
    this.#nodes.push(node);
    node.deadlineIndex = at;
    this.#up(at);
    // Inside #onTimer the timer is re-armed once at the end; arming here would only be undone.
    if (!this.#firing && due < this.#timerDue) this.#arm(due);
  }

  /**
   * Unschedules `node`; returns whether it was scheduled. The timer stays armed (see the class comment), except in
   * a queue whose timer keeps the process alive once it is empty: an armed timer with nothing left to fire would
   * hold the process open until its due time (a dequeue served long before its timeout, after the engine stopped).
   */
  cancel(node: T): boolean {
    if (!this.has(node)) return false;
    this.#removeAt(node.deadlineIndex);
    if (!this.#unref && this.#nodes.length === 0) this.#disarm();
    return true;
  }

  /** Unschedules everything, disarms the timer and returns the nodes that were scheduled. */
  clear(): T[] {
    const nodes = this.#nodes.splice(0);
    for (const node of nodes) node.deadlineIndex = -1;
    this.#disarm();
    return nodes;
  }

  #arm(due: number): void {
    this.#disarm();
    this.#timerDue = due;
    this.#timer = this.#clock.setTimer(this.#fire, due - this.#clock.now(), { unref: this.#unref });
  }

  #disarm(): void {
    if (this.#timer !== undefined) this.#clock.clearTimer(this.#timer);
    this.#timer = undefined;
    this.#timerDue = Number.POSITIVE_INFINITY;
  }

  #onTimer(): void {
    this.#timer = undefined;
    this.#timerDue = Number.POSITIVE_INFINITY;
    this.#firing = true;
    try {
      // Re-read the clock per node: a callback may take time, and what became due meanwhile fires too.
      for (;;) {
        const first = this.#nodes[0];
        if (first === undefined || first.due > this.#clock.now()) break;
        this.#removeAt(0);
        this.#onDue(first);
      }
    } finally {
      this.#firing = false;
      const next = this.#nodes[0];
      if (next !== undefined) this.#arm(next.due);
    }
  }

  #before(a: T, b: T): boolean {
    return a.due < b.due || (a.due === b.due && a.deadlineSeq < b.deadlineSeq);
  }

  #removeAt(at: number): void {
    const nodes = this.#nodes;
    const node = nodes[at]!;
    const last = nodes.pop()!;
    node.deadlineIndex = -1;
    if (last === node) return;
    nodes[at] = last;
    last.deadlineIndex = at;
    if (at > 0 && this.#before(last, nodes[(at - 1) >> 1]!)) this.#up(at);
    else this.#down(at);
  }

  #up(at: number): void {
    const nodes = this.#nodes;
    const node = nodes[at]!;
    while (at > 0) {
      const parentAt = (at - 1) >> 1;
      const parent = nodes[parentAt]!;
      if (!this.#before(node, parent)) break;
      nodes[at] = parent;
      parent.deadlineIndex = at;
      at = parentAt;
    }
    nodes[at] = node;
    node.deadlineIndex = at;
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
      child.deadlineIndex = at;
      at = childAt;
    }
    nodes[at] = node;
    node.deadlineIndex = at;
  }
}
