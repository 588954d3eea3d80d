import type { Counter, Histogram } from 'prom-client';
import { counter, histogram, latencyBucketsSeconds, type Registry } from '../observability/metrics.js';
import { addToSummedGauge } from '../observability/summed-gauge.js';

/** Why a write was not committed. */
export type RejectReason = 'conflict' | 'evaluate' | 'all_at_once';

export interface PlanMetrics {
  readonly submitted: Counter;
  readonly rejectedWrites: Counter<'reason'>;
  readonly evaluateSeconds: Histogram;
  readonly applySeconds: Histogram;
  /**
   * Counts an applier's queue in `tickpool_plan_queue_depth`, which sums every applier on the registry (held
   * weakly; a stopped applier's queue is empty).
   */
  trackDepth(applier: { readonly depth: number }): void;
}

/** Reads an applier's depth; a function of the applier, not a closure over it (see `summed-gauge.ts`). */
const depthOf = (applier: { readonly depth: number }): number => applier.depth;

/** Plan applier metrics, named after Nomad's `nomad.plan.*`. */
export function planMetrics(registry: Registry): PlanMetrics {
  return {
    submitted: counter(registry, { name: 'tickpool_plan_submitted_total', help: 'Plans accepted for application (valid submissions).' }),
    rejectedWrites: counter(registry, {
      name: 'tickpool_plan_rejected_writes_total',
      help: 'Plan writes not committed, by reason: conflict (the record changed since it was read), evaluate (rejected by evaluatePlan), all_at_once (rejected with the rest of an all-at-once plan).',
      labelNames: ['reason'],
    }),
    evaluateSeconds: histogram(registry, {
      name: 'tickpool_plan_evaluate_seconds',
      help: 'Time to evaluate a plan against the state: version checks plus evaluatePlan.',
      buckets: [...latencyBucketsSeconds],
    }),
    applySeconds: histogram(registry, {
      name: 'tickpool_plan_apply_seconds',
      help: 'Time to commit the accepted writes of a plan, change listeners included.',
      buckets: [...latencyBucketsSeconds],
    }),
    trackDepth(applier) {
      addToSummedGauge(registry, { name: 'tickpool_plan_queue_depth', help: 'Plans submitted to the plan applier and not yet applied.' }, applier, depthOf);
    },
  };
}
