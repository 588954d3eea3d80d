/**
 * Command-line flags of the demo (node:util parseArgs). `parseCli` throws a `UsageError` with a message that says
 * which flag is wrong and what it expects; `main.ts` prints it with the usage and exits with code 2.
 */
import { parseArgs } from 'node:util';
import { backoffDefaults } from '../../src/backoff.js';
import { defaultThreads, engineDefaults } from '../../src/engine/options.js';

export interface CliOptions {
  readonly threads: number;
  readonly workers: number;
  readonly durationS: number;
  readonly backoffBaselineMs: number;
  readonly backoffLimitMs: number;
  readonly nodes: number;
  readonly jobs: number;
  readonly rate: number;
  readonly seed: number;
  readonly logLevel: string;
  readonly metricsPort: number | undefined;
  readonly headless: boolean;
  readonly help: boolean;
  /** Run on PostgreSQL (this connection string), with `processes` engine processes sharing one schema. */
  readonly postgres: string | undefined;
  readonly processes: number;
  /** Serve the dashboard on 127.0.0.1 (`--dashboard`), on this port (0: any free one). */
  readonly dashboardPort: number | undefined;
}

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

export const defaults = Object.freeze({
  durationS: 20,
  nodes: 1000,
  jobs: 2000,
  rate: 1000,
  seed: 1,
  logLevel: 'info',
  /**
   * Scheduling workers per thread. The engine's default (128 per thread) suits short evaluations; these run for a
   * fraction of a millisecond to milliseconds and their plans compete for the same nodes, so a few per thread
   * keep the threads busy without every plan racing every other one.
   */
  workersPerThread: 8,
});

export const usage = `Usage: npm start -- [flags]   (or: node dist/examples/cluster/main.js [flags])

A Nomad-style cluster scheduler on tickpool: job registrations become evaluations, bin-packing schedulers score
every node on the pool threads, and the plan applier commits placements that still fit.

Flags:
  --threads N            pool threads (default: ${defaultThreads()}, this machine's parallelism; 1 per process with --postgres)
  --workers N            scheduling workers, evaluations in flight (default: threads x ${defaults.workersPerThread};
                         the engine's own default is threads x ${engineDefaults.workersPerThread})
  --duration S           seconds of load before the report (default: ${defaults.durationS}); 0 runs until Ctrl-C
  --dashboard            serve the live dashboard on 127.0.0.1 and print its URL (see --dashboard-port)
  --dashboard-port N     the dashboard's port (default: any free one); implies --dashboard
  --rate N               evaluations enqueued per second (default: ${defaults.rate})
  --nodes N              simulated nodes (default: ${defaults.nodes})
  --jobs N               distinct jobs; registrations cycle through them (default: ${defaults.jobs})
  --backoff-baseline MS  worker backoff after the first error (default: ${backoffDefaults.baselineMs})
  --backoff-limit MS     worker backoff cap (default: ${backoffDefaults.limitMs})
  --seed N               seed of the simulated cluster and load (default: ${defaults.seed})
  --log-level LEVEL      ${LOG_LEVELS.join(', ')} (default: ${defaults.logLevel})
  --metrics-port PORT    serve Prometheus metrics on http://127.0.0.1:PORT/metrics during the run (0: any free port)
  --headless             no live line; print the report as one JSON line on stdout
  --postgres URL         run on PostgreSQL: engine processes share one broker and one state store in a fresh schema
                         of this database (dropped at the end); the report shows each process and the total
  --processes N          engine processes with --postgres (default: 3)
  -h, --help             show this help
`;

function integer(flag: string, raw: string | undefined, min: number, max: number, fallback: number): number;
function integer(flag: string, raw: string | undefined, min: number, max: number, fallback: undefined): number | undefined;
function integer(flag: string, raw: string | undefined, min: number, max: number, fallback: number | undefined): number | undefined {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (raw.trim() === '' || !Number.isInteger(value) || value < min || value > max) {
    throw new UsageError(`--${flag} expects an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  }
  return value;
}

export function parseCli(argv: readonly string[]): CliOptions {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        threads: { type: 'string' },
        workers: { type: 'string' },
        duration: { type: 'string' },
        rate: { type: 'string' },
        nodes: { type: 'string' },
        jobs: { type: 'string' },
        'backoff-baseline': { type: 'string' },
        'backoff-limit': { type: 'string' },
        seed: { type: 'string' },
        'log-level': { type: 'string' },
        'metrics-port': { type: 'string' },
        headless: { type: 'boolean' },
        postgres: { type: 'string' },
        processes: { type: 'string' },
        dashboard: { type: 'boolean' },
        'dashboard-port': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const str = (key: string): string | undefined => values[key] as string | undefined;

  const durationRaw = str('duration');
  // 0: until Ctrl-C (Infinity).
  const durationS = durationRaw === undefined ? defaults.durationS : Number(durationRaw) === 0 && durationRaw.trim() !== '' ? Number.POSITIVE_INFINITY : Number(durationRaw);
  if (durationRaw !== undefined && (durationRaw.trim() === '' || Number.isNaN(durationS) || durationS <= 0 || (Number.isFinite(durationS) && durationS > 86_400))) {
    throw new UsageError(`--duration expects a number of seconds > 0 and <= 86400, or 0 to run until Ctrl-C, got ${JSON.stringify(durationRaw)}`);
  }
  const dashboardPortRaw = str('dashboard-port');
  const dashboardPort = values['dashboard'] === true || dashboardPortRaw !== undefined ? integer('dashboard-port', dashboardPortRaw, 0, 65_535, 0) : undefined;
  const logLevel = str('log-level') ?? defaults.logLevel;
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new UsageError(`--log-level expects one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(logLevel)}`);
  }
  const backoffBaselineMs = integer('backoff-baseline', str('backoff-baseline'), 0, 3_600_000, backoffDefaults.baselineMs);
  const backoffLimitMs = integer('backoff-limit', str('backoff-limit'), 0, 3_600_000, backoffDefaults.limitMs);
  if (backoffLimitMs < backoffBaselineMs) {
    throw new UsageError(`--backoff-limit expects a value >= --backoff-baseline (${backoffBaselineMs}), got ${backoffLimitMs}`);
  }
  const postgres = str('postgres');
  if (postgres !== undefined && !/^postgres(ql)?:\/\//.test(postgres)) {
    throw new UsageError(`--postgres expects a connection string like postgres://user:pass@host:5432/db, got ${JSON.stringify(postgres)}`);
  }
  if (postgres === undefined && str('processes') !== undefined) throw new UsageError('--processes needs --postgres (in memory there is one process)');
  const threads = integer('threads', str('threads'), 1, 512, postgres === undefined ? defaultThreads() : 1);
  return {
    threads,
    workers: integer('workers', str('workers'), 1, 100_000, threads * defaults.workersPerThread),
    durationS,
    backoffBaselineMs,
    backoffLimitMs,
    nodes: integer('nodes', str('nodes'), 1, 100_000, defaults.nodes),
    jobs: integer('jobs', str('jobs'), 1, 1_000_000, defaults.jobs),
    rate: integer('rate', str('rate'), 1, 1_000_000, defaults.rate),
    seed: integer('seed', str('seed'), 0, 2 ** 31 - 1, defaults.seed),
    logLevel,
    metricsPort: integer('metrics-port', str('metrics-port'), 0, 65_535, undefined),
    headless: values['headless'] === true,
    help: values['help'] === true,
    postgres,
    processes: integer('processes', str('processes'), 1, 64, 3),
    dashboardPort,
  };
}
