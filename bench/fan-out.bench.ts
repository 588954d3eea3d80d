/**
 * Fan-out: what the main thread pays per evaluation as threads, writes and job length grow. Main is one thread: its
 * CPU time per evaluation caps the engine at `1 / cost` evaluations per second however many cores there are, so it
 * must stay a small constant. For each job cost (0, 0.2 and 1 ms of CPU), thread count (1, 2, 4, 8, 16) and number
 * of ~100-byte writes per plan (0, 10, 100), one drain of `engine.run()` calls, all in flight at once, reports main's
 * CPU time per evaluation (read from `/proc/self/task/<pid>/schedstat`, see lib/thread-cpu.ts) and evaluations/s;
 * raw `piscina.run()` of the same CPU work on the same thread count beside it (no writes: Piscina has no state).
 * On a machine with fewer cores than threads the threads oversubscribe them; main's CPU per evaluation is still
 * its own cost.
 *
 *   node --expose-gc dist/bench/fan-out.bench.js [--quick] [--costs 0,0.2] [--threads 2,16] [--writes 0,10] [--json]
 */
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { createEngine } from '../src/engine/engine.js';
import { withPiscina } from './lib/piscina-pool.js';
import { mainThreadCpuNs } from './lib/thread-cpu.js';
import type { BenchResult } from './lib/types.js';

export const FAN_OUT_COSTS_MS: readonly number[] = [0, 0.2, 1];
export const FAN_OUT_THREADS: readonly number[] = [1, 2, 4, 8, 16];
export const FAN_OUT_WRITES: readonly number[] = [0, 10, 100];

export interface FanOutPoint {
  readonly costMs: number;
  readonly threads: number;
  readonly writes: number;
  readonly evaluations: number;
  /** Main thread CPU per evaluation, µs. */
  readonly mainUsPerEval: number;
  readonly evalsPerSec: number;
  /** Raw Piscina on the same threads and CPU work (no writes): main CPU per task, µs, and tasks/s. */
  readonly piscinaMainUsPerTask: number | undefined;
  readonly piscinaPerSec: number | undefined;
}

export interface FanOutOptions {
  readonly quick?: boolean;
  readonly costs?: readonly number[];
  readonly threads?: readonly number[];
  readonly writes?: readonly number[];
}

/** How many evaluations a drain runs: about a second of work on two cores, bounded both ways. */
function drainSize(costMs: number, threads: number, writes: number, quick: boolean): number {
  const cores = Math.min(threads, 2);
  const byCpu = costMs > 0 ? Math.round((1000 * cores) / costMs) : 40_000;
  const byWrites = writes >= 100 ? 4_000 : writes >= 10 ? 20_000 : 40_000;
  const n = Math.max(1_000, Math.min(byCpu, byWrites));
  return quick ? Math.max(500, Math.round(n / 4)) : n;
}

function cpuNs(): number {
  const ns = mainThreadCpuNs();
  if (ns === undefined) throw new Error('The fan-out bench reads the main thread\'s CPU time from /proc/self/task/<pid>/schedstat (Linux)');
  return ns;
}

async function engineDrain(costMs: number, threads: number, writes: number, n: number): Promise<{ mainUs: number; perSec: number }> {
  const engine = createEngine({
    threads,
    schedulers: { fan: new URL('./fixtures/fan-out-scheduler.js', import.meta.url) },
    tables: ['fan'],
    logger: pino({ level: 'silent' }),
  });
  await engine.start();
  try {
    const payload = { ms: costMs, writes };
    // Warm-up: the JIT on both sides, the cost model, the pool's buffers.
    await Promise.all(Array.from({ length: Math.min(2_000, n) }, (_, i) => engine.run({ jobId: `w${i}`, type: 'fan', payload })));
    (globalThis as { gc?: () => void }).gc?.();
    const cpu0 = cpuNs();
    const t0 = performance.now();
    await Promise.all(Array.from({ length: n }, (_, i) => engine.run({ jobId: `j${i}`, type: 'fan', payload })));
    const wallMs = performance.now() - t0;
    const cpu1 = cpuNs();
    return { mainUs: (cpu1 - cpu0) / 1000 / n, perSec: Math.round((n * 1000) / wallMs) };
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
}

async function piscinaDrain(costMs: number, threads: number, n: number): Promise<{ mainUs: number; perSec: number }> {
  return withPiscina(new URL('./fixtures/piscina-cost.js', import.meta.url), threads, async (pool) => {
    const task = { ms: costMs };
    await Promise.all(Array.from({ length: Math.min(2_000, n) }, () => pool.run(task)));
    (globalThis as { gc?: () => void }).gc?.();
    const cpu0 = cpuNs();
    const t0 = performance.now();
    await Promise.all(Array.from({ length: n }, () => pool.run(task)));
    const wallMs = performance.now() - t0;
    const cpu1 = cpuNs();
    return { mainUs: (cpu1 - cpu0) / 1000 / n, perSec: Math.round((n * 1000) / wallMs) };
  });
}

export async function runFanOut(options: FanOutOptions = {}, onPoint?: (point: FanOutPoint) => void): Promise<FanOutPoint[]> {
  const quick = options.quick === true;
  const points: FanOutPoint[] = [];
  for (const costMs of options.costs ?? FAN_OUT_COSTS_MS) {
    for (const threads of options.threads ?? FAN_OUT_THREADS) {
      const writesList = options.writes ?? FAN_OUT_WRITES;
      // Piscina once per cost and thread count: it has no writes.
      const piscina = await piscinaDrain(costMs, threads, drainSize(costMs, threads, 0, quick));
      for (const writes of writesList) {
        const n = drainSize(costMs, threads, writes, quick);
        const engine = await engineDrain(costMs, threads, writes, n);
        const point: FanOutPoint = {
          costMs,
          threads,
          writes,
          evaluations: n,
          mainUsPerEval: round(engine.mainUs),
          evalsPerSec: engine.perSec,
          piscinaMainUsPerTask: round(piscina.mainUs),
          piscinaPerSec: piscina.perSec,
        };
        points.push(point);
        onPoint?.(point);
      }
    }
  }
  return points;
}

const round = (x: number): number => Math.round(x * 100) / 100;

/** The bench's figures as results: one per point, the ratio being evaluations/s against raw Piscina's tasks/s. */
export function fanOutResults(points: readonly FanOutPoint[]): BenchResult[] {
  return points.map((p) => ({
    scope: 'engine',
    id: `engine.fan-out.cost-${p.costMs}.threads-${p.threads}.writes-${p.writes}`,
    name: `fan-out: ${p.costMs} ms jobs, ${p.threads} threads, ${p.writes} writes a plan: main CPU per evaluation`,
    ...(p.piscinaPerSec !== undefined && p.writes === 0 ? { ratio: round(p.evalsPerSec / p.piscinaPerSec), baseline: 'raw piscina.run(), same threads and CPU work' } : {}),
    opsPerSec: p.evalsPerSec,
    ...(p.piscinaPerSec !== undefined ? { baselineOpsPerSec: p.piscinaPerSec } : {}),
    mainUsPerEval: p.mainUsPerEval,
    piscinaMainUsPerTask: p.piscinaMainUsPerTask,
    threads: p.threads,
    notes: `${p.evaluations.toLocaleString('en-US')} evaluations; main ${p.mainUsPerEval} µs each (Piscina ${p.piscinaMainUsPerTask} µs a task)`,
  }));
}

/**
 * How flat main's cost stays as threads grow: for each job cost and write count measured at both 2 and 16 threads,
 * main's CPU per evaluation at 2 threads over that at 16 (1.0 is flat; 0.67 is 16 threads costing 1.5× as much).
 */
export function fanOutFlatness(points: readonly FanOutPoint[]): BenchResult[] {
  const results: BenchResult[] = [];
  for (const at2 of points.filter((p) => p.threads === 2)) {
    const at16 = points.find((p) => p.threads === 16 && p.costMs === at2.costMs && p.writes === at2.writes);
    if (at16 === undefined || at16.mainUsPerEval <= 0) continue;
    results.push({
      scope: 'engine',
      id: `engine.fan-out.flatness.cost-${at2.costMs}.writes-${at2.writes}`,
      name: `fan-out flatness: ${at2.costMs} ms jobs, ${at2.writes} writes a plan: main CPU per evaluation at 2 threads ÷ at 16`,
      ratio: round(at2.mainUsPerEval / at16.mainUsPerEval),
      baseline: 'main CPU per evaluation at 16 threads, same run',
      threads: 16,
      notes: `main ${at2.mainUsPerEval} µs at 2 threads, ${at16.mainUsPerEval} µs at 16`,
    });
  }
  return results;
}

function listArg(name: string): number[] | undefined {
  const at = process.argv.indexOf(name);
  if (at < 0) return undefined;
  return process.argv[at + 1]!.split(',').map(Number);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const costs = listArg('--costs');
  const threads = listArg('--threads');
  const writes = listArg('--writes');
  const json = process.argv.includes('--json');
  if (!json) console.log('cost ms  threads  writes  evals    main µs/eval  evals/s   piscina µs/task  piscina/s  ratio');
  const points = await runFanOut(
    { quick: process.argv.includes('--quick'), ...(costs ? { costs } : {}), ...(threads ? { threads } : {}), ...(writes ? { writes } : {}) },
    (p) => {
      if (json) return;
      const ratio = p.piscinaPerSec !== undefined && p.writes === 0 ? (p.evalsPerSec / p.piscinaPerSec).toFixed(2) : '—';
      console.log(
        [p.costMs, p.threads, p.writes, p.evaluations, p.mainUsPerEval, p.evalsPerSec, p.piscinaMainUsPerTask, p.piscinaPerSec, ratio]
          .map((v, i) => String(v).padEnd([9, 9, 8, 9, 14, 10, 17, 11, 6][i]!))
          .join(''),
      );
    },
  );
  if (json) console.log(JSON.stringify(points, null, 2));
}
