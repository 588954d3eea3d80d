/**
 * `npm start`: a Nomad-style cluster scheduler on tickpool. Flags are in cli.ts; this file only wires the parts:
 *
 *   load-generator ──► engine.state (jobs) + engine.enqueue(evaluation)
 *   engine workers ──► pool threads: schedulers/service.ts, schedulers/batch.ts (score every node) ──► plan
 *   plan applier   ──► version check + evaluate-plan.ts (fit check) ──► commit, or refresh and re-run
 *   engine.tasks   ──► tasks/downsample.ts (every 1 s, node metrics in shared memory), tasks/gc.ts (every 5 s)
 *   run-stats, cron-tasks, status line, metrics server ──► report.ts
 */
import { Registry } from 'prom-client';
import { createEngine } from '../../src/index.js';
import { parseCli, usage, UsageError, type CliOptions } from './cli.js';
import { auditCapacity, seedNodes, seededRandom } from './cluster-state.js';
import { CronTasks, Handlers } from './cron-tasks.js';
import { serveDashboard, type DashboardServer } from './dashboard-server.js';
import { createFitCheck } from './evaluate-plan.js';
import { LoadGenerator } from './load-generator.js';
import { createLogger } from './logger.js';
import { serveMetrics, type MetricsServer } from './metrics-server.js';
import { tables } from './model.js';
import { NodeMetricsStream } from './node-metrics.js';
import { Probe } from './probe.js';
import { brokerRemainder, formatProgress, formatReport, summarize, type Report } from './report.js';
import { RunStats } from './run-stats.js';
import { StatusLine } from './status-line.js';

const PROGRESS_MS = 250;
/** Without a terminal, a plain progress line every this many updates (5 s). */
const PLAIN_PROGRESS_EVERY = 20;
/** How long evaluations in hand may take to finish when the run ends. */
const STOP_GRACE_MS = 2_000;
/** A task run that starts more than this after its due time counts as late. */
const LATE_MS = 100;
/**
 * Scheduler runs per delivery while its plan keeps losing races (the engine's default is 5). A thousand evaluations a
 * second bin-packing onto the same fullest nodes is far more contention than a real cluster sees; Nomad would park
 * the rest of such a job in a blocked evaluation, this demo gives it a few more refreshes.
 */
const MAX_PLAN_ATTEMPTS = 10;

function parseOrExit(argv: readonly string[]): CliOptions {
  try {
    return parseCli(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    process.stderr.write(`error: ${error.message}\n\n${usage}`);
    process.exit(2);
  }
}

/** Resolves after `ms`, or at once on Ctrl-C (the run then ends early with its report). */
function runFor(ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      process.off('SIGINT', done);
      resolve();
    };
    // Infinite (`--duration 0`): until Ctrl-C.
    const timer = Number.isFinite(ms) ? setTimeout(done, ms) : undefined;
    process.once('SIGINT', done);
  });
}

async function main(): Promise<void> {
  const cli = parseOrExit(process.argv.slice(2));
  if (cli.help) {
    process.stdout.write(usage);
    return;
  }
  if (cli.postgres !== undefined) {
    // Loaded only for this mode: the in-memory demo never loads pg.
    const { runPostgresDemo } = await import('./postgres-demo.js');
    await runPostgresDemo(cli, cli.postgres);
    return;
  }
  const tty = process.stderr.isTTY === true;
  const line = new StatusLine(process.stderr, tty && !cli.headless);
  const logger = await createLogger(cli.logLevel, line, tty);
  const random = seededRandom(cli.seed);
  const fit = createFitCheck();
  const probe = new Probe();

  const engine = createEngine({
    threads: cli.threads,
    workers: cli.workers,
    schedulers: {
      service: new URL('./schedulers/service.js', import.meta.url),
      batch: new URL('./schedulers/batch.js', import.meta.url),
    },
    handlers: {
      [Handlers.DOWNSAMPLE]: new URL('./tasks/downsample.js', import.meta.url),
      [Handlers.GC]: new URL('./tasks/gc.js', import.meta.url),
    },
    tables,
    evaluatePlan: fit.evaluatePlan,
    maxPlanAttempts: MAX_PLAN_ATTEMPTS,
    backoff: { baselineMs: cli.backoffBaselineMs, limitMs: cli.backoffLimitMs },
    logger: logger.child({ component: 'tickpool' }),
    registry: new Registry(),
  });
  seedNodes(engine.state, cli.nodes, random);
  const stats = new RunStats(engine, probe);
  const cron = new CronTasks({ engine, stream: new NodeMetricsStream(cli.nodes, random), logger, lateMs: LATE_MS });
  await engine.start();

  let dashboard: DashboardServer | undefined;
  if (cli.dashboardPort !== undefined) {
    dashboard = await serveDashboard(engine, cli.dashboardPort);
    process.stderr.write(`dashboard: ${dashboard.url}\n`);
    logger.info({ url: dashboard.url }, 'serving the dashboard');
  }
  let metrics: MetricsServer | undefined;
  if (cli.metricsPort !== undefined) {
    metrics = await serveMetrics(engine.options.registry, cli.metricsPort);
    logger.info({ url: metrics.url }, 'serving Prometheus metrics');
  }
  logger.info(
    { threads: engine.options.threads.max, workers: engine.options.workers, nodes: cli.nodes, jobs: cli.jobs, rate: cli.rate, durationS: cli.durationS },
    'cluster demo started',
  );

  const load = new LoadGenerator({ engine, probe, rate: cli.rate, jobs: cli.jobs, random });
  const started = performance.now();
  load.start();
  cron.start();
  let refreshes = 0;
  let conflicts = 0;
  let ticks = 0;
  const progress = setInterval(() => {
    stats.reapSuperseded();
    ticks++;
    // On a terminal the line is redrawn in place; piped, a JSON log line every few seconds; headless, nothing.
    if (cli.headless) return;
    // The counters live in the Prometheus registry, read asynchronously: a line shows the latest reading.
    void stats.plans().then((p) => {
      refreshes = p.refreshes;
      conflicts = Object.values(p.rejectedWrites).reduce((s, n) => s + n, 0);
    });
    if (!line.live && ticks % PLAIN_PROGRESS_EVERY !== 0) return;
    const b = engine.broker.stats();
    const progress = {
      elapsedS: (performance.now() - started) / 1000,
      durationS: cli.durationS,
      done: stats.acked + stats.failed,
      placements: stats.placements,
      refreshes,
      conflicts,
      backlog: b.totalReady + b.totalPending + b.totalWaiting,
      runsOnTime: cron.onTime,
      runsStarted: cron.runsStarted,
    };
    // The live line is for a terminal. Redirected, stderr holds the JSON log lines only: progress is one of them.
    if (line.live) line.set(formatProgress(progress));
    else logger.info({ ...progress, elapsedS: Math.round(progress.elapsedS * 10) / 10 }, 'progress');
  }, PROGRESS_MS);

  await runFor(cli.durationS * 1000);
  load.stop();
  cron.stop();
  clearInterval(progress);
  line.end();
  logger.info({ enqueued: load.enqueued }, 'load stopped; stopping the engine');
  await engine.stop({ graceMs: STOP_GRACE_MS });
  const elapsedS = (performance.now() - started) / 1000;
  stats.reapSuperseded();
  await metrics?.close();
  await dashboard?.close();

  const brokerStats = engine.broker.stats();
  const inBroker = brokerRemainder(brokerStats);
  const held = inBroker.ready + inBroker.pending + inBroker.unacked + inBroker.waiting + inBroker.cancelable + inBroker.failed;
  const threads = engine.options.threads.max;
  const report: Report = {
    config: {
      threads,
      workers: engine.options.workers,
      durationS: cli.durationS,
      rate: cli.rate,
      nodes: cli.nodes,
      jobs: cli.jobs,
      seed: cli.seed,
      maxPlanAttempts: engine.options.maxPlanAttempts,
      backoff: { baselineMs: engine.options.backoff.baselineMs, limitMs: engine.options.backoff.limitMs },
    },
    elapsedS,
    evaluations: {
      enqueued: load.enqueued,
      acked: stats.acked,
      failed: stats.failed,
      failedBy: stats.failedBy,
      superseded: stats.superseded,
      nacks: stats.nacks,
      nackTimeouts: stats.nackTimeouts,
      inBroker,
      lost: load.enqueued - stats.acked - stats.superseded - held,
      perSecond: stats.acked / elapsedS,
    },
    placements: { allocsWritten: stats.placements, allocsStopped: stats.stops, noRoom: probe.unplaced() },
    plans: { ...(await stats.plans()), fitCheck: { ...fit.stats } },
    latencyMs: {
      dispatch: summarize(stats.dispatch),
      dispatchByType: Object.fromEntries([...stats.dispatchByType].sort().map(([type, h]) => [type, summarize(h)])),
      endToEnd: summarize(stats.endToEnd),
    },
    threads: {
      count: threads,
      schedulerUtilization: Number(probe.busyNs()) / 1e9 / (threads * elapsedS),
      engineUtilization: engine.utilization(),
    },
    capacity: auditCapacity(engine.state.snapshot()),
    tasks: {
      lateThresholdMs: LATE_MS,
      runsStarted: cron.runsStarted,
      onTime: cron.onTime,
      late: cron.late,
      scheduleDelayMs: summarize(cron.delay),
      attempts: cron.attempts,
      retries: cron.retries,
      finished: { ...cron.finished },
      failures: cron.failures,
      lastSummary: cron.lastSummary ?? null,
      gc: { ...cron.gc },
    },
  };
  if (cli.headless) process.stdout.write(`${JSON.stringify(report)}\n`);
  else process.stdout.write(formatReport(report));
}

main().catch((error: unknown) => {
  process.stderr.write(`cluster demo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
