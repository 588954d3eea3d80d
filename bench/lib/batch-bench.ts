import { Bench } from 'tinybench';

/** A micro-benchmark whose measured function runs `calls` operations per invocation. */
export interface BatchScenario {
  readonly name: string;
  readonly notes: string;
  /** Operations per invocation of the function `setup()` returns. */
  readonly calls: number;
  setup(): () => unknown;
}

export interface BatchResult {
  readonly name: string;
  readonly opsPerSec: number;
  /** Per operation, from the invocation's percentiles divided by `calls`. */
  readonly p50Us: number;
  readonly p99Us: number;
  readonly notes: string;
}

/**
 * Runs each scenario with tinybench and reports per-operation figures. One helper for the state, schedule and
 * broker micro-benchmarks, so they measure the same way.
 */
export async function runBatchScenarios(
  scenarios: Iterable<BatchScenario>,
  settings: { readonly time: number; readonly warmupIterations: number; readonly iterations: number },
): Promise<BatchResult[]> {
  const results: BatchResult[] = [];
  for (const scenario of scenarios) {
    const batch = scenario.setup();
    const bench = new Bench({ ...settings, throws: true });
    bench.add(scenario.name, batch);
    await bench.run();
    const result = bench.tasks[0]!.result;
    if (result.state !== 'completed') throw new Error(`bench ${scenario.name} ended ${result.state}`);
    results.push({
      name: scenario.name,
      opsPerSec: Math.round((scenario.calls * 1000) / result.latency.mean),
      p50Us: Math.round(((result.latency.p50 * 1000) / scenario.calls) * 1000) / 1000,
      p99Us: Math.round(((result.latency.p99 * 1000) / scenario.calls) * 1000) / 1000,
      notes: scenario.notes,
    });
  }
  return results;
}
