/**
 * Command line of the benchmark suite (`bench/run.ts`). Pure: parsing never touches the machine, so a test can
 * check it without running a benchmark.
 *
 *   npm run bench [-- --scope broker|engine|tasks[,…]] [--json FILE] [--report DIR] [--profile full|ci]
 *                    [--threads N] [--sweep-threads 1,2,4] [--no-sweeps] [--check] [--quick]
 */

export const SCOPES = ['broker', 'engine', 'tasks'] as const;
export type Scope = (typeof SCOPES)[number];

export const PROFILES = ['full', 'ci'] as const;
export type Profile = (typeof PROFILES)[number];

export interface RunOptions {
  /** Parts of the suite to run (all three by default). */
  readonly scopes: readonly Scope[];
  readonly profile: Profile;
  /** Short runs (implied by the ci profile). */
  readonly quick: boolean;
  /** Pool threads of every engine figure and its baseline. */
  readonly threads: number;
  /** Thread counts of the thread-count sweep. */
  readonly sweepThreads: readonly number[];
  /** Run the thread-count and backoff sweeps (default: on in the full profile, off in ci). */
  readonly sweeps: boolean;
  /** Exit non-zero when a ratio falls below its floor (default: on in the ci profile). */
  readonly check: boolean;
  readonly json: string | undefined;
  readonly report: string | undefined;
  readonly help: boolean;
}

export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export const USAGE = `Usage: node --expose-gc dist/bench/run.js [options]   (npm run bench -- [options])

  --scope broker|engine|tasks   run one part (repeat or comma-separate for several; default: all)
  --profile full|ci             ci: short runs, floors enforced (exit 1 naming the benchmark), no sweeps
  --json FILE                   write machine-readable results (figures, ratios, floors, machine, options)
  --report DIR                  write DIR/index.html: latency histograms and the two sweeps as SVG charts
  --threads N                   pool threads of every engine figure and its baseline (default: available cores)
  --sweep-threads LIST          thread counts of the thread sweep, e.g. 1,2,4 (default: 1..2×cores, at most 8 points)
  --sweeps / --no-sweeps        run the thread-count and backoff sweeps (default: on, off with --profile ci)
  --check                       enforce the floors in the full profile too
  --quick                       short runs without the ci profile's floors
  --help                        this text`;

/** Default sweep: every count from 1 to twice the cores (oversubscription shows where the curve bends), ≤ 8 points. */
export function defaultSweepThreads(cores: number): number[] {
  const top = Math.max(2, 2 * cores);
  if (top <= 8) return Array.from({ length: top }, (_, i) => i + 1);
  const counts = new Set<number>([1]);
  for (let t = 2; t < top; t *= 2) counts.add(t);
  counts.add(cores);
  counts.add(top);
  return [...counts].sort((a, b) => a - b);
}

function positiveInteger(flag: string, raw: string | undefined): number {
  if (raw === undefined || !/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 512) {
    throw new UsageError(`${flag} expects an integer from 1 to 512, received ${JSON.stringify(raw ?? null)}`);
  }
  return Number(raw);
}

/** Parses `argv` (without node and the script). `cores` is the machine's parallelism (defaults depend on it). */
export function parseArgs(argv: readonly string[], cores: number): RunOptions {
  const scopes: Scope[] = [];
  let profile: Profile = 'full';
  let quick = false;
  let threads: number | undefined;
  let sweepThreads: number[] | undefined;
  let sweeps: boolean | undefined;
  let check = false;
  let json: string | undefined;
  let report: string | undefined;
  let help = false;

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = arg.indexOf('=');
    const flag = arg.startsWith('--') && eq > 0 ? arg.slice(0, eq) : arg;
    const inline = arg.startsWith('--') && eq > 0 ? arg.slice(eq + 1) : undefined;
    const value = (): string => {
      if (inline !== undefined) return inline;
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) throw new UsageError(`${flag} expects a value`);
      i++;
      return next;
    };
    switch (flag) {
      case '--scope':
        for (const part of value().split(',')) {
          const scope = part.trim();
          if (!(SCOPES as readonly string[]).includes(scope)) {
            throw new UsageError(`--scope expects one of ${SCOPES.join(', ')}, received ${JSON.stringify(scope)}`);
          }
          if (!scopes.includes(scope as Scope)) scopes.push(scope as Scope);
        }
        break;
      case '--profile': {
        const p = value();
        if (!(PROFILES as readonly string[]).includes(p)) throw new UsageError(`--profile expects one of ${PROFILES.join(', ')}, received ${JSON.stringify(p)}`);
        profile = p as Profile;
        break;
      }
      case '--json':
        json = value();
        break;
      case '--report':
        report = value();
        break;
      case '--threads':
        threads = positiveInteger('--threads', value());
        break;
      case '--sweep-threads': {
        const raw = value();
        const list = raw.split(',').map((s) => positiveInteger('--sweep-threads', s.trim()));
        sweepThreads = [...new Set(list)].sort((a, b) => a - b);
        break;
      }
      case '--sweeps':
        sweeps = true;
        break;
      case '--no-sweeps':
        sweeps = false;
        break;
      case '--check':
        check = true;
        break;
      case '--quick':
        quick = true;
        break;
      case '--help':
      case '-h':
        help = true;
        break;
      default:
        throw new UsageError(`unknown argument ${JSON.stringify(arg)}`);
    }
  }

  const ci = profile === 'ci';
  return {
    scopes: scopes.length === 0 ? [...SCOPES] : scopes,
    profile,
    quick: quick || ci,
    threads: threads ?? Math.max(1, cores),
    sweepThreads: sweepThreads ?? defaultSweepThreads(Math.max(1, cores)),
    sweeps: sweeps ?? !ci,
    check: check || ci,
    json,
    report,
    help,
  };
}
