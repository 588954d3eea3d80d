/** One figure of a benchmark. Ratios (against a baseline measured in the same run) come first in reports. */
export interface BenchResult {
  readonly scope: 'broker' | 'engine' | 'tasks' | 'schedule' | 'memory';
  /** Stable identifier (`scope.slug`) that floors and JSON consumers match on; names are for people. */
  readonly id?: string;
  readonly name: string;
  /** What was measured against what, when this is a ratio. */
  readonly ratio?: number;
  readonly baseline?: string;
  readonly opsPerSec?: number;
  readonly baselineOpsPerSec?: number;
  readonly p50Us?: number;
  readonly p99Us?: number;
  readonly p999Us?: number;
  readonly baselineP50Us?: number;
  readonly baselineP99Us?: number;
  readonly threads?: number;
  /** What `opsPerSec` counts, when not operations (e.g. `cycles/s`). */
  readonly unit?: string;
  readonly notes?: string;
  readonly [extra: string]: unknown;
}
