/**
 * What main knows of the work queue: at each priority level, the items it published in ring order and the ones
 * waiting in its backlog for room in that ring. Threads take a level's entries in order, so the ring's `HEAD` says
 * how many of them left the queue: `sync` moves the ledger up to it, and an item it passes that has not settled has
 * started (an entry is passed over only for an item that settled: canceled before it started, or of an older claim
 * of its slot). Then the backlog moves into the room the threads made. It also keeps the predicted work of what has
 * not started, for the broker's pacing, without a walk over the items.
 */
import type { WorkQueueWriter } from '../protocol/work-queue.js';
import { MAX_PRIORITY } from '../protocol/work-queue.js';
import { Place, type PendingItem } from './pending-item.js';

/** A FIFO of items without the cost of `shift()` on a long array. */
class Fifo {
  #items: (PendingItem | undefined)[] = [];
  #head = 0;

  get size(): number {
    return this.#items.length - this.#head;
  }

  push(item: PendingItem): void {
    this.#items.push(item);
  }

  peek(): PendingItem | undefined {
    return this.#items[this.#head];
  }

  shift(): PendingItem | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  *values(): Generator<PendingItem> {
    for (let i = this.#head; i < this.#items.length; i++) yield this.#items[i]!;
  }
}

class Level {
  readonly published = new Fifo();
  readonly backlog = new Fifo();
  /** The ring position the ledger has accounted for: entries before it were taken by threads. */
  position = 0;
}

export class QueueLedger {
  readonly #queue: WorkQueueWriter;
  readonly #levels: (Level | undefined)[] = new Array(MAX_PRIORITY + 1);
  /** Levels holding anything, highest first (kept short: a handful of priorities are in use at once). */
  #active: number[] = [];
  #unstartedMs = 0;
  #unstarted = 0;

  constructor(queue: WorkQueueWriter) {
    this.#queue = queue;
  }

  /** Items published or in the backlog that have not started (settled ones excepted only once passed). */
  get unstarted(): number {
    return this.#unstarted;
  }

  /** Their predicted work, ms. */
  get unstartedMs(): number {
    return this.#unstartedMs;
  }

  /**
   * Publishes an item whose record is written: at the back of its level, or into the backlog when the ring is full
   * or items wait in the backlog already (none may overtake them).
   */
  add(pending: PendingItem): void {
    const level = this.#level(pending.priority);
    this.#unstarted++;
    this.#unstartedMs += pending.predictedMs;
    const { slot, generation } = pending.item;
    if (level.backlog.size === 0 && this.#queue.enqueue(slot, generation, pending.priority)) {
      pending.place = Place.QUEUED;
      level.published.push(pending);
    } else {
      pending.place = Place.BACKLOG;
      level.backlog.push(pending);
    }
  }

  /** An unstarted item settled (canceled, or lost at a stop): it no longer counts as work ahead. */
  settledUnstarted(pending: PendingItem): void {
    this.#unstarted--;
    this.#unstartedMs -= pending.predictedMs;
    if (this.#unstarted === 0) this.#unstartedMs = 0;
  }

  /**
   * Moves up to the rings' heads, telling `started` of each item that left the queue to run, then fills the room the
   * threads made from the backlog. Returns how many items the backlog published (parked threads may take them).
   */
  sync(started: (pending: PendingItem) => void): number {
    let moved = 0;
    let emptied = false;
    for (const p of this.#active) {
      const level = this.#levels[p]!;
      const head = this.#queue.taken(p);
      while (level.position !== head) {
        const pending = level.published.shift();
        level.position = (level.position + 1) | 0;
        if (pending === undefined || pending.settled || pending.place !== Place.QUEUED) continue;
        pending.place = Place.RUNNING;
        this.settledUnstarted(pending);
        started(pending);
      }
      while (level.backlog.size > 0) {
        const next = level.backlog.peek()!;
        if (next.settled) {
          level.backlog.shift();
          continue;
        }
        if (!this.#queue.enqueue(next.item.slot, next.item.generation, p)) break;
        level.backlog.shift();
        next.place = Place.QUEUED;
        level.published.push(next);
        moved++;
      }
      if (level.published.size === 0 && level.backlog.size === 0) emptied = true;
    }
    if (emptied) this.#active = this.#active.filter((p) => {
      const level = this.#levels[p]!;
      return level.published.size > 0 || level.backlog.size > 0;
    });
    return moved;
  }

  /** Every item published or in the backlog that has not settled (a stopping pool settles them). */
  *unstartedItems(): Generator<PendingItem> {
    for (const p of this.#active) {
      const level = this.#levels[p]!;
      for (const pending of level.published.values()) if (pending !== undefined && !pending.settled && pending.place === Place.QUEUED) yield pending;
      for (const pending of level.backlog.values()) if (pending !== undefined && !pending.settled) yield pending;
    }
  }

  #level(priority: number): Level {
    let level = this.#levels[priority];
    if (level === undefined) {
      level = new Level();
      level.position = this.#queue.taken(priority);
      this.#levels[priority] = level;
    }
    if (!this.#active.includes(priority)) {
      this.#active.push(priority);
      this.#active.sort((a, b) => b - a);
    }
    return level;
  }
}
