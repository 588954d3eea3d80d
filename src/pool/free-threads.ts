/**
 * How many of the pool's threads could start another item within a horizon: what a broker that leases for this
 * process, with other processes' threads beside these, asks before it takes more.
 */
import type { PendingItem } from './pending-item.js';

/**
 * How far a running item may overrun its prediction before the pool stops counting its thread as free soon (for
 * the pacing of a broker with round trips), ms.
 */
export const OVERRUN_BUDGET_MS = 2;

export interface ThreadCounts {
  /** Threads that said ready. */
  readonly ready: number;
  /** Items in the queue no thread has started: each takes a free thread first. */
  readonly unstarted: number;
  readonly maxThreads: number;
}

/**
 * A thread is free once the predicted rest of its running item has run (and nothing waits in the queue ahead of
 * it); one whose running item has overrun its prediction by more than OVERRUN_BUDGET_MS is busy for an unknown time
 * and does not count. A thread not running yet (not started, idle-stopped, respawning) counts: it starts on demand.
 * `now` is on the clock of the items' `startedPerf`.
 */
export function threadsFreeWithin(running: Iterable<PendingItem>, counts: ThreadCounts, horizonMs: number, now: number): number {
  let busySoonFree = 0;
  let busy = 0;
  for (const pending of running) {
    busy++;
    const ranMs = Number.isNaN(pending.startedPerf) ? 0 : now - pending.startedPerf;
    if (ranMs > pending.predictedMs + OVERRUN_BUDGET_MS) continue;
    if (Math.max(0, pending.predictedMs - ranMs) < horizonMs) busySoonFree++;
  }
  const idle = Math.max(0, counts.ready - busy);
  const free = Math.max(0, idle + busySoonFree - counts.unstarted);
  return free + Math.max(0, counts.maxThreads - counts.ready);
}
