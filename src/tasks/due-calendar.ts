import { growFloat64, growInt32 } from './growable.js';

/**
 * Per-task link words, packed so that one task's links share a cache line (ticks walk tasks in random order). The
 * PREV word of a bucket's head is not kept up to date: `#bucketHead` says which task is the head.
 */
const Link = Object.freeze({ NEXT: 0, PREV: 1, BUCKET: 2 });
const LINK_INT32S = 3;
const NONE = -1;

/**
 * Claimed tasks by next due time: the scheduler's priority queue.
 *
 * Each task is in at most one *bucket*, the list of tasks due at one instant, and a binary min-heap orders the
 * buckets by due time. `popDue(now)` hands out due tasks in due order (claim order within an instant) at O(1) per
 * task plus O(log B) per bucket, where B is the number of distinct due times; `set` and `delete` are O(1) plus
 * O(log B) when a bucket appears or empties.
 *
 * Why buckets and not one heap entry per task: periodic tasks pile onto few instants (`every` is epoch-aligned,
 * cron fires on whole seconds), so B is tiny next to the task count. A heap with one entry per task pays
 * log₂(n) ≈ 20 cache-missing sift steps per due task at a million tasks, which the benchmark measures at barely
 * ahead of scanning every task; buckets make a tick proportional to the due tasks alone. With all due times
 * distinct (B = n) this degrades to exactly the per-task heap, so the O(due · log n) bound still holds.
 *
 * Memory: 12 bytes of links per task, plus ~60 bytes per distinct due time. Main thread only.
 */
export class DueCalendar {
  #links = new Int32Array(0);
  // Buckets, by bucket id.
  #bucketDue = new Float64Array(0);
  #bucketHead = new Int32Array(0);
  #bucketTail = new Int32Array(0);
  #bucketHeapAt = new Int32Array(0);
  #bucketCount = 0;
  readonly #freeBuckets: number[] = [];
  readonly #bucketByDue = new Map<number, number>();
  // Min-heap of bucket ids keyed by `#bucketDue`.
  #heap = new Int32Array(0);
  #heapSize = 0;
  /** The bucket that `popDue` is emptying: out of the heap and the map, so nothing new lands in it. */
  #draining = NONE;
  // One-entry cache of `#bucketByDue`: tasks processed in a tick mostly move to the same next instant.
  #cachedDue = NaN;
  #cachedBucket = NONE;
  #size = 0;

  /** Tasks in the calendar. */
  get size(): number {
    return this.#size;
  }

  /** Distinct due times (buckets) in the calendar. */
  get instants(): number {
    return this.#heapSize;
  }

  has(task: number): boolean {
    const at = task * LINK_INT32S + Link.BUCKET;
    return at < this.#links.length && this.#links[at]! !== NONE;
  }

  /** Due time of `task`, or `undefined` when it is not in the calendar. */
  dueOf(task: number): number | undefined {
    if (!this.has(task)) return undefined;
    return this.#bucketDue[this.#links[task * LINK_INT32S + Link.BUCKET]!];
  }

  /** The earliest due time, or Infinity when empty. */
  earliest(): number {
    if (this.#draining !== NONE && this.#bucketHead[this.#draining]! !== NONE) return this.#bucketDue[this.#draining]!;
    return this.#heapSize === 0 ? Infinity : this.#bucketDue[this.#heap[0]!]!;
  }

  /** Puts `task` (a non-negative integer) at `due` (finite), moving it if it is already in. */
  set(task: number, due: number): void {
    if (!Number.isFinite(due)) throw new RangeError(`Expected a finite due time, got ${String(due)}`);
    this.#ensureTask(task);
    const links = this.#links;
    const base = task * LINK_INT32S;
    const current = links[base + Link.BUCKET]!;
    if (current !== NONE) {
      if (this.#bucketDue[current] === due && current !== this.#draining) return;
      this.#unlink(task, current);
    }
    const bucket = this.#bucketFor(due);
    const tail = this.#bucketTail[bucket]!;
    links[base + Link.NEXT] = NONE;
    links[base + Link.PREV] = tail;
    links[base + Link.BUCKET] = bucket;
    if (tail === NONE) this.#bucketHead[bucket] = task;
    else links[tail * LINK_INT32S + Link.NEXT] = task;
    this.#bucketTail[bucket] = task;
    this.#size++;
  }

  /** Removes `task`; false when it was not in. */
  delete(task: number): boolean {
    if (!this.has(task)) return false;
    this.#unlink(task, this.#links[task * LINK_INT32S + Link.BUCKET]!);
    return true;
  }

  /**
   * Removes and returns one task due at or before `now` (earliest instant first, then insertion order), or -1.
   * Tasks may be set, moved or deleted between calls, including the ones not yet handed out.
   */
  popDue(now: number): number {
    for (;;) {
      const draining = this.#draining;
      if (draining !== NONE) {
        const task = this.#bucketHead[draining]!;
        if (task !== NONE) {
          // Taking the head of a detached bucket: no predecessor to fix, and the bucket is freed below once empty.
          const links = this.#links;
          const base = task * LINK_INT32S;
          const next = links[base + Link.NEXT]!;
          // Only the head pointer moves: the new head's PREV word goes stale (heads are known by #bucketHead), and
          // the links of a task out of the calendar are never read (BUCKET says it is out; `set` writes them all).
          // Not touching the next task's links here saved a store to a cold cache line per due task.
          this.#bucketHead[draining] = next;
          if (next === NONE) this.#bucketTail[draining] = NONE;
          links[base + Link.BUCKET] = NONE;
          this.#size--;
          return task;
        }
        this.#freeBucket(draining);
        this.#draining = NONE;
      }
      if (this.#heapSize === 0) return NONE;
      const top = this.#heap[0]!;
      if (!(this.#bucketDue[top]! <= now)) return NONE;
      // Detach the bucket: a task moved during this tick to the same instant lands in a new bucket, so a tick
      // can never loop on a task that keeps re-entering the instant being drained.
      this.#heapRemove(top);
      this.#bucketByDue.delete(this.#bucketDue[top]!);
      if (this.#cachedBucket === top) this.#cachedBucket = NONE;
      this.#draining = top;
    }
  }

  #unlink(task: number, bucket: number): void {
    const links = this.#links;
    const base = task * LINK_INT32S;
    const next = links[base + Link.NEXT]!;
    // A bucket's head is known by `#bucketHead`, never by its PREV word, which popDue leaves stale on purpose.
    const isHead = this.#bucketHead[bucket] === task;
    const prev = isHead ? NONE : links[base + Link.PREV]!;
    if (isHead) this.#bucketHead[bucket] = next;
    else links[prev * LINK_INT32S + Link.NEXT] = next;
    if (next === NONE) this.#bucketTail[bucket] = prev;
    else links[next * LINK_INT32S + Link.PREV] = prev;
    links[base + Link.BUCKET] = NONE;
    this.#size--;
    // An emptied bucket leaves at once, so `earliest()` never names an instant with nothing due (no idle wake-up).
    if (next === NONE && isHead && bucket !== this.#draining) {
      this.#heapRemove(bucket);
      this.#bucketByDue.delete(this.#bucketDue[bucket]!);
      if (this.#cachedBucket === bucket) this.#cachedBucket = NONE;
      this.#freeBucket(bucket);
    }
  }

  #bucketFor(due: number): number {
    if (this.#cachedBucket !== NONE && this.#cachedDue === due) return this.#cachedBucket;
    let bucket = this.#bucketByDue.get(due);
    if (bucket === undefined) {
      bucket = this.#freeBuckets.pop() ?? this.#newBucket();
      this.#bucketDue[bucket] = due;
      this.#bucketHead[bucket] = NONE;
      this.#bucketTail[bucket] = NONE;
      this.#bucketByDue.set(due, bucket);
      this.#heapPush(bucket);
    }
    this.#cachedDue = due;
    this.#cachedBucket = bucket;
    return bucket;
  }

  #newBucket(): number {
    const bucket = this.#bucketCount++;
    const needed = this.#bucketCount;
    this.#bucketDue = growFloat64(this.#bucketDue, needed);
    this.#bucketHead = growInt32(this.#bucketHead, needed, NONE);
    this.#bucketTail = growInt32(this.#bucketTail, needed, NONE);
    this.#bucketHeapAt = growInt32(this.#bucketHeapAt, needed, NONE);
    this.#heap = growInt32(this.#heap, needed, NONE);
    return bucket;
  }

  #freeBucket(bucket: number): void {
    this.#bucketHead[bucket] = NONE;
    this.#bucketTail[bucket] = NONE;
    this.#freeBuckets.push(bucket);
  }

  #ensureTask(task: number): void {
    const needed = (task + 1) * LINK_INT32S;
    if (needed > this.#links.length) this.#links = growInt32(this.#links, needed, NONE);
  }

  #heapPush(bucket: number): void {
    const at = this.#heapSize++;
    this.#heap[at] = bucket;
    this.#bucketHeapAt[bucket] = at;
    this.#siftUp(at);
  }

  #heapRemove(bucket: number): void {
    const at = this.#bucketHeapAt[bucket]!;
    this.#bucketHeapAt[bucket] = NONE;
    const last = --this.#heapSize;
    if (at === last) return;
    const moved = this.#heap[last]!;
    this.#heap[at] = moved;
    this.#bucketHeapAt[moved] = at;
    this.#siftDown(at);
    this.#siftUp(this.#bucketHeapAt[moved]!);
  }

  #siftUp(start: number): void {
    const heap = this.#heap;
    const dues = this.#bucketDue;
    const bucket = heap[start]!;
    const due = dues[bucket]!;
    let at = start;
    while (at > 0) {
      const parentAt = (at - 1) >> 1;
      const parent = heap[parentAt]!;
      if (dues[parent]! <= due) break;
      heap[at] = parent;
      this.#bucketHeapAt[parent] = at;
      at = parentAt;
    }
    heap[at] = bucket;
    this.#bucketHeapAt[bucket] = at;
  }

  #siftDown(start: number): void {
    const heap = this.#heap;
    const dues = this.#bucketDue;
    const size = this.#heapSize;
    const bucket = heap[start]!;
    const due = dues[bucket]!;
    let at = start;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= size) break;
      if (child + 1 < size && dues[heap[child + 1]!]! < dues[heap[child]!]!) child++;
      const smaller = heap[child]!;
      if (dues[smaller]! >= due) break;
      heap[at] = smaller;
      this.#bucketHeapAt[smaller] = at;
      at = child;
    }
    heap[at] = bucket;
    this.#bucketHeapAt[bucket] = at;
  }
}
