import { growFloat64, growInt32, growUint8 } from './growable.js';
import type { Task } from './task.js';

/** Lifecycle of a claim-table entry. */
export const ClaimState = Object.freeze({
  /** Unused; on the free list. */
  FREE: 0,
  /** Claimed: scheduled and allowed to start runs. */
  CLAIMED: 1,
  /** Released while runs were in flight: kept (with its slots) until the canceled runs have stopped. */
  DRAINING: 2,
} as const);
export type ClaimStateValue = (typeof ClaimState)[keyof typeof ClaimState];

/**
 * The scheduler's per-task state, one small integer per claimed task. Everything an idle claimed task needs sits in
 * typed arrays (about 25 bytes) plus an id map entry and the task reference; anything else (runs, error backoff)
 * lives in a `TaskActivity` that exists only while the task is busy.
 *
 * `epoch` grows on every release, so an async continuation that captured (index, epoch) can tell that the claim
 * it worked for is gone, even when the index has been reused by a re-claim. Main thread only.
 */
export class ClaimedTasks {
  readonly #claimed = new Map<string, number>();
  readonly #draining = new Map<string, number>();
  readonly #tasks: Array<Task | undefined> = [];
  #nextDue = new Float64Array(0);
  #slotBase = new Int32Array(0);
  #epoch = new Int32Array(0);
  #state = new Uint8Array(0);
  readonly #free: number[] = [];

  get claimedCount(): number {
    return this.#claimed.size;
  }

  get drainingCount(): number {
    return this.#draining.size;
  }

  /** Index of the claimed task `id`, or -1. */
  /** The ids of the claimed tasks. */
  claimedIds(): string[] {
    return [...this.#claimed.keys()];
  }

  claimedIndex(id: string): number {
    return this.#claimed.get(id) ?? -1;
  }

  /** Index of the released-but-draining task `id`, or -1. */
  drainingIndex(id: string): number {
    return this.#draining.get(id) ?? -1;
  }

  /** A new claim at a fresh index. */
  add(task: Task, slotBase: number, nextDue: number): number {
    const index = this.#free.pop() ?? this.#tasks.length;
    const needed = index + 1;
    this.#nextDue = growFloat64(this.#nextDue, needed);
    this.#slotBase = growInt32(this.#slotBase, needed);
    this.#epoch = growInt32(this.#epoch, needed);
    this.#state = growUint8(this.#state, needed);
    this.#tasks[index] = task;
    this.#slotBase[index] = slotBase;
    this.#nextDue[index] = nextDue;
    this.#state[index] = ClaimState.CLAIMED;
    this.#claimed.set(task.id, index);
    return index;
  }

  /** A draining entry claimed again (same id): its stopping runs keep counting against the new claim. */
  reclaim(index: number, task: Task, slotBase: number, nextDue: number): void {
    this.#draining.delete(task.id);
    this.#tasks[index] = task;
    this.#slotBase[index] = slotBase;
    this.#nextDue[index] = nextDue;
    this.#state[index] = ClaimState.CLAIMED;
    this.#claimed.set(task.id, index);
  }

  /** A claimed entry's task replaced (same id), runs and epoch kept: new runs use `task` and `slotBase`. */
  replace(index: number, task: Task, slotBase: number): void {
    this.#tasks[index] = task;
    this.#slotBase[index] = slotBase;
  }

  /** CLAIMED → DRAINING, ending the claim's epoch. */
  release(index: number): void {
    const id = this.#tasks[index]!.id;
    this.#claimed.delete(id);
    this.#draining.set(id, index);
    this.#state[index] = ClaimState.DRAINING;
    this.#epoch[index] = (this.#epoch[index]! + 1) | 0;
  }

  /** DRAINING → FREE. */
  free(index: number): void {
    this.#draining.delete(this.#tasks[index]!.id);
    this.#tasks[index] = undefined;
    this.#state[index] = ClaimState.FREE;
    this.#free.push(index);
  }

  task(index: number): Task {
    return this.#tasks[index]!;
  }

  state(index: number): ClaimStateValue {
    return this.#state[index]! as ClaimStateValue;
  }

  epoch(index: number): number {
    return this.#epoch[index]!;
  }

  nextDue(index: number): number {
    return this.#nextDue[index]!;
  }

  setNextDue(index: number, due: number): void {
    this.#nextDue[index] = due;
  }

  slotBase(index: number): number {
    return this.#slotBase[index]!;
  }
}
