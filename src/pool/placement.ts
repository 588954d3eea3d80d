/**
 * Where the pool's queued items go: the placement decision as pure functions of numbers. What each thread holds is
 * its predicted load (the cost model's estimates of its assigned items); the pool reads the clock and the slot
 * table and passes what they say in.
 *
 * The water-fill (`placeQueued`): items are taken oldest first, and each goes to the thread with the least
 * predicted load that has room for it (on a tie, the one with fewer items, then the first). The first item no thread
 * has room for ends the fill: it and everything behind it wait on main, so no later item overtakes it and an
 * unstarted item is never committed to a thread that cannot start it soon. A thread has room when
 * - it has nothing assigned: the item starts as soon as it arrives (so a thread that is free is always chosen first,
 *   its load being 0); or
 * - its running item has not overrun its prediction by more than the budget, it holds fewer than `batchSize` items,
 *   and the predicted work that would then wait behind its running item stays within `budgetMs`.
 * So no-op items still travel dozens to a message, an item of a millisecond has at most one more queued behind it,
 * and items of several milliseconds go one at a time.
 *
 * When nothing waits on main, a thread with nothing assigned takes unstarted items from the busiest other thread
 * (`busiestThread`, `takeBackCount`): the pool asks the slot table which of them are still unstarted.
 */

/** What the placement knows of one thread. */
export interface ThreadLoad {
  /** Items assigned to it, the one it runs included. */
  readonly assigned: number;
  /** Their predicted work, ms. */
  readonly loadMs: number;
  /** Predicted ms of the item it runs (its first assigned); 0 when it has none. */
  readonly runningMs: number;
  /** Its running item has overrun its prediction by more than the budget (see `overran`): nothing more waits behind it. */
  readonly overrun: boolean;
}

export interface PlacementLimits {
  /** Predicted work that may wait on a thread behind the item it runs, ms. */
  readonly budgetMs: number;
  /** Most items assigned to one thread (what a crash can take with it). */
  readonly batchSize: number;
}

export interface Placement<T> {
  /** Per thread, in the order of the `threads` given, the items placed on it, oldest first. */
  readonly given: T[][];
  /** Index in the queue of the first item left waiting: every item before it was placed or needed no place. */
  readonly next: number;
}

/**
 * Whether a thread holding `assigned` items of `loadMs` predicted work (`runningMs` of it running) can take one
 * more predicted at `predictedMs`.
 */
export function hasRoom(
  assigned: number,
  loadMs: number,
  runningMs: number,
  overrun: boolean,
  predictedMs: number,
  limits: PlacementLimits,
): boolean {
  if (assigned === 0) return true;
  return !overrun && assigned < limits.batchSize && loadMs - runningMs + predictedMs <= limits.budgetMs;
}

/**
 * Whether a thread's running item (predicted at `predictedMs`, running for `runningForMs`) has overrun its prediction
 * by more than the budget while items wait behind it: those may wait long, and go back to main's queue.
 */
export function overran(assigned: number, predictedMs: number, runningForMs: number, budgetMs: number): boolean {
  return assigned > 1 && runningForMs > predictedMs + budgetMs;
}

/**
 * Places the items of `queue` from `head` on, oldest first, by the water-fill (see the module comment). `predict`
 * gives an item's predicted ms, or undefined for an item that needs no place (it started elsewhere or settled):
 * such an item is passed over wherever it is and counts as consumed. Stops at the first item no thread has room for.
 */
export function placeQueued<T>(
  queue: readonly T[],
  head: number,
  predict: (item: T) => number | undefined,
  threads: readonly ThreadLoad[],
  limits: PlacementLimits,
): Placement<T> {
  const count = threads.length;
  const assigned: number[] = [];
  const loadMs: number[] = [];
  const runningMs: number[] = [];
  const given: T[][] = [];
  for (let i = 0; i < count; i++) {
    const t = threads[i]!;
    assigned.push(t.assigned);
    loadMs.push(t.loadMs);
    runningMs.push(t.runningMs);
    given.push([]);
  }
  let next = head;
  for (; next < queue.length; next++) {
    const item = queue[next]!;
    const predicted = predict(item);
    if (predicted === undefined) continue;
    let best = -1;
    for (let i = 0; i < count; i++) {
      if (!hasRoom(assigned[i]!, loadMs[i]!, runningMs[i]!, threads[i]!.overrun, predicted, limits)) continue;
      if (best < 0 || loadMs[i]! < loadMs[best]! || (loadMs[i] === loadMs[best] && assigned[i]! < assigned[best]!)) best = i;
    }
    if (best < 0) break;
    if (assigned[best] === 0) runningMs[best] = predicted;
    assigned[best]!++;
    loadMs[best]! += predicted;
    given[best]!.push(item);
  }
  return { given, next };
}

/**
 * The thread (by index, other than `except`) with the most items assigned behind the one it runs; -1 when no other
 * thread has any waiting.
 */
export function busiestThread(threads: readonly { readonly assigned: number }[], except: number): number {
  let busiest = -1;
  for (let i = 0; i < threads.length; i++) {
    if (i === except) continue;
    const assigned = threads[i]!.assigned;
    if (assigned > 1 && (busiest < 0 || assigned > threads[busiest]!.assigned)) busiest = i;
  }
  return busiest;
}

/** How many unstarted items a free thread takes from one with `assigned` items: half of those waiting, at least one. */
export function takeBackCount(assigned: number): number {
  return Math.max(1, Math.floor((assigned - 1) / 2));
}
