/**
 * The broker's counts as `stats()` and `inspect()` report them, from the rows the database answers with: the same
 * shapes the in-memory broker reports, `_failed`'s ready evaluations counted as failed rather than ready.
 */
import type { BrokerStats, EvaluationInfo, SchedulerStats } from '../../broker/broker-types.js';
import { FAILED_QUEUE, type EvaluationState } from '../../broker/evaluation.js';

/** A row of `BrokerQueries.stats`: a state's count, by queue for the queued states (a type: rows are records). */
export type StateCount = { readonly state: string; readonly queue: string; readonly n: number };

/** A row of `BrokerQueries.inspect`. */
export type InspectRow = { readonly state: string; readonly queue: string; readonly deliveries: number; readonly holds_slot: boolean };

export function statsOf(rows: readonly StateCount[]): BrokerStats {
  let totalReady = 0;
  let totalUnacked = 0;
  let totalPending = 0;
  let totalWaiting = 0;
  let totalCancelable = 0;
  let totalFailed = 0;
  const byScheduler: Record<string, { ready: number; unacked: number }> = Object.create(null) as Record<string, { ready: number; unacked: number }>;
  const queue = (name: string): { ready: number; unacked: number } => (byScheduler[name] ??= { ready: 0, unacked: 0 });
  for (const { state, queue: name, n } of rows) {
    switch (state) {
      case 'ready':
        queue(name).ready += n;
        if (name === FAILED_QUEUE) totalFailed += n;
        else totalReady += n;
        break;
      case 'unacked':
        queue(name).unacked += n;
        totalUnacked += n;
        break;
      case 'pending':
        totalPending += n;
        break;
      case 'waiting':
        totalWaiting += n;
        break;
      case 'cancelable':
        totalCancelable += n;
        break;
    }
  }
  return {
    totalReady,
    totalUnacked,
    totalPending,
    totalWaiting,
    totalCancelable,
    totalFailed,
    byScheduler: Object.fromEntries(Object.entries(byScheduler)) as Record<string, SchedulerStats>,
  };
}

export function infoOf(row: InspectRow): EvaluationInfo {
  const failed = row.queue === FAILED_QUEUE;
  const state: EvaluationState = row.state === 'ready' && failed ? 'failed' : (row.state as EvaluationState);
  const inQueue = row.state === 'ready' || row.state === 'unacked';
  return { state, queue: inQueue ? row.queue : undefined, deliveries: row.deliveries, holdsJobSlot: row.holds_slot };
}
