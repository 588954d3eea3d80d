/**
 * The pool's record of one dispatched item, from `dispatch()` until it settles. The pool numbers its record (`seq`,
 * the key its thread reports the outcome under), never the caller's item, which it does not write to.
 *
 * Where the record is: waiting in main's queue (`queued`), counted in the load of the thread expected to run it
 * (`assigned`), and sent to one thread or more (`holder`, `moreHolders`: more than one after it was taken back from
 * a busy thread for an idle one; the slot word's start CAS lets exactly one of them run it).
 */
import { SlotState } from '../slots/slot-layout.js';
import type { SlotTable } from '../slots/slot-table.js';
import type { SequencedItem, WorkItem } from '../protocol/messages.js';
import type { CostEstimate } from './cost-model.js';
import type { Outcome, StartObserver } from './outcome.js';
import type { ThreadChannel } from './thread-channel.js';

export class PendingItem implements SequencedItem {
  readonly seq: number;
  readonly item: WorkItem;
  readonly resolve: (outcome: Outcome) => void;
  readonly observer: StartObserver | undefined;
  readonly cost: CostEstimate;
  /** Prediction counted in the load of the channel it is assigned to (taken when assigned). */
  predictedMs = 0;
  /** The channel expected to run it, whose load counts it; undefined while it waits in main's queue. */
  assigned: ThreadChannel<PendingItem> | undefined = undefined;
  /** The channel it was sent to; `moreHolders` the others it was also sent to (after being taken back). */
  holder: ThreadChannel<PendingItem> | undefined = undefined;
  moreHolders: ThreadChannel<PendingItem>[] | undefined = undefined;
  /** In main's queue (waiting, or taken back from a busy thread). */
  queued = false;
  /** What it came to, once it settled (exactly once). */
  outcome: Outcome | undefined = undefined;
  /** `performance.now()` when it was seen to start; NaN until then. */
  startedPerf = Number.NaN;

  constructor(seq: number, item: WorkItem, resolve: (outcome: Outcome) => void, observer: StartObserver | undefined, cost: CostEstimate) {
    this.seq = seq;
    this.item = item;
    this.resolve = resolve;
    this.observer = observer;
    this.cost = cost;
  }

  get settled(): boolean {
    return this.outcome !== undefined;
  }

  holds(channel: ThreadChannel<PendingItem>): boolean {
    return this.holder === channel || (this.moreHolders?.includes(channel) ?? false);
  }

  addHolder(channel: ThreadChannel<PendingItem>): void {
    if (this.holder === undefined) this.holder = channel;
    else if (!this.holds(channel)) (this.moreHolders ??= []).push(channel);
  }

  removeHolder(channel: ThreadChannel<PendingItem>): void {
    if (this.holder === channel) this.holder = this.moreHolders?.shift();
    else if (this.moreHolders !== undefined) {
      const at = this.moreHolders.indexOf(channel);
      if (at >= 0) this.moreHolders.splice(at, 1);
    }
  }

  /** Whether the item's slot still waits for a thread to start it. */
  unstarted(slots: SlotTable): boolean {
    const { slot, generation } = this.item;
    return slots.state(slot) === SlotState.CLAIMED && slots.generation(slot) === generation;
  }
}
