/**
 * The pool's record of one dispatched item, from `dispatch()` until it settles. The pool numbers its record (`seq`,
 * which the item's record and its outcome carry), never the caller's item, which it does not write to.
 *
 * Where it is, by `place`: published in the work queue at its priority (`queued`), waiting in main's backlog for room
 * in that level's ring (`backlog`), sent by message to one thread (`pinned`, its payload could not go as bytes), or
 * seen to have started (`running`). It settles exactly once (`outcome`).
 */
import type { WorkItem } from '../protocol/messages.js';
import type { CostEstimate } from './cost-model.js';
import type { Outcome, StartObserver } from './outcome.js';

export const Place = Object.freeze({ QUEUED: 'queued', BACKLOG: 'backlog', PINNED: 'pinned', RUNNING: 'running' } as const);
export type PlaceValue = (typeof Place)[keyof typeof Place];

export class PendingItem {
  readonly seq: number;
  readonly item: WorkItem;
  readonly resolve: (outcome: Outcome) => void;
  readonly observer: StartObserver | undefined;
  readonly cost: CostEstimate;
  /** The priority level it is queued at (1..100). */
  readonly priority: number;
  /** Its prediction, taken when it was dispatched (what the work-ahead sums count). */
  readonly predictedMs: number;
  place: PlaceValue = Place.QUEUED;
  /** The thread it was pinned to, when `pinned`. */
  pinnedTo: number = -1;
  /** What it came to, once it settled (exactly once). */
  outcome: Outcome | undefined = undefined;
  /** `performance.now()` when it was seen to start; NaN until then. */
  startedPerf = Number.NaN;
  /** When it started on the pool's clock, as the pool told its observer; undefined until then. */
  startedAt: number | undefined = undefined;

  constructor(seq: number, item: WorkItem, resolve: (outcome: Outcome) => void, observer: StartObserver | undefined, cost: CostEstimate, priority: number) {
    this.seq = seq;
    this.item = item;
    this.resolve = resolve;
    this.observer = observer;
    this.cost = cost;
    this.priority = priority;
    this.predictedMs = cost.ms;
  }

  get settled(): boolean {
    return this.outcome !== undefined;
  }
}
