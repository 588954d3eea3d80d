/** What one run of the suite produced: written by `--json`, drawn by `--report`. */
import type { FloorCheck } from '../floors.js';
import type { RunOptions } from '../lib/cli.js';
import type { LatencyChart } from '../lib/quantiles.js';
import type { BenchResult } from '../lib/types.js';
import type { FanOutPoint } from '../fan-out.bench.js';
import type { LoadCurve } from '../load-curve.bench.js';
import type { BackoffSweepPoint, TaskRetrySweepPoint, ThreadSweepPoint } from '../sweeps.js';

export interface MachineInfo {
  readonly node: string;
  readonly v8: string;
  readonly platform: string;
  readonly arch: string;
  /** `os.availableParallelism()` (what `nproc` says). */
  readonly cpus: number;
  readonly cpuModel: string;
  readonly totalMemoryGiB: number;
  readonly commit?: string;
}

export interface RatioLine {
  readonly id: string | undefined;
  readonly scope: BenchResult['scope'];
  readonly name: string;
  readonly ratio: number;
  readonly baseline: string | undefined;
  readonly threads: number | undefined;
}

export interface SuiteReport {
  readonly suite: 'tickpool-bench';
  readonly schema: 1;
  readonly generatedAt: string;
  readonly machine: MachineInfo;
  readonly options: Omit<RunOptions, 'help'>;
  /** Every ratio, first: engine figures against their baselines, measured in the same run. */
  readonly ratios: readonly RatioLine[];
  readonly floors: readonly FloorCheck[];
  readonly passed: boolean;
  readonly results: readonly BenchResult[];
  readonly latency: readonly LatencyChart[];
  readonly sweeps: {
    readonly threads: readonly ThreadSweepPoint[];
    /** Evaluation redelivery: the broker's nack delays. */
    readonly backoff: readonly BackoffSweepPoint[];
    /** Task retries: the engine's `backoff` (baselineMs/limitMs). */
    readonly taskRetry: readonly TaskRetrySweepPoint[];
    /** Dispatch latency against offered load (absent in reports written before it existed). */
    readonly loadCurves?: readonly LoadCurve[];
    /** Main-thread CPU per evaluation against threads, writes and job cost (absent in reports written before it). */
    readonly fanOut?: readonly FanOutPoint[];
  };
  /** Benchmarks that could not run, and why. */
  readonly skipped: ReadonlyArray<{ readonly benchmark: string; readonly reason: string }>;
  readonly errors: ReadonlyArray<{ readonly benchmark: string; readonly error: string }>;
  readonly durationsMs: Readonly<Record<string, number>>;
}
