import type { BenchResult } from './types.js';

/** Prints results as a table: ratio first, then absolute figures. */
export function printTable(title: string, results: readonly BenchResult[]): void {
  const rows = results.map((r) => ({
    benchmark: r.name,
    ratio: r.ratio === undefined ? '' : `${r.ratio.toFixed(2)}× ${r.baseline ?? ''}`.trim(),
    'ops/s': r.opsPerSec === undefined ? '' : Math.round(r.opsPerSec).toLocaleString('en-US'),
    'baseline ops/s': r.baselineOpsPerSec === undefined ? '' : Math.round(r.baselineOpsPerSec).toLocaleString('en-US'),
    'p50 µs': r.p50Us ?? '',
    'p99 µs': r.p99Us ?? '',
    'p999 µs': r.p999Us ?? '',
    'baseline p50/p99 µs': r.baselineP50Us === undefined ? '' : `${r.baselineP50Us} / ${r.baselineP99Us ?? ''}`,
    notes: r.notes ?? '',
  }));
  console.log(`\n## ${title}`);
  console.table(rows);
}
