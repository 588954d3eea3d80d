/**
 * The final report: one plain object (printed as JSON with `--headless`, for tests and scripts) and its text form.
 */
import type { RecordableHistogram } from 'node:perf_hooks';
import type { BrokerStats } from '../../src/broker/index.js';
import type { CapacityAudit } from './cluster-state.js';
import type { SecondSummary } from './tasks/downsample.js';
import type { FitCheckStats } from './evaluate-plan.js';
import type { PlanCounts } from './run-stats.js';

export interface LatencySummary {
  readonly count: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export interface Report {
  readonly config: {
    readonly threads: number;
    readonly workers: number;
    readonly durationS: number;
    readonly rate: number;
    readonly nodes: number;
    readonly jobs: number;
    readonly seed: number;
    readonly maxPlanAttempts: number;
    readonly backoff: { readonly baselineMs: number; readonly limitMs: number };
  };
  /** Wall time from the first enqueue until the engine had stopped, s. */
  readonly elapsedS: number;
  readonly evaluations: {
    readonly enqueued: number;
    readonly acked: number;
    /** Moved to the broker's `_failed` queue (they are still in the broker, counted in `inBroker.failed`). */
    readonly failed: number;
    readonly failedBy: Readonly<Record<string, number>>;
    /** Superseded by a newer evaluation of the same job and drained from the broker. */
    readonly superseded: number;
    readonly nacks: number;
    readonly nackTimeouts: number;
    /** Where the rest were when the engine had stopped. */
    readonly inBroker: {
      readonly ready: number;
      readonly pending: number;
      readonly unacked: number;
      readonly waiting: number;
      readonly cancelable: number;
      readonly failed: number;
    };
    /** enqueued − acked − superseded − everything in the broker: must be 0. */
    readonly lost: number;
    /** Evaluations acked per second of elapsed time. */
    readonly perSecond: number;
  };
  readonly placements: {
    /** Allocation records written (placements and in-place replacements). */
    readonly allocsWritten: number;
    /** Allocation records deleted (a job scaled down). */
    readonly allocsStopped: number;
    /** Placements that found no node with room, counted per scheduler run. */
    readonly noRoom: number;
  };
  readonly plans: PlanCounts & { readonly fitCheck: FitCheckStats };
  readonly latencyMs: {
    readonly dispatch: LatencySummary;
    readonly dispatchByType: Readonly<Record<string, LatencySummary>>;
    readonly endToEnd: LatencySummary;
  };
  readonly threads: {
    readonly count: number;
    /** Scheduler time / (threads × elapsed), measured by the schedulers themselves. */
    readonly schedulerUtilization: number;
    /** `engine.utilization()`: the busy time threads publish, over elapsed time × threads. */
    readonly engineUtilization: number;
  };
  readonly capacity: CapacityAudit;
  /** The demo's periodic tasks (cron-tasks.ts). */
  readonly tasks: {
    /** A run that starts more than this after its due time is late, ms. */
    readonly lateThresholdMs: number;
    readonly runsStarted: number;
    readonly onTime: number;
    readonly late: number;
    /** Due → start of first attempts. */
    readonly scheduleDelayMs: LatencySummary;
    readonly attempts: number;
    readonly retries: number;
    readonly finished: { readonly success: number; readonly failed: number; readonly canceled: number };
    /** Final failures by task and message. */
    readonly failures: Readonly<Record<string, number>>;
    /** The latest second the downsample task reduced. */
    readonly lastSummary: SecondSummary | null;
    readonly gc: { readonly runs: number; readonly finishedFound: number; readonly collected: number; readonly rejectedWrites: number };
  };
}

export function summarize(histogram: RecordableHistogram): LatencySummary {
  const ms = (ns: number): number => Math.round(ns / 1e3) / 1e3;
  if (histogram.count === 0) return { count: 0, p50: 0, p99: 0, max: 0 };
  return { count: histogram.count, p50: ms(histogram.percentile(50)), p99: ms(histogram.percentile(99)), max: ms(histogram.max) };
}

export function brokerRemainder(stats: BrokerStats): Report['evaluations']['inBroker'] {
  return {
    ready: stats.totalReady,
    pending: stats.totalPending,
    unacked: stats.totalUnacked,
    waiting: stats.totalWaiting,
    cancelable: stats.totalCancelable,
    failed: stats.totalFailed,
  };
}

const int = (n: number): string => Math.round(n).toLocaleString('en-US');
const pct = (x: number): string => `${(100 * x).toFixed(0)}%`;
const ms = (x: number): string => (x < 1 ? `${x.toFixed(2)} ms` : x < 10 ? `${x.toFixed(1)} ms` : `${x.toFixed(0)} ms`);

export function formatReport(r: Report): string {
  const e = r.evaluations;
  const b = e.inBroker;
  const inBroker = b.ready + b.pending + b.unacked + b.waiting + b.cancelable + b.failed;
  const p = r.plans;
  const rw = p.rejectedWrites;
  const failedBy = Object.entries(e.failedBy)
    .map(([code, n]) => `${int(n)} ${code}`)
    .join(', ');
  const c = r.capacity;
  const lines = [
    '',
    `tickpool cluster demo: ${r.elapsedS.toFixed(1)} s, ${r.config.threads} threads, ${int(r.config.workers)} workers, ` +
      `${int(r.config.nodes)} nodes, ${int(r.config.jobs)} jobs, ${int(r.config.rate)} evaluations/s offered`,
    '',
    `  Evaluations  ${int(e.acked)} acked (${e.perSecond.toFixed(0)}/s), ${int(e.failed)} failed${failedBy === '' ? '' : ` (${failedBy})`}, ` +
      `${int(e.superseded)} superseded, ${int(inBroker - b.failed)} left in the broker, ${int(e.lost)} lost (of ${int(e.enqueued)} enqueued)`,
    `               ${int(e.nacks)} nacks (${int(e.nackTimeouts)} by timeout)`,
    `  Dispatch     enqueue -> scheduler entry  p50 ${ms(r.latencyMs.dispatch.p50)}  p99 ${ms(r.latencyMs.dispatch.p99)}  max ${ms(r.latencyMs.dispatch.max)}`,
    ...Object.entries(r.latencyMs.dispatchByType).map(
      ([type, l]) => `               ${`${type} only`.padEnd(28)}p50 ${ms(l.p50)}  p99 ${ms(l.p99)}  max ${ms(l.max)}`,
    ),
    `               enqueue -> ack              p50 ${ms(r.latencyMs.endToEnd.p50)}  p99 ${ms(r.latencyMs.endToEnd.p99)}  max ${ms(r.latencyMs.endToEnd.max)}`,
    `  Placements   ${int(r.placements.allocsWritten)} allocations written, ${int(r.placements.allocsStopped)} stopped, ` +
      `${int(r.placements.noRoom)} found no node with room`,
    `  Plans        ${int(p.submitted)} plan attempts, ${int(p.refreshes)} refreshed after a partial rejection`,
    `               rejected writes: ${int(rw['conflict'] ?? 0)} version conflicts, ${int(rw['evaluate'] ?? 0)} by the fit check, ` +
      `${int(rw['all_at_once'] ?? 0)} with their all-at-once plan`,
    `  Threads      ${r.threads.count} threads, schedulers busy ${pct(r.threads.schedulerUtilization)} of thread time ` +
      `(engine.utilization(): ${r.threads.engineUtilization.toFixed(2)})`,
    `  Capacity     ${int(c.nodes)} nodes, ${int(c.allocs)} allocations, ${c.overcommitted} overcommitted, ${c.mismatched} with wrong accounting; ` +
      `CPU ${c.cpuUsedPct.toFixed(0)}% and memory ${c.memoryUsedPct.toFixed(0)}% allocated`,
    ...taskLines(r.tasks),
    '',
  ];
  return lines.join('\n');
}

function taskLines(t: Report['tasks']): string[] {
  const d = t.scheduleDelayMs;
  const lines = [
    `  Tasks        ${int(t.runsStarted)} runs started: ${int(t.onTime)} on time, ${int(t.late)} late (over ${t.lateThresholdMs} ms after due); ` +
      `due -> start p50 ${ms(d.p50)}  p99 ${ms(d.p99)}  max ${ms(d.max)}`,
    `               ${int(t.finished.success)} succeeded, ${int(t.finished.failed)} failed, ${int(t.finished.canceled)} canceled at stop; ` +
      `${int(t.attempts)} attempts, ${int(t.retries)} retried`,
  ];
  for (const [what, n] of Object.entries(t.failures)) lines.push(`               failed ${int(n)}x: ${what}`);
  const s = t.lastSummary;
  if (s !== null) {
    lines.push(
      `               downsample: last second mean CPU ${(100 * s.meanCpu).toFixed(0)}%, memory ${(100 * s.meanMemory).toFixed(0)}%, ` +
        `${int(s.hotNodes)} nodes over 90% (p95), hottest node-${String(s.hottest.index + 1).padStart(4, '0')} at ${(100 * s.hottest.p95Cpu).toFixed(0)}%`,
    );
  }
  lines.push(
    `               gc: ${int(t.gc.runs)} runs found ${int(t.gc.finishedFound)} finished allocations, collected ${int(t.gc.collected)} ` +
      `(${int(t.gc.rejectedWrites)} writes rejected, retried by the next run)`,
  );
  return lines;
}

/** The live line: what has happened so far. */
export function formatProgress(fields: {
  readonly elapsedS: number;
  readonly durationS: number;
  readonly done: number;
  readonly placements: number;
  readonly refreshes: number;
  readonly conflicts: number;
  readonly backlog: number;
  readonly runsOnTime: number;
  readonly runsStarted: number;
}): string {
  const f = fields;
  const rate = f.elapsedS > 0 ? f.done / f.elapsedS : 0;
  return (
    `[${f.elapsedS.toFixed(1).padStart(5)}/${Number.isFinite(f.durationS) ? f.durationS : "∞"}s] evaluations ${int(f.done)} (${int(rate)}/s)` +
    ` | placements ${int(f.placements)} | conflicts ${int(f.conflicts)}, refreshes ${int(f.refreshes)} | backlog ${int(f.backlog)}` +
    ` | runs on time ${int(f.runsOnTime)}/${int(f.runsStarted)}`
  );
}
