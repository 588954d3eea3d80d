/**
 * Worker metrics, named after Nomad's (`nomad.worker.wait_for_index`, `invoke_scheduler.<type>`, `submit_plan`)
 * in prom-client form. The per-evaluation one is a `LatencyHistogram` whose series are cached per type, so the hot
 * path does no label hashing and no allocation.
 */
import { performance } from 'node:perf_hooks';
import type { Counter, Histogram } from 'prom-client';
import { LatencyHistogram, type LatencySeries } from '../observability/latency-histogram.js';
import { counter, histogram, latencyBucketsSeconds, type Registry } from '../observability/metrics.js';

/** What a worker asks of the broker that the broker may refuse (a delivery no longer current, a backend failure). */
export type RefusedOperation = 'ack' | 'nack' | 'give-back' | 'fail' | 'remove' | 'submit' | 'resume';

export class WorkerMetrics {
  readonly #invoke: LatencyHistogram;
  readonly #invokeByType = new Map<string, LatencySeries>();
  readonly #waitForIndex: Histogram;
  readonly #submit: Histogram;
  readonly #refreshes: Counter;
  readonly #refused: Counter<'operation' | 'code'>;

  constructor(registry: Registry) {
    // Observed once per evaluation: the cheap histogram, not prom-client's.
    this.#invoke = LatencyHistogram.on(registry, {
      name: 'tickpool_worker_invoke_scheduler_seconds',
      help: 'Dispatch of an evaluation to a pool thread until its scheduler returned, by evaluation type',
      labelName: 'type',
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
      help: 'Acks, nacks, give-backs and fails the broker refused (e.g. an ack after the nack deadline fired)',
      labelNames: ['operation', 'code'],
    });
  }

  startScheduling(): number {
    return performance.now();
  }

  endScheduling(type: string, started: number, waitedMs: number): void {
    let series = this.#invokeByType.get(type);
    if (series === undefined) {
      series = this.#invoke.series(type);
      this.#invokeByType.set(type, series);
    }
    series.observeMs(performance.now() - started);
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

  refused(operation: RefusedOperation, code: string | undefined): void {
    this.#refused.inc({ operation, code: code ?? 'unknown' });
  }
}
