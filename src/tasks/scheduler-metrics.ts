import type { Counter, Histogram, Registry } from 'prom-client';
import { counter, histogram, latencyBucketsSeconds } from '../observability/metrics.js';
import { addToSummedGauge } from '../observability/summed-gauge.js';
import type { SchedulerStateValue, TaskSchedulerStats } from './scheduler-state.js';
import type { FinalRunStatus } from './types.js';

/** Buckets for run durations, seconds: 1 ms to 1 hour. */
const durationBucketsSeconds: readonly number[] = [0.001, 0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

/** What failed, for `tickpool_task_scheduler_errors_total{operation}`. */
export type SchedulerOperation = 'create_run' | 'finish_run' | 'execute' | 'log' | 'cancel';

/** What the gauges read of a scheduler: its public face. */
export interface GaugedScheduler {
  readonly state: SchedulerStateValue;
  stats(): Pick<TaskSchedulerStats, 'claimedTasks' | 'runsActive'>;
}

// Functions of the scheduler, not closures over it (see `summed-gauge.ts`).
const claimsOf = (scheduler: GaugedScheduler): number => (scheduler.state === 'stopped' ? 0 : scheduler.stats().claimedTasks);
const runsOf = (scheduler: GaugedScheduler): number => scheduler.stats().runsActive;

/**
 * The scheduler's Prometheus metrics, after InfluxDB's `task_scheduler_*` names. The two gauges are read at
 * scrape time and summed over the schedulers on the registry (a stopped one counts no claims: they are kept for a
 * restart, but nothing schedules them); counters and histograms of schedulers sharing a registry add up by
 * themselves. Per run the scheduler pays two histogram observations and a few counter increments (well under a
 * microsecond); nothing is per task or per tick, and no label carries a task id (one series per task would not
 * survive a million tasks).
 */
export class SchedulerMetrics {
  readonly runsComplete: Counter<'status'>;
  readonly scheduleDelay: Histogram;
  readonly runDuration: Histogram<'status'>;
  readonly retries: Counter;
  readonly errors: Counter<'operation'>;

  constructor(registry: Registry, scheduler: GaugedScheduler) {
    addToSummedGauge(
      registry,
      { name: 'tickpool_task_scheduler_claims_active', help: 'Tasks claimed by task schedulers that are not stopped.' },
      scheduler,
      claimsOf,
    );
    addToSummedGauge(
      registry,
      {
        name: 'tickpool_task_scheduler_runs_active',
        help: 'Runs in flight: being created, executing, waiting to retry, or canceled and not yet stopped.',
      },
      scheduler,
      runsOf,
    );
    this.runsComplete = counter(registry, {
      name: 'tickpool_task_scheduler_runs_complete_total',
      help: 'Runs ended, by final status (success, failed, canceled).',
      labelNames: ['status'],
    });
    this.scheduleDelay = histogram(registry, {
      name: 'tickpool_task_scheduler_schedule_delay_seconds',
      help: "Delay from a run's due time (scheduledFor + offset, or the manual request) to its first execution start.",
      buckets: [...latencyBucketsSeconds],
    });
    this.runDuration = histogram(registry, {
      name: 'tickpool_task_scheduler_run_duration_seconds',
      help: 'Duration of runs from first execution start to final status, all attempts and backoff included.',
      labelNames: ['status'],
      buckets: [...durationBucketsSeconds],
    });
    this.retries = counter(registry, {
      name: 'tickpool_task_scheduler_run_retries_total',
      help: 'Attempts retried after a retryable failure.',
    });
    this.errors = counter(registry, {
      name: 'tickpool_task_scheduler_errors_total',
      help: 'Errors from the desired state, the executor or the log writer, by operation.',
      labelNames: ['operation'],
    });
  }

  runEnded(status: FinalRunStatus, durationMs: number | undefined): void {
    this.runsComplete.inc({ status });
    if (durationMs !== undefined) this.runDuration.observe({ status }, Math.max(0, durationMs) / 1000);
  }
}
