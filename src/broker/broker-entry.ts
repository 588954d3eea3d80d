import type { DeliveryRecord } from './admin-types.js';
import type { QueueLatencies } from './broker-metrics.js';
import type { DeadlineNode } from './deadline-queue.js';
import { DEFAULT_NAMESPACE, FAILED_QUEUE, type Evaluation } from './evaluation.js';
import { OutcomeRecord } from './outcome-waiters.js';
import { PriorityHeap, type HeapNode } from './priority-heap.js';
import { ReadyLine } from './ready-line.js';

/**
 * The broker's private bookkeeping: one `Entry` per evaluation it holds, one `ReadyQueue` per scheduler type (plus
 * `_failed`), one `JobSlot` per job key with something in flight. Nothing here is exported from the package.
 *
 * Where an entry is, by `state`:
 * - READY: in `queue.line`.
 * - PENDING: in its job's `pending` heap (the job slot is held by another entry).
 * - UNACKED: delivered with `token`; in the deadline queue unless its nack timeout is paused.
 * - WAITING: in the deadline queue until `due`. With `holdsSlot` it is a nacked delivery waiting out its re-enqueue
 *   delay (it keeps its job's slot, as in Nomad); without, a `wait`/`waitUntil` evaluation (it takes no slot).
 * - CANCELABLE: in the broker's cancelable list until `drainCancelable()` (its outcome is already settled).
 * An entry in `_failed` is READY or UNACKED with `queue` = the failed queue and never holds a job slot.
 */
export const EntryState = {
  Ready: 1,
  Pending: 2,
  Unacked: 3,
  Waiting: 4,
  Cancelable: 5,
  /** Acked, drained or flushed: the broker forgot it. */
  Gone: 6,
} as const;
export type EntryStateValue = (typeof EntryState)[keyof typeof EntryState];

/** The broker's record of one evaluation, its outcome included (`OutcomeRecord`). */
export class Entry extends OutcomeRecord implements HeapNode, DeadlineNode {
  readonly evaluation: Evaluation;
  readonly namespace: string;
  readonly jobId: string;
  readonly type: string;
  // Ordering fields are read once: a caller mutating its evaluation later cannot break a heap.
  readonly priority: number;
  readonly modifyIndex: number;
  /** createIndex, or 0 (then enqueue order decides). */
  readonly order: number;
  /** Enqueue order; the last tie-break everywhere. */
  readonly seq: number;

  state: EntryStateValue = EntryState.Gone;
  /** The queue it is ready or unacked in. */
  queue: ReadyQueue | undefined = undefined;
  heapIndex = -1;
  lineMark = 0;
  due = 0;
  deadlineIndex = -1;
  deadlineSeq = 0;
  /** Token of the current delivery; '' when not unacked. */
  token = '';
  /** Token of the last delivery whose nack deadline fired: an ack with it gets NackTimeoutReachedError. */
  timedOutToken = '';
  /** Deliveries from its scheduler queue (not from `_failed`); never exceeds the delivery limit. */
  deliveries = 0;
  /** Its job's slot while it holds it or is pending behind it (saves the map lookups on ack). */
  slot: JobSlot | undefined = undefined;
  holdsSlot = false;
  nackPaused = false;
  /** Clock time it last became ready (wait and response time). */
  readyAt = 0;
  /** Clock time of the current delivery (process time). */
  dequeuedAt = 0;
  /** The reason given with the last nack (or a timeout). */
  lastReason: Error | undefined = undefined;
  /** Why it is in `_failed`. */
  failure: Error | undefined = undefined;
  /**
   * Its most recent ended deliveries that were not acks (at most `HISTORY_LIMIT`), made at the first: an acked
   * evaluation leaves the broker, so the ack path writes nothing here.
   */
  history: DeliveryRecord[] | undefined = undefined;

  constructor(evaluation: Evaluation, seq: number) {
    super(evaluation.id);
    this.evaluation = evaluation;
    this.namespace = evaluation.namespace ?? DEFAULT_NAMESPACE;
    this.jobId = evaluation.jobId;
    this.type = evaluation.type;
    this.priority = evaluation.priority;
    this.modifyIndex = evaluation.modifyIndex ?? 0;
    this.order = evaluation.createIndex ?? 0;
    this.seq = seq;
  }
}

/**
 * Ready order: higher priority first, then FIFO by createIndex, then by enqueue order. (Nomad compares priority
 * only between different jobs; with one ready evaluation per job that is the same thing in scheduler queues, and in
 * `_failed` a comparator that ignores priority for some pairs would not be a consistent order for a heap.)
 */
export function readyBefore(a: Entry, b: Entry): boolean {
  if (a.priority !== b.priority) return a.priority > b.priority;
  if (a.order !== b.order) return a.order < b.order;
  return a.seq < b.seq;
}

/** Pending order within a job: higher priority first, then newest modifyIndex, then the latest enqueued. */
export function pendingBefore(a: Entry, b: Entry): boolean {
  if (a.priority !== b.priority) return a.priority > b.priority;
  if (a.modifyIndex !== b.modifyIndex) return a.modifyIndex > b.modifyIndex;
  return a.seq > b.seq;
}

export class ReadyQueue {
  readonly name: string;
  readonly failed: boolean;
  readonly line = new ReadyLine<Entry>(readyBefore);
  unacked = 0;
  /** Paused by an operator: dequeues do not take from it (what is in flight goes on). */
  paused = false;
  readonly latencies: QueueLatencies;

  constructor(name: string, latencies: QueueLatencies) {
    this.name = name;
    this.failed = name === FAILED_QUEUE;
    this.latencies = latencies;
  }
}

/** The one-in-flight slot of a job key and what waits behind it. Dropped when both are empty. */
export class JobSlot {
  holder: Entry | undefined = undefined;
  /** Created on first use: most jobs never have a pending evaluation. */
  pending: PriorityHeap<Entry> | undefined = undefined;
}
