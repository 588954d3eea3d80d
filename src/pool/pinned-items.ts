/**
 * Items whose payload cannot be written as bytes (a value the byte codec does not know): each goes by message to
 * one thread, a parked one if any, else the one with the fewest such items, and runs there before anything from the
 * shared queue. An item pinned while no thread is ready waits here until one is (`repin`).
 *
 * Invariant: a pinned item is in exactly one place, its thread's `pinned` set (`pinnedTo` = that thread) or the
 * waiting list (`pinnedTo` = -1), until it settles.
 */
import type { WorkQueueWriter } from '../protocol/work-queue.js';
import { unsendableOutcome, type Outcome } from './outcome.js';
import { Place, type PendingItem } from './pending-item.js';
import type { Channel } from './thread-supervisor.js';

export class PinnedItems {
  readonly #channels: () => readonly (Channel | undefined)[];
  readonly #queue: WorkQueueWriter;
  readonly #settle: (pending: PendingItem, outcome: Outcome) => void;
  /** Pinned items that found no ready thread. */
  readonly #waiting: PendingItem[] = [];

  constructor(channels: () => readonly (Channel | undefined)[], queue: WorkQueueWriter, settle: (pending: PendingItem, outcome: Outcome) => void) {
    this.#channels = channels;
    this.#queue = queue;
    this.#settle = settle;
  }

  pin(pending: PendingItem): void {
    pending.place = Place.PINNED;
    const open = this.#channels().filter(isOpen);
    if (open.length === 0) {
      // No thread is ready yet (the pool is booting or respawning): try again once one is.
      pending.pinnedTo = -1;
      this.#waiting.push(pending);
      return;
    }
    let target = open.find((c) => this.#queue.parkState(c.index).parked);
    if (target === undefined) target = open.reduce((a, b) => (b.pinned.size < a.pinned.size ? b : a));
    pending.pinnedTo = target.index;
    target.pinned.add(pending);
    try {
      target.post({ type: 'pinned', item: { ...pending.item, seq: pending.seq } });
    } catch (cloneError) {
      target.pinned.delete(pending);
      this.#settle(pending, unsendableOutcome(pending.item, cloneError));
      return;
    }
    this.#queue.wakeThread(target.index);
  }

  /** A thread is ready: the items that waited for one go to it. */
  repin(): void {
    if (this.#waiting.length === 0 || !this.#channels().some(isOpen)) return;
    for (const pending of this.#waiting.splice(0)) if (!pending.settled) this.pin(pending);
  }

  /** Takes the item off the thread it was pinned to (it settled, or runs again). */
  unpin(pending: PendingItem): void {
    if (pending.pinnedTo >= 0) this.#channels()[pending.pinnedTo]?.pinned.delete(pending);
  }

  /** Pinned items a thread holds and has not started. */
  heldUnstarted(): number {
    let count = 0;
    for (const c of this.#channels()) if (c !== undefined) for (const p of c.pinned) if (p.place === Place.PINNED) count++;
    return count;
  }

  /** Empties the waiting list (the pool stops) and answers what was on it. */
  takeWaiting(): PendingItem[] {
    return this.#waiting.splice(0);
  }
}

const isOpen = (c: Channel | undefined): c is Channel => c !== undefined && c.isReady;
