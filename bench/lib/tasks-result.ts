/** One row of the tasks benchmarks (`tasks.bench.ts` and `schedule-lag.bench.ts` both report them). */
export interface TasksBenchResult {
  /** Stable id for floors and JSON consumers (`tasks.tick-vs-scan` is the one the CI floor reads). */
  readonly id: string;
  readonly name: string;
  readonly opsPerSec?: number;
  readonly ratio?: number;
  readonly baseline?: string;
  readonly p50Us?: number;
  readonly p99Us?: number;
  /** Heap bytes per idle claimed task (the claim benchmark), or per retained run (the run-log benchmark). */
  readonly bytesPerTask?: number;
  readonly notes?: string;
}
