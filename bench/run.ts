/**
 * The benchmark suite: runs the broker, engine and tasks benchmarks (and the two sweeps) in one process, prints one
 * table per benchmark, then every ratio and every floor it checked.
 *
 *   npm run bench                                   everything, full length
 *   npm run bench -- --scope engine                 one part (broker | engine | tasks)
 *   npm run bench -- --json bench.json --report out  machine-readable results; an HTML page with the charts
 *   npm run bench:ci                                the short CI profile: exits 1 naming each benchmark below its floor
 *
 * Every engine figure is measured next to its baseline in the same run with the same thread count (`--threads`,
 * default the machine's parallelism). See `node dist/bench/run.js --help`.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, totalmem } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { runBrokerBench } from './broker.bench.js';
import { COLD_WARMUP_SAMPLES, compareCancelLatency, compareIdleLatency, compareRunThroughput, compareThroughput, pinnedIdleLatency } from './engine.bench.js';
import { compareCost, compareFairness, SWEEP_COSTS_MS } from './cpu-load.bench.js';
import { compareLoadCurves, type LoadCurve } from './load-curve.bench.js';
import { runDashboardBench } from './dashboard.bench.js';
import { fanOutFlatness, fanOutResults, runFanOut, type FanOutPoint } from './fan-out.bench.js';
import { bestOf, checkFloors, describeFailures, formatValue, type FloorCheck } from './floors.js';
import { parseArgs, USAGE, UsageError, type RunOptions, type Scope } from './lib/cli.js';
import { fromBroker, fromSchedule, fromState, fromTasks } from './lib/normalise.js';
import { distributionOf, type LatencyChart } from './lib/quantiles.js';
import { printTable } from './lib/table.js';
import type { BenchResult } from './lib/types.js';
import type { MachineInfo, RatioLine, SuiteReport } from './report/model.js';
import { writeReport } from './report/index.js';
import { runScheduleBench } from './schedule.bench.js';
import { runStateBench } from './state.bench.js';
import { runIdleAfterDrainBench, runMemoryBench } from './memory.bench.js';
import { runTasksBench } from './tasks.bench.js';
import { runWakeBench } from './wake.bench.js';
import { runIdleSplitBench } from './idle-split.bench.js';
import { backoffSweep, taskRetrySweep, threadSweep, type BackoffSweepPoint, type TaskRetrySweepPoint, type ThreadSweepPoint } from './sweeps.js';

interface UnitOutput {
  readonly results: readonly BenchResult[];
  readonly latency?: readonly LatencyChart[];
  readonly threadSweep?: readonly ThreadSweepPoint[];
  readonly backoffSweep?: readonly BackoffSweepPoint[];
  readonly taskRetrySweep?: readonly TaskRetrySweepPoint[];
  readonly loadCurves?: readonly LoadCurve[];
  readonly fanOut?: readonly FanOutPoint[];
}

interface Unit {
  readonly id: string;
  readonly scope: Scope;
  readonly title: string;
  /** False: left out of the ci profile (no floor reads it, and it is too long to run on every push). */
  readonly inCi?: boolean;
  run(): Promise<UnitOutput>;
  print?(output: UnitOutput): void;
}

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** An idle-latency unit: the engine against Piscina's one-way time, one dispatch at a time (optionally after a pause). */
function idleLatencyUnit(u: {
  readonly id: string;
  readonly title: string;
  readonly chartId: string;
  readonly chartTitle: string;
  readonly threads: number;
  readonly samples: number;
  readonly pauseMs?: number;
  /** Dispatches before each round measures (the suite's default: a warm pool). */
  readonly warmup?: number;
  readonly inCi?: boolean;
}): Unit {
  return {
    id: u.id,
    scope: 'engine',
    title: u.title,
    inCi: u.inCi ?? true,
    async run() {
      const { result, engine, raw } = await compareIdleLatency(u.threads, u.samples, {
        pauseMs: u.pauseMs ?? 0,
        ...(u.warmup === undefined ? {} : { warmup: u.warmup }),
      });
      return {
        results: [result],
        latency: [
          {
            id: u.chartId,
            title: u.chartTitle,
            threads: u.threads,
            series: [distributionOf('engine', engine), distributionOf('raw Piscina: run() → task entry', raw)],
          },
        ],
      };
    },
  };
}

function units(o: RunOptions): Unit[] {
  const quick = o.quick;
  const threads = o.threads;
  const list: Unit[] = [];

  list.push({
    id: 'broker',
    scope: 'broker',
    title: 'broker: enqueue → dequeue → ack cycles (one core)',
    run: async () => ({ results: fromBroker(await runBrokerBench({ quick })) }),
  });

  list.push({
    id: 'engine.throughput',
    scope: 'engine',
    title: `engine throughput (${plural(threads, 'thread')})`,
    async run() {
      return { results: [await compareThroughput(threads, quick ? 30_000 : 200_000)] };
    },
  });

  list.push({
    id: 'engine.run-throughput',
    scope: 'engine',
    title: `engine.run() answers in flight (${plural(threads, 'thread')})`,
    // No floor reads it yet.
    inCi: false,
    async run() {
      return { results: [await compareRunThroughput(threads, quick ? 30_000 : 100_000)] };
    },
  });

  list.push(
    idleLatencyUnit({
      id: 'engine.latency',
      title: `engine idle dispatch latency (${plural(threads, 'thread')})`,
      chartId: 'engine-idle-latency',
      chartTitle: 'Idle dispatch latency: enqueue → scheduler entry',
      threads,
      samples: quick ? 300 : 2000,
    }),
  );

  list.push(
    idleLatencyUnit({
      id: 'engine.latency-cold',
      title: `engine idle dispatch latency of a fresh pool, its first dispatches (${plural(threads, 'thread')})`,
      chartId: 'engine-idle-latency-cold',
      chartTitle: `Idle dispatch latency, the first dispatches after ${COLD_WARMUP_SAMPLES} on a new pool: enqueue → scheduler entry`,
      threads,
      samples: quick ? 300 : 2000,
      warmup: COLD_WARMUP_SAMPLES,
      // What a fresh process pays before the JIT has its path; no floor reads it.
      inCi: false,
    }),
  );

  list.push(
    idleLatencyUnit({
      id: 'engine.latency-after-idle',
      title: `engine dispatch latency after 1 ms idle (${plural(threads, 'thread')})`,
      chartId: 'engine-latency-after-idle',
      chartTitle: 'Dispatch latency after 1 ms idle: enqueue → scheduler entry',
      threads,
      samples: quick ? 200 : 600,
      pauseMs: 1,
      // Each sample waits a millisecond first: ~2 s, and no floor reads it.
      inCi: false,
    }),
  );

  list.push({
    id: 'engine.cancel',
    scope: 'engine',
    title: `engine cancel latency (${plural(threads, 'thread')})`,
    async run() {
      const { result, engine, raw } = await compareCancelLatency(threads, quick ? 30 : 100);
      return {
        results: [result],
        latency: [
          {
            id: 'engine-cancel-latency',
            title: 'Cancel latency of a CPU-bound run',
            threads,
            series: [distributionOf('engine: cancel() → scheduler sees it', engine), distributionOf('raw Piscina: abort() → run() rejects', raw)],
          },
        ],
      };
    },
  });

  list.push({
    id: 'engine.cost-sweep',
    scope: 'engine',
    title: `job-cost sweep: no-op, 0.1, 1 and 10 ms of CPU per job, against Piscina and the cores' limit (${plural(threads, 'thread')})`,
    async run() {
      const results: BenchResult[] = [];
      for (const cost of SWEEP_COSTS_MS) results.push(await compareCost(threads, cost, { quick }));
      return { results };
    },
  });

  list.push({
    id: 'engine.fairness',
    scope: 'engine',
    title: `mixed-load fairness: short jobs' latency beside 1% of 100 ms jobs, at 60% and 90% load (${plural(threads, 'thread')})`,
    async run() {
      const results: BenchResult[] = [];
      const latency: LatencyChart[] = [];
      for (const load of [0.6, 0.9]) {
        const { result, engine, raw } = await compareFairness(threads, load, quick ? 1500 : 4000);
        results.push(result);
        latency.push({
          id: `engine-fairness-${Math.round(load * 100)}`,
          title: `Short jobs' enqueue → done beside long ones, ${Math.round(load * 100)}% load`,
          threads,
          series: [distributionOf('engine', engine), distributionOf('raw Piscina', raw)],
        });
      }
      return { results, latency };
    },
  });

  list.push({
    id: 'engine.load-curve',
    scope: 'engine',
    title: `dispatch latency against offered load, open loop, engine and Piscina (${plural(threads, 'thread')})`,
    // Seconds per rate and side, up to past saturation: the full suite's, not CI's.
    inCi: false,
    async run() {
      const { curves, results } = await compareLoadCurves(threads, { quick });
      return { results, loadCurves: curves };
    },
  });

  list.push({
    id: 'engine.fan-out',
    scope: 'engine',
    title: quick || o.profile === 'ci'
      ? 'fan-out: main-thread CPU per evaluation, 0.2 ms jobs with 10 writes a plan, at 2 and 16 threads'
      : 'fan-out: main-thread CPU per evaluation against threads (1–16), writes a plan (0, 10, 100) and job cost (0, 0.2, 1 ms)',
    async run() {
      // CI reads one figure (main's CPU at 16 threads against 2, with writes): the two drains it needs.
      const ci = quick || o.profile === 'ci';
      const points = await runFanOut(ci ? { quick: true, costs: [0.2], threads: [2, 16], writes: [10] } : { quick }, (p) =>
        console.log(`  ${p.costMs} ms, ${plural(p.threads, 'thread')}, ${p.writes} writes: main ${p.mainUsPerEval} µs/evaluation, ${p.evalsPerSec.toLocaleString('en-US')}/s (Piscina ${p.piscinaMainUsPerTask} µs, ${p.piscinaPerSec?.toLocaleString('en-US')}/s)`),
      );
      return { fanOut: points, results: [...fanOutResults(points), ...fanOutFlatness(points)] };
    },
  });

  list.push({
    id: 'engine.dashboard',
    scope: 'engine',
    title: 'dashboard: no-op throughput with a page polling against none looking; data endpoints with many evaluations queued',
    // A minute of drains and a million queued evaluations; no floor reads it.
    inCi: false,
    async run() {
      const r = await runDashboardBench(quick ? { rounds: 2, queued: 200_000, drain: 100_000 } : {});
      const results: BenchResult[] = [
        {
          scope: 'engine',
          id: 'engine.dashboard-throughput',
          name: 'no-op throughput with the dashboard open and polling, against none looking (median of alternating rounds)',
          ratio: r.throughputRatio,
          baseline: 'the same engine with no page polling',
          notes: `rounds ${r.throughputRatios.map((x) => x.toFixed(3)).join(', ')}; goal >= 0.95`,
        },
        ...Object.entries(r.endpoints).map(([name, t]) => ({
          scope: 'engine' as const,
          id: `engine.dashboard-endpoint.${name.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}`,
          name: `dashboard ${name}, ${r.queued.toLocaleString('en-US')} evaluations queued (p50 ${t.p50Ms.toFixed(2)} ms, max ${t.maxMs.toFixed(2)} ms; goal < 50 ms)`,
          p50Us: t.p50Ms * 1000,
          notes: `max ${t.maxMs.toFixed(2)} ms`,
        })),
      ];
      for (const x of results) console.log(`  ${x.name}${x.ratio === undefined ? '' : `: ${x.ratio.toFixed(3)}×`}`);
      return { results };
    },
  });

  list.push({
    id: 'engine.latency-pinned',
    scope: 'engine',
    title: 'engine idle dispatch latency pinned to one CPU (taskset -c 0)',
    // A child process of alternating rounds; diagnostic, no floor reads it.
    inCi: false,
    async run() {
      const result = pinnedIdleLatency(quick ? 300 : 1000);
      return { results: result === undefined ? [] : [result] };
    },
  });

  list.push({
    id: 'engine.wake',
    scope: 'engine',
    title: 'waking an idle thread, by mechanism: the floor under the idle-latency figures',
    // Diagnostic, ~10 s of one-at-a-time messages, and no floor reads it.
    inCi: false,
    run: async () => ({ results: await runWakeBench(quick ? 600 : 2000) }),
  });

  list.push({
    id: 'engine.idle-split',
    scope: 'engine',
    title: 'idle dispatch split at the wake: engine, the pool alone, the pool with main busy after the wake, Piscina',
    // Diagnostic (where the idle latency goes), a few seconds, and no floor reads it.
    inCi: false,
    run: async () => ({ results: await runIdleSplitBench(quick ? { rounds: 4, samples: 150 } : {}) }),
  });

  list.push({
    id: 'engine.state',
    scope: 'engine',
    title: 'state store: hash trie vs copy-on-write Map, store, applier, replica',
    // ~50 s even with --quick on 2 cores (copy-on-write clones of a 100k-record Map), and no floor reads it.
    inCi: false,
    run: async () => ({ results: fromState(await runStateBench({ quick })) }),
  });

  list.push({
    id: 'engine.memory',
    scope: 'engine',
    title: 'memory: main-thread heap after GC at 100k and at 1M no-op evaluations',
    // Seconds to minutes of steady load; the growth goal (< 10%) is checked by the bench itself.
    inCi: false,
    run: async () => ({ results: await runMemoryBench({ quick }) }),
  });

  list.push({
    id: 'engine.memory-idle',
    scope: 'engine',
    title: 'memory: an idle engine after a drain of one-evaluation jobs, against before them',
    // A few seconds; the bound (≤ 1.1×) is checked by the bench itself.
    inCi: false,
    run: async () => ({ results: [await runIdleAfterDrainBench(quick ? 20_000 : 100_000)] }),
  });

  list.push({
    id: 'tasks',
    scope: 'tasks',
    title: 'tasks: claims, tick vs scan, schedule lag',
    run: async () => ({ results: fromTasks(await runTasksBench({ quick })) }),
  });

  list.push({
    id: 'tasks.schedule',
    scope: 'tasks',
    title: 'schedules: next() against raw cron-parser',
    run: async () => ({ results: fromSchedule(await runScheduleBench({ quick })) }),
  });

  if (o.sweeps) {
    list.push({
      id: 'engine.thread-sweep',
      scope: 'engine',
      title: `thread-count sweep (${o.sweepThreads.join(', ')})`,
      async run() {
        const points = await threadSweep(o.sweepThreads, {
          quick,
          onPoint: (p) => console.log(`  ${plural(p.threads, 'thread')}: engine ${Math.round(p.engineOpsPerSec).toLocaleString('en-US')}/s = ${p.throughputRatio}× raw Piscina; loaded p50 ${p.loaded.engine.p50Us} µs (Piscina ${p.loaded.piscina.p50Us} µs)`),
        });
        return {
          threadSweep: points,
          results: points.map((p) => ({
            scope: 'engine',
            id: `engine.thread-sweep.${p.threads}`,
            name: `thread sweep, ${plural(p.threads, 'thread')}: throughput; loaded latency at ${p.loaded.rate.toLocaleString('en-US')}/s`,
            ratio: p.throughputRatio,
            baseline: 'raw piscina.run() throughput',
            opsPerSec: p.engineOpsPerSec,
            baselineOpsPerSec: p.piscinaOpsPerSec,
            p50Us: p.loaded.engine.p50Us,
            p99Us: p.loaded.engine.p99Us,
            p999Us: p.loaded.engine.p999Us,
            baselineP50Us: p.loaded.piscina.p50Us,
            baselineP99Us: p.loaded.piscina.p99Us,
            threads: p.threads,
            unit: 'evaluations/s',
            notes: `idle p50 ${p.idle.engine.p50Us} µs vs Piscina ${p.idle.piscina.p50Us} µs`,
          })),
        };
      },
      print(output) {
        console.table(
          (output.threadSweep ?? []).map((p) => ({
            threads: p.threads,
            'engine/piscina': `${p.throughputRatio.toFixed(2)}×`,
            'engine ops/s': Math.round(p.engineOpsPerSec).toLocaleString('en-US'),
            'piscina ops/s': Math.round(p.piscinaOpsPerSec).toLocaleString('en-US'),
            'idle p50 µs (piscina)': `${p.idle.engine.p50Us} (${p.idle.piscina.p50Us})`,
            [`loaded p50/p99 µs @${p.loaded.rate}/s`]: `${p.loaded.engine.p50Us} / ${p.loaded.engine.p99Us}`,
            'piscina loaded p50/p99 µs': `${p.loaded.piscina.p50Us} / ${p.loaded.piscina.p99Us}`,
          })),
        );
      },
    });
    list.push({
      id: 'engine.backoff-sweep',
      scope: 'engine',
      title: 'backoff sweep: broker nack delays under a failure-injecting scheduler',
      async run() {
        const points = await backoffSweep({ quick, threads });
        return {
          backoffSweep: points,
          results: points.map((p) => ({
            scope: 'engine',
            id: `engine.backoff-sweep.${p.config.initialNackDelayMs}-${p.config.subsequentNackDelayMs}${p.config.control === true ? '-control' : ''}`,
            name: `backoff sweep, nack delays ${p.config.label} ms`,
            threads,
            deliveriesPerSuccess: p.deliveriesPerSuccess,
            failedDeliveriesPerSec: p.failedDeliveriesPerSec,
            timeToSuccessMeanMs: p.timeToSuccess.meanMs,
            timeToSuccessP99Ms: p.timeToSuccess.p99Ms,
            overshootP50Ms: p.overshoot.p50Ms,
            notes: `${p.deliveriesPerSuccess} deliveries/success; time-to-success mean ${p.timeToSuccess.meanMs} ms, p99 ${p.timeToSuccess.p99Ms} ms; overshoot p50 ${p.overshoot.p50Ms} ms (outage ${p.outageMs} ms, ${p.evaluations} evaluations)`,
          })),
        };
      },
      print(output) {
        console.table(
          (output.backoffSweep ?? []).map((p) => ({
            'initial/step ms': p.config.label,
            'deliveries/success': p.deliveriesPerSuccess,
            'failed deliveries/s': p.failedDeliveriesPerSec,
            'time-to-success mean/p99 ms': `${p.timeToSuccess.meanMs} / ${p.timeToSuccess.p99Ms}`,
            'overshoot p50/p99 ms': `${p.overshoot.p50Ms} / ${p.overshoot.p99Ms}`,
            succeeded: `${p.succeeded}/${p.evaluations}`,
          })),
        );
      },
    });
    list.push({
      id: 'tasks.retry-sweep',
      scope: 'tasks',
      title: 'backoff sweep: task retries (engine backoff baselineMs/limitMs) under a failure-injecting handler',
      async run() {
        const points = await taskRetrySweep({ quick, threads });
        return {
          taskRetrySweep: points,
          results: points.map((p) => ({
            scope: 'tasks',
            id: `tasks.retry-sweep.${p.config.baselineMs}-${p.config.limitMs}`,
            name: `task-retry sweep, backoff ${p.config.label} ms`,
            threads,
            attemptsPerSuccess: p.attemptsPerSuccess,
            failedAttemptsPerSec: p.failedAttemptsPerSec,
            timeToSuccessMeanMs: p.timeToSuccess.meanMs,
            timeToSuccessP99Ms: p.timeToSuccess.p99Ms,
            overshootP50Ms: p.overshoot.p50Ms,
            notes: `${p.attemptsPerSuccess} attempts/success; time-to-success mean ${p.timeToSuccess.meanMs} ms, p99 ${p.timeToSuccess.p99Ms} ms; overshoot p50 ${p.overshoot.p50Ms} ms (outage ${p.outageMs} ms, ${p.runs} runs)`,
          })),
        };
      },
      print(output) {
        console.table(
          (output.taskRetrySweep ?? []).map((p) => ({
            'baseline/limit ms': p.config.label,
            'attempts/success': p.attemptsPerSuccess,
            'failed attempts/s': p.failedAttemptsPerSec,
            'time-to-success mean/p99 ms': `${p.timeToSuccess.meanMs} / ${p.timeToSuccess.p99Ms}`,
            'overshoot p50/p99 ms': `${p.overshoot.p50Ms} / ${p.overshoot.p99Ms}`,
            succeeded: `${p.succeeded}/${p.runs}`,
          })),
        );
      },
    });
  }
  return list.filter((u) => o.scopes.includes(u.scope));
}

/** Units the profile leaves out, for the record. */
function leftOut(o: RunOptions, all: readonly Unit[]): Unit[] {
  return o.profile === 'ci' ? all.filter((u) => u.inCi === false) : [];
}

function machine(): MachineInfo {
  let commit: string | undefined;
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dirname(fileURLToPath(import.meta.url)), stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
  } catch {
    commit = undefined;
  }
  return {
    node: process.version,
    v8: process.versions.v8,
    platform: process.platform,
    arch: process.arch,
    cpus: availableParallelism(),
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    totalMemoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    ...(commit === undefined || commit === '' ? {} : { commit }),
  };
}

function ratioLines(results: readonly BenchResult[]): RatioLine[] {
  return results
    .filter((r) => typeof r.ratio === 'number' && Number.isFinite(r.ratio))
    .map((r) => ({ id: r.id, scope: r.scope, name: r.name, ratio: r.ratio!, baseline: r.baseline, threads: r.threads }));
}

function printFloors(checks: readonly FloorCheck[], enforced: boolean): void {
  console.log(`\n## Floors${enforced ? '' : ' (informational: --check or --profile ci enforces them)'}`);
  if (checks.length === 0) {
    console.log('(no floor applies to the scopes that ran)');
    return;
  }
  console.table(
    checks.map((c) => ({
      '': c.pass ? 'pass' : 'FAIL',
      benchmark: c.benchmark,
      figure: c.value === undefined ? c.reason ?? '—' : formatValue(c.value, c.unit),
      floor: `≥ ${formatValue(c.min, c.unit)}`,
      goal: c.goal,
      runs: c.attempts,
    })),
  );
}

export async function main(argv: readonly string[]): Promise<number> {
  let options: RunOptions;
  try {
    options = parseArgs(argv, availableParallelism());
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`${error.message}\n\n${USAGE}`);
      return 2;
    }
    throw error;
  }
  if (options.help) {
    console.log(USAGE);
    return 0;
  }
  const started = performance.now();
  const info = machine();
  console.log(
    `tickpool benchmarks · profile ${options.profile}${options.quick ? ' (quick)' : ''} · scopes ${options.scopes.join(', ')} · ${plural(options.threads, 'pool thread')} · Node ${info.node} · ${plural(info.cpus, 'CPU')} (${info.cpuModel})`,
  );

  const all = units(options);
  const selected = all.filter((u) => !leftOut(options, all).includes(u));
  let results: BenchResult[] = [];
  const unitOf = new Map<string, Unit>();
  const runsOf = new Map<string, number>();
  const latency: LatencyChart[] = [];
  const sweepThreads: ThreadSweepPoint[] = [];
  const sweepBackoff: BackoffSweepPoint[] = [];
  const sweepTaskRetry: TaskRetrySweepPoint[] = [];
  const loadCurves: LoadCurve[] = [];
  const fanOut: FanOutPoint[] = [];
  const skipped: Array<{ benchmark: string; reason: string }> = [];
  const errors: Array<{ benchmark: string; error: string }> = [];
  const durationsMs: Record<string, number> = {};
  for (const unit of leftOut(options, all)) skipped.push({ benchmark: unit.id, reason: `not part of the ${options.profile} profile` });

  for (const unit of selected) {
    console.log(`\n# ${unit.title}`);
    gc();
    const t0 = performance.now();
    let output: UnitOutput;
    try {
      output = await unit.run();
    } catch (error) {
      const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
      console.error(`ERROR in ${unit.id}: ${message}`);
      errors.push({ benchmark: unit.id, error: error instanceof Error ? error.message : String(error) });
      continue;
    } finally {
      durationsMs[unit.id] = Math.round(performance.now() - t0);
    }
    for (const r of output.results) {
      unitOf.set(r.id ?? r.name, unit);
      runsOf.set(r.id ?? r.name, 1);
    }
    results.push(...output.results);
    latency.push(...(output.latency ?? []));
    sweepThreads.push(...(output.threadSweep ?? []));
    sweepBackoff.push(...(output.backoffSweep ?? []));
    sweepTaskRetry.push(...(output.taskRetrySweep ?? []));
    loadCurves.push(...(output.loadCurves ?? []));
    fanOut.push(...(output.fanOut ?? []));
    if (unit.print !== undefined) unit.print(output);
    else printTable(unit.title, output.results);
    console.log(`(${(durationsMs[unit.id]! / 1000).toFixed(1)} s)`);
  }

  let checks = checkFloors(results, options.scopes, undefined, runsOf);
  if (options.check) {
    // Best of up to three short runs: a floor fails only when every run of its benchmark is below it.
    for (let attempt = 2; attempt <= 3; attempt++) {
      const rerun = new Set<Unit>();
      for (const c of checks) if (!c.pass && c.resultId !== undefined && unitOf.has(c.resultId)) rerun.add(unitOf.get(c.resultId)!);
      if (rerun.size === 0) break;
      for (const unit of rerun) {
        console.log(`\n# again (run ${attempt} of 3, a figure was below its floor): ${unit.title}`);
        gc();
        const t0 = performance.now();
        try {
          const output = await unit.run();
          results = bestOf(results, output.results);
          for (const r of output.results) runsOf.set(r.id ?? r.name, attempt);
          printTable(`${unit.title}, run ${attempt}`, output.results.filter((r) => checks.some((c) => c.resultId === r.id)));
        } catch (error) {
          console.error(`ERROR in ${unit.id} (run ${attempt}): ${error instanceof Error ? error.message : String(error)}`);
        } finally {
          durationsMs[`${unit.id}#${attempt}`] = Math.round(performance.now() - t0);
        }
      }
      checks = checkFloors(results, options.scopes, undefined, runsOf);
    }
  }

  const ratios = ratioLines(results);
  console.log('\n## Ratios (each against its baseline, same run, same thread count)');
  console.table(ratios.map((r) => ({ benchmark: r.name, ratio: `${r.ratio.toFixed(2)}×`, against: r.baseline ?? '', threads: r.threads ?? '' })));
  printFloors(checks, options.check);
  for (const s of skipped) console.warn(`SKIPPED ${s.benchmark}: ${s.reason}`);

  const floorsPassed = checks.every((c) => c.pass);
  const passed = floorsPassed && errors.length === 0;
  const { help: _help, ...recorded } = options;
  const report: SuiteReport = {
    suite: 'tickpool-bench',
    schema: 1,
    generatedAt: new Date().toISOString(),
    machine: info,
    options: recorded,
    ratios,
    floors: checks,
    passed,
    results,
    latency,
    sweeps: { threads: sweepThreads, backoff: sweepBackoff, taskRetry: sweepTaskRetry, loadCurves, fanOut },
    skipped,
    errors,
    durationsMs,
  };
  if (options.json !== undefined) {
    const file = resolve(options.json);
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
    console.log(`\nJSON: ${file}`);
  }
  if (options.report !== undefined) console.log(`Report: ${await writeReport(options.report, report)}`);

  const seconds = (performance.now() - started) / 1000;
  console.log(`\nSuite took ${seconds.toFixed(1)} s (${options.profile} profile).`);
  let code = 0;
  if (errors.length > 0) {
    for (const e of errors) console.error(`ERROR ${e.benchmark}: ${e.error}`);
    code = 1;
  }
  if (options.check && !floorsPassed) {
    for (const line of describeFailures(checks)) console.error(line);
    code = 1;
  } else if (options.check) {
    console.log(`All ${plural(checks.length, 'floor')} met.`);
  }
  return code;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exit(await main(process.argv.slice(2)));
}
