/**
 * Engine benchmarks, each against its baseline measured in the same run with the same thread count:
 * 1. throughput: no-op evaluations through the whole engine (enqueue → scheduler on a thread → ack) vs raw
 *    `piscina.run()` of a no-op task;
 * 2. idle dispatch latency: enqueue → scheduler entry, one at a time, vs Piscina's one-way time (run → task entry);
 * 3. cancel latency of a CPU-bound run: `engine.cancel()` → the scheduler sees it, vs Piscina's abort → rejection;
 * 4. answers in flight: `engine.run()` calls all at once (`Promise.all`), each resolving its scheduler's value, vs
 *    `piscina.run()` calls all at once, each resolving its task's value.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createEngine, type Engine } from '../src/engine/engine.js';
import { Latency, nowUs, round } from './lib/latency.js';
import { withPiscina } from './lib/piscina-pool.js';
import { waitCell } from './lib/shared-cells.js';
import { printTable } from './lib/table.js';
import type { BenchResult } from './lib/types.js';

const fixture = (name: string): URL => new URL(`./fixtures/${name}.js`, import.meta.url);
/** Alternating rounds of the idle-latency comparison. */
const IDLE_ROUNDS = 10;
/**
 * Dispatches each idle-latency round runs before it measures, on each side. A fresh pool's path is cold: its threads
 * are new isolates, and until the JIT has optimized main's and the threads' code a dispatch runs interpreted. Measured
 * p50 by blocks of 250 dispatches after an engine's start, pinned to one CPU: 29.9, 23.1, 23.1, 19.4, 17.3, 17.7,
 * 14.8, 13.8 µs in a new process; 20.7 … 13.2 µs for a second engine in the same process (warm main, new threads).
 * The suite measures a service that has been running, so each round warms both sides the same way first; the
 * `cold` row keeps the first dispatches after a start in view.
 */
export const IDLE_WARMUP_SAMPLES = 2000;
/** The warm-up of the cold row: enough to load the modules and make the first run's allocations, not to optimize. */
export const COLD_WARMUP_SAMPLES = 50;

export interface EngineBenchOptions {
  readonly threads?: number;
  readonly quick?: boolean;
  readonly workers?: number;
}

async function newEngine(
  threads: number,
  options: { workers?: number | undefined; deliveryLimit?: number } = {},
): Promise<Engine> {
  const engine = createEngine({
    threads,
    ...(options.workers === undefined ? {} : { workers: options.workers }),
    schedulers: { noop: fixture('noop-scheduler'), stamp: fixture('stamp-scheduler'), spin: fixture('spin-scheduler'), value: fixture('value-scheduler') },
    broker: { deliveryLimit: options.deliveryLimit ?? 3, initialNackDelayMs: 3_600_000 },
    cancelGraceMs: 10_000,
  });
  await engine.start();
  return engine;
}

/** Resolves once `count` evaluations have been acked. */
export function whenAcked(engine: Engine, count: number): Promise<void> {
  let seen = 0;
  return new Promise((resolve) => {
    const off = engine.broker.events.on('broker:ack', () => {
      if (++seen === count) {
        off();
        resolve();
      }
    });
  });
}

/** Evaluations per second through the whole engine. */
export async function engineThroughput(threads: number, count: number, options: { workers?: number | undefined } = {}): Promise<{ opsPerSec: number }> {
  const engine = await newEngine(threads, options);
  try {
    // Warm-up: JIT, module loading on every thread.
    const warm = whenAcked(engine, 2000);
    for (let i = 0; i < 2000; i++) engine.enqueue({ id: `w${i}`, jobId: `w${i}`, type: 'noop', priority: 50 });
    await warm;
    const done = whenAcked(engine, count);
    const start = performance.now();
    for (let i = 0; i < count; i++) engine.enqueue({ id: `e${i}`, jobId: `j${i}`, type: 'noop', priority: 50 });
    await done;
    const seconds = (performance.now() - start) / 1000;
    return { opsPerSec: count / seconds };
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
}

/** Raw Piscina: tasks per second with everything submitted at once. */
export async function piscinaThroughput(threads: number, count: number): Promise<{ opsPerSec: number }> {
  return withPiscina(fixture('piscina-noop'), threads, async (pool) => {
    await Promise.all(Array.from({ length: 2000 }, () => pool.run(undefined)));
    const start = performance.now();
    const runs: Promise<unknown>[] = new Array(count);
    for (let i = 0; i < count; i++) runs[i] = pool.run(undefined);
    await Promise.all(runs);
    return { opsPerSec: count / ((performance.now() - start) / 1000) };
  });
}

/** `engine.run()` calls per second, `count` in flight at once, each resolving its scheduler's value. */
export async function engineRunThroughput(threads: number, count: number): Promise<{ opsPerSec: number }> {
  const engine = await newEngine(threads);
  try {
    const warm = await Promise.all(Array.from({ length: 2000 }, (_, i) => engine.run({ type: 'value', payload: i })));
    checkValues(warm.map((o) => o.value), 'engine warm-up');
    const runs = new Array<Promise<{ value: unknown }>>(count);
    const start = performance.now();
    for (let i = 0; i < count; i++) runs[i] = engine.run({ type: 'value', payload: i });
    const outcomes = await Promise.all(runs);
    const seconds = (performance.now() - start) / 1000;
    checkValues(outcomes.map((o) => o.value), 'engine.run()');
    return { opsPerSec: count / seconds };
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
}

/** `piscina.run()` calls per second, `count` in flight at once, each resolving its task's value. */
export async function piscinaRunThroughput(threads: number, count: number): Promise<{ opsPerSec: number }> {
  return withPiscina(fixture('piscina-echo'), threads, async (pool) => {
    checkValues(await Promise.all(Array.from({ length: 2000 }, (_, i) => pool.run(i))), 'piscina warm-up');
    const runs = new Array<Promise<unknown>>(count);
    const start = performance.now();
    for (let i = 0; i < count; i++) runs[i] = pool.run(i);
    const values = await Promise.all(runs);
    const seconds = (performance.now() - start) / 1000;
    checkValues(values, 'piscina.run()');
    return { opsPerSec: count / seconds };
  });
}

/** Each call resolved its own value: a figure for answers that went astray would be no figure. */
function checkValues(values: readonly unknown[], what: string): void {
  for (let i = 0; i < values.length; i++) {
    if (values[i] !== i) throw new Error(`${what}: call ${i} resolved ${String(values[i])}`);
  }
}

/** `engine.run()` vs `piscina.run()`, both with `count` calls in flight at once, same thread count, same run. */
export async function compareRunThroughput(threads: number, count: number): Promise<BenchResult> {
  const raw = await piscinaRunThroughput(threads, count);
  globalThis.gc?.();
  const engine = await engineRunThroughput(threads, count);
  return {
    scope: 'engine',
    id: 'engine.run-throughput',
    name: 'answers in flight: engine.run() resolving its scheduler’s value',
    ratio: round(engine.opsPerSec / raw.opsPerSec),
    baseline: 'raw piscina.run() resolving its task’s value',
    opsPerSec: round(engine.opsPerSec, 0),
    baselineOpsPerSec: round(raw.opsPerSec, 0),
    threads,
    unit: 'calls/s',
    notes: `${count.toLocaleString('en-US')} calls in flight at once (Promise.all) on each side, after 2,000 warm-up; goal ≥ 3×`,
  };
}

/**
 * Between samples: lets what the last sample set off finish (the worker going back to its dequeue, Piscina's
 * bookkeeping), so each sample starts from an idle engine or pool rather than racing the previous one's tail. With
 * `pauseMs`, the thread also sits idle that long first, as it would between sparse requests: caches go cold and an
 * idle CPU may sleep, which a back-to-back sample never sees.
 */
export function settled(pauseMs = 0): Promise<void> {
  return new Promise((resolve) => (pauseMs > 0 ? setTimeout(resolve, pauseMs) : setImmediate(resolve)));
}

/** enqueue → scheduler entry, one evaluation at a time (idle engine). */
export async function engineIdleLatency(threads: number, samples: number, pauseMs = 0, warmup = IDLE_WARMUP_SAMPLES): Promise<Latency> {
  return (await measureEngineIdle(threads, samples, pauseMs, warmup)).latency;
}

interface IdleMeasurement {
  readonly latency: Latency;
  /** CPU the whole process (main and pool threads) used over the measured samples, and their wall time. */
  readonly cpuUs: number;
  readonly wallMs: number;
}

async function measureEngineIdle(threads: number, samples: number, pauseMs: number, warmup: number): Promise<IdleMeasurement> {
  const engine = await newEngine(threads);
  const stamps = new Float64Array(new SharedArrayBuffer(8 * samples));
  const latency = new Latency();
  let cpu = process.cpuUsage();
  let wall = performance.now();
  try {
    for (let i = -warmup; i < samples; i++) {
      if (i === 0) {
        cpu = process.cpuUsage();
        wall = performance.now();
      }
      const index = Math.max(0, i);
      const done = whenAcked(engine, 1);
      const t0 = nowUs();
      engine.enqueue({ id: `l${i}`, jobId: `l${i}`, type: 'stamp', priority: 50, payload: { stamps, index } });
      await done;
      // The warm-up goes back to back: it is there for the JIT, which the pause does not change.
      await settled(i >= 0 ? pauseMs : 0);
      if (i >= 0) latency.recordUs(stamps[index]! - t0);
    }
    const used = process.cpuUsage(cpu);
    return { latency, cpuUs: used.user + used.system, wallMs: performance.now() - wall };
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
}

/** piscina.run() → task entry, one task at a time. */
export async function piscinaIdleLatency(threads: number, samples: number, pauseMs = 0, warmup = IDLE_WARMUP_SAMPLES): Promise<Latency> {
  const stamps = new Float64Array(new SharedArrayBuffer(8 * samples));
  const latency = new Latency();
  return withPiscina(fixture('piscina-noop'), threads, async (pool) => {
    for (let i = -warmup; i < samples; i++) {
      const index = Math.max(0, i);
      const t0 = nowUs();
      await pool.run({ stamps, index });
      await settled(i >= 0 ? pauseMs : 0);
      if (i >= 0) latency.recordUs(stamps[index]! - t0);
    }
    return latency;
  });
}

/** engine.cancel() → a CPU-bound scheduler sees it. */
export async function engineCancelLatency(threads: number, samples: number): Promise<Latency> {
  const engine = await newEngine(threads);
  const gate = new Int32Array(new SharedArrayBuffer(8));
  const stamps = new Float64Array(new SharedArrayBuffer(8 * samples));
  const latency = new Latency();
  try {
    for (let i = 0; i < samples; i++) {
      // Given up through its run()'s signal (the same cancel in shared memory as engine.cancel()), so that it is
      // removed once its thread lets go rather than redelivered, as a canceled delivery would be.
      const controller = new AbortController();
      const run = engine.run({ id: `c${i}`, jobId: `c${i}`, type: 'spin', priority: 50, payload: { gate, stamps, index: i } }, { signal: controller.signal }).catch(() => undefined);
      await waitCell(gate, 0, i + 1);
      const t0 = nowUs();
      controller.abort();
      await waitCell(gate, 1, i + 1);
      latency.recordUs(stamps[i]! - t0);
      await run;
    }
    return latency;
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
}

/** AbortController.abort() → piscina.run() rejects (the thread is terminated and replaced). */
export async function piscinaCancelLatency(threads: number, samples: number): Promise<Latency> {
  const latency = new Latency();
  return withPiscina(fixture('piscina-spin'), threads, async (pool) => {
    for (let i = 0; i < samples; i++) {
      const gate = new Int32Array(new SharedArrayBuffer(8));
      const controller = new AbortController();
      const run = pool.run({ gate }, { signal: controller.signal }).catch(() => undefined);
      await waitCell(gate, 0, 1);
      const t0 = nowUs();
      controller.abort();
      await run;
      latency.recordUs(nowUs() - t0);
    }
    return latency;
  });
}

/** Engine vs raw Piscina throughput, same thread count, same run. */
export async function compareThroughput(threads: number, count: number, options: { workers?: number | undefined } = {}): Promise<BenchResult> {
  const raw = await piscinaThroughput(threads, count);
  globalThis.gc?.();
  const engine = await engineThroughput(threads, count, options);
  return {
    scope: 'engine',
    id: 'engine.throughput',
    name: 'throughput: no-op evaluations (enqueue → scheduler → ack)',
    ratio: round(engine.opsPerSec / raw.opsPerSec),
    baseline: 'raw piscina.run()',
    opsPerSec: round(engine.opsPerSec, 0),
    baselineOpsPerSec: round(raw.opsPerSec, 0),
    threads,
    unit: 'evaluations/s',
    notes: `${count.toLocaleString('en-US')} submitted at once, after 2,000 warm-up`,
  };
}

export interface LatencyComparison {
  readonly result: BenchResult;
  readonly engine: Latency;
  readonly raw: Latency;
}

/**
 * Idle dispatch latency (enqueue → scheduler entry) vs Piscina's one-way time, same run. The machine's noise moves
 * a p50 by ±25% from one second to the next, so the two are measured in alternating rounds (each side first in
 * every other round); the ratio is the median of the rounds' ratios and the percentiles come from all samples.
 */
export async function compareIdleLatency(
  threads: number,
  samples: number,
  {
    rounds = IDLE_ROUNDS,
    pauseMs = 0,
    warmup = IDLE_WARMUP_SAMPLES,
  }: { readonly rounds?: number; readonly pauseMs?: number; readonly warmup?: number } = {},
): Promise<LatencyComparison> {
  const raw = new Latency();
  const engine = new Latency();
  const ratios: number[] = [];
  const perRound = Math.max(1, Math.ceil(samples / rounds));
  // CPU the whole process (main and pool threads) burns per second of wall time on the engine's side.
  let engineCpuUs = 0;
  let engineWallMs = 0;
  const measuredEngine = async (): Promise<Latency> => {
    const measured = await measureEngineIdle(threads, perRound, pauseMs, warmup);
    engineCpuUs += measured.cpuUs;
    engineWallMs += measured.wallMs;
    return measured.latency;
  };
  for (let round = 0; round < rounds; round++) {
    let r: Latency;
    let e: Latency;
    if (round % 2 === 0) {
      r = await piscinaIdleLatency(threads, perRound, pauseMs, warmup);
      globalThis.gc?.();
      e = await measuredEngine();
    } else {
      e = await measuredEngine();
      globalThis.gc?.();
      r = await piscinaIdleLatency(threads, perRound, pauseMs, warmup);
    }
    globalThis.gc?.();
    ratios.push(r.percentileUs(50) / e.percentileUs(50));
    raw.merge(r);
    engine.merge(e);
  }
  const pause = pauseMs > 0 ? `, each after ${pauseMs} ms idle` : '';
  const cpuPerSec = engineCpuUs / 1000 / engineWallMs;
  const notes = `${perRound * rounds} samples each, one at a time${pause}, in ${rounds} alternating rounds, each after ${warmup} dispatches on a new pool; ratio = median of the rounds' p50 ratios (${ratios.map((x) => round(x)).join(', ')}); the engine's process used ${round(cpuPerSec, 2)} CPU-s per s meanwhile`;
  // Fewer warm-up dispatches than the suite's own: the figure is a fresh pool's, and says so in its id and name.
  const cold = warmup < IDLE_WARMUP_SAMPLES ? '-cold' : '';
  const coldName = cold === '' ? '' : `, the first ${perRound} after ${warmup} on a new pool`;
  const what =
    pauseMs > 0
      ? {
          id: `engine.idle-latency-after-${pauseMs}ms${cold}`,
          name: `idle dispatch latency after ${pauseMs} ms idle${coldName} (enqueue → scheduler entry)`,
        }
      : { id: `engine.idle-latency${cold}`, name: `idle dispatch latency${coldName} (enqueue → scheduler entry)` };
  const comparison = latencyComparison({ ...what, baseline: 'piscina one-way p50 (>1 = engine faster)', notes }, threads, engine, raw, median(ratios));
  return { ...comparison, result: { ...comparison.result, engineCpuSecondsPerSecond: round(cpuPerSec, 3) } };
}

/** A latency comparison as the suite reports it: the engine's percentiles, the baseline's p50/p99, the ratio. */
function latencyComparison(
  what: { readonly id: string; readonly name: string; readonly baseline: string; readonly notes: string },
  threads: number,
  engine: Latency,
  raw: Latency,
  ratio: number,
): LatencyComparison {
  const r = raw.summary();
  const result: BenchResult = {
    scope: 'engine',
    ...what,
    ratio: round(ratio),
    ...engine.summary(),
    baselineP50Us: r.p50Us,
    baselineP99Us: r.p99Us,
    threads,
  };
  return { result, engine, raw };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Cancel latency of a CPU-bound run vs Piscina's abort, same run. */
export async function compareCancelLatency(threads: number, samples: number): Promise<LatencyComparison> {
  const raw = await piscinaCancelLatency(threads, samples);
  globalThis.gc?.();
  const engine = await engineCancelLatency(threads, samples);
  return latencyComparison(
    {
      id: 'engine.cancel-latency',
      name: 'cancel latency of a CPU-bound run',
      baseline: 'piscina abort p50 (>1 = engine faster)',
      notes: `${samples} samples: engine.run()'s signal aborted → the spinning scheduler sees its cancel, vs abort() → piscina.run() rejects`,
    },
    threads,
    engine,
    raw,
    raw.summary().p50Us / engine.summary().p50Us,
  );
}

export async function runEngineBench(options: EngineBenchOptions = {}): Promise<BenchResult[]> {
  const threads = options.threads ?? 2;
  const quick = options.quick === true;
  return [
    await compareThroughput(threads, quick ? 30_000 : 200_000, { workers: options.workers }),
    (await compareIdleLatency(threads, quick ? 300 : 2000)).result,
    (await compareCancelLatency(threads, quick ? 30 : 100)).result,
    await compareRunThroughput(threads, quick ? 30_000 : 100_000),
  ];
}

/**
 * The idle-latency comparison in a child process pinned to one CPU (`taskset -c 0`), so that main, the pool threads
 * and Piscina's threads all share one core: what a container limited to one CPU sees. Undefined where `taskset` is
 * not available.
 */
export function pinnedIdleLatency(samples: number): BenchResult | undefined {
  try {
    execFileSync('taskset', ['-c', '0', 'true'], { stdio: 'ignore' });
  } catch {
    return undefined;
  }
  const args = ['-c', '0', process.execPath, '--expose-gc', fileURLToPath(import.meta.url), '--idle-json', String(samples)];
  const out = execFileSync('taskset', args, { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  const result = JSON.parse(out.trim().split('\n').at(-1)!) as BenchResult;
  return { ...result, id: `${result.id ?? 'engine.idle-latency'}-pinned`, name: `${result.name}, pinned to one CPU (taskset -c 0)` };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href && process.argv[2] === '--idle-json') {
  const { result } = await compareIdleLatency(1, Number(process.argv[3] ?? 600));
  console.log(JSON.stringify(result));
} else if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const quick = process.argv.includes('--quick');
  const threadsArg = process.argv.indexOf('--threads');
  const threads = threadsArg > 0 ? Number(process.argv[threadsArg + 1]) : 2;
  // `--run-count N`: only the engine.run() comparison, with N calls on each side.
  const runCountArg = process.argv.indexOf('--run-count');
  if (runCountArg > 0) printTable(`engine.run() (threads=${threads})`, [await compareRunThroughput(threads, Number(process.argv[runCountArg + 1]))]);
  else printTable(`engine (threads=${threads})`, await runEngineBench({ quick, threads }));
}
