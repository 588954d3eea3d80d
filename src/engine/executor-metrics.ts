/**
 * The executor's metrics, after InfluxDB's task executor (`task_executor_*`): runs in flight on threads, items
 * waiting for a thread, and errors by code. Executors sharing a registry add up: runs in flight move with inc/dec,
 * and the queue depth is the sum over the pools of the executors on the registry (a stopped pool has none queued).
 */
import type { Counter, Gauge } from 'prom-client';
import { counter, gauge, type Registry } from '../observability/metrics.js';
import type { Outcome } from '../pool/thread-pool.js';
import { addToSummedGauge } from '../observability/summed-gauge.js';

/** What the queue depth is read from: the engine's `ThreadPool`. */
export interface QueuedSource {
  stats(): { readonly queued: number };
}

/** Module-level, so that the registry's gauge does not hold the pool through a closure (see `summed-gauge.ts`). */
const queuedOf = (pool: QueuedSource): number => pool.stats().queued;

export class ExecutorMetrics {
  readonly #active: Gauge;
  readonly #complete: Counter<'status'>;
  readonly #errors: Counter<'code'>;

  constructor(registry: Registry, pool: QueuedSource) {
    this.#active = gauge(registry, { name: 'tickpool_task_executor_runs_active', help: 'Task runs dispatched to pool threads and not yet ended' });
    addToSummedGauge(
      registry,
      { name: 'tickpool_task_executor_queue_depth', help: 'Items (task runs and evaluations) waiting for a pool thread' },
      pool,
      queuedOf,
    );
    this.#complete = counter(registry, {
      name: 'tickpool_task_executor_runs_complete_total',
      help: 'Task run attempts ended on pool threads, by outcome',
      labelNames: ['status'],
    });
    this.#errors = counter(registry, {
      name: 'tickpool_task_executor_errors_total',
      help: 'Task run attempts that failed, by error code',
      labelNames: ['code'],
    });
  }

  started(): void {
    this.#active.inc();
  }

  settled(outcome: Outcome): void {
    this.#active.dec();
    this.#complete.inc({ status: outcome.status });
    if (outcome.status === 'error' || outcome.status === 'lost') this.#errors.inc({ code: outcome.error.code });
  }
}
