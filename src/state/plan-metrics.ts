import type { Counter, Gauge, Histogram } from 'prom-client';
import { counter, gauge, histogram, latencyBucketsSeconds, type Registry } from '../observability/metrics.js';

/** Why a write was not committed. */
export type RejectReason = 'conflict' | 'evaluate' | 'all_at_once';

export interface PlanMetrics {
  readonly submitted: Counter;
  readonly rejectedWrites: Counter<'reason'>;
  readonly evaluateSeconds: Histogram;
  readonly applySeconds: Histogram;
  /** Adds a source of queue depth to `tickpool_plan_queue_depth`; returns its removal. */
  trackDepth(source: () => number): () => void;
}

/**
 * Depth sources per gauge. The gauge is registered once per registry and reused by every applier on it (see
 * `metrics.ts`), so its `collect` cannot close over one applier: it sums the depth of every applier attached.
 */
const depthSources = new WeakMap<Gauge, Set<() => number>>();

/** Plan applier metrics, named after Nomad's `nomad.plan.*`. */
export function planMetrics(registry: Registry): PlanMetrics {
  const depth = gauge(registry, {
    name: 'tickpool_plan_queue_depth',
    help: 'Plans submitted to the plan applier and not yet applied.',
    collect(this: Gauge) {
      let total = 0;
      for (const source of depthSources.get(this) ?? []) total += source();
      this.set(total);
    },
  });
  let sources = depthSources.get(depth);
  if (sources === undefined) depthSources.set(depth, (sources = new Set()));
  const attached = sources;
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
    trackDepth(source) {
      attached.add(source);
      return () => attached.delete(source);
    },
  };
}
