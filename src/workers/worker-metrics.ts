/**
 * Worker metrics, named after Nomad's (`nomad.worker.wait_for_index`, `invoke_scheduler.<type>`, `submit_plan`)
 * in prom-client form. Label children are cached per type so the hot path does no label hashing.
 */
import { performance } from 'node:perf_hooks';
import type { Counter, Histogram } from 'prom-client';
import { counter, histogram, latencyBucketsSeconds, type Registry } from '../observability/metrics.js';

export class WorkerMetrics {
  readonly #invoke: Histogram<'type'>;
  readonly #invokeByType = new Map<string, { observe(value: number): void }>();
  readonly #waitForIndex: Histogram;
  readonly #submit: Histogram;
  readonly #refreshes: Counter;
  readonly #refused: Counter<'operation' | 'code'>;

  constructor(registry: Registry) {
    this.#invoke = histogram(registry, {
      name: 'tickpool_worker_invoke_scheduler_seconds',
      help: 'Dispatch of an evaluation to a pool thread until its scheduler returned, by evaluation type',
      labelNames: ['type'],
      buckets: [...latencyBucketsSeconds],
    });
    this.#waitForIndex = histogram(registry, {
      name: 'tickpool_worker_wait_for_index_seconds',
      help: "Time a thread waited for its replica to reach an evaluation's index (only waits that happened)",
      buckets: [...latencyBucketsSeconds],
    });
    this.#submit = histogram(registry, {
      name: 'tickpool_worker_submit_plan_seconds',
      help: 'Submission of a plan to the plan applier until its result',
      buckets: [...latencyBucketsSeconds],
    });
    this.#refreshes = counter(registry, {
      name: 'tickpool_worker_plan_refresh_total',
      help: 'Scheduler re-runs after a partly rejected plan',
    });
    this.#refused = counter(registry, {
      name: 'tickpool_worker_refused_total',
      help: 'Acks, nacks and fails the broker refused (e.g. an ack after the nack deadline fired)',
      labelNames: ['operation', 'code'],
    });
  }

  startScheduling(): number {
    return performance.now();
  }

  endScheduling(type: string, started: number, waitedMs: number): void {
    let child = this.#invokeByType.get(type);
    if (child === undefined) {
      child = this.#invoke.labels(type);
      this.#invokeByType.set(type, child);
    }
    child.observe((performance.now() - started) / 1000);
    if (waitedMs > 0) this.#waitForIndex.observe(waitedMs / 1000);
  }

  startSubmit(): number {
    return performance.now();
  }

  endSubmit(started: number): void {
    this.#submit.observe((performance.now() - started) / 1000);
  }

  planRefreshed(): void {
    this.#refreshes.inc();
  }

  refused(operation: 'ack' | 'nack' | 'fail', code: string | undefined): void {
    this.#refused.inc({ operation, code: code ?? 'unknown' });
  }
}
