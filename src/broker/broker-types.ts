/** What the broker hands out and reports: shapes shared by every `BrokerBackend`, the in-memory `EvalBroker` included. */
import type { BrokerGaugeSnapshot } from './broker-metrics.js';
import type { Evaluation, EvaluationState } from './evaluation.js';

/** What a dequeue hands out: the evaluation and the token that ack/nack must present. */
export interface Delivery {
  readonly evaluation: Evaluation;
  readonly token: string;
}

export interface SchedulerStats {
  readonly ready: number;
  readonly unacked: number;
}

/**
 * Counts by state. Every evaluation the broker holds is in exactly one of ready, pending, unacked, waiting,
 * failed and cancelable. `totalReady` excludes `_failed` (that is `totalFailed`); an evaluation dequeued from
 * `_failed` counts as unacked. `byScheduler` includes `_failed` once it has been used.
 */
export interface BrokerStats extends BrokerGaugeSnapshot {
  readonly byScheduler: Readonly<Record<string, SchedulerStats>>;
}

/** Where one evaluation is, for diagnostics and tests (`EvalBroker.inspect`). */
export interface EvaluationInfo {
  readonly state: EvaluationState;
  /** The queue it is ready or unacked in (its type or `_failed`). */
  readonly queue: string | undefined;
  /** Deliveries from its scheduler queue so far. */
  readonly deliveries: number;
  /** Whether it holds its job's one ready-or-unacked slot. */
  readonly holdsJobSlot: boolean;
}
