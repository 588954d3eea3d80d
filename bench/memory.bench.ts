/**
 * Memory under sustained load: 1,000,000 no-op evaluations through one engine (enqueue → scheduler on a pool
 * thread → ack), with the main thread's heap measured after a full GC at 100,000 and at 1,000,000 evaluations.
 * Whatever the engine keeps per evaluation after it is acked shows up as growth between the two; the goal is under
 * 10%. The first checkpoint comes after the warm-up (JIT, metric children, pool buffers), so it is the baseline.
 *
 * At each checkpoint the feed pauses until every evaluation enqueued so far is acked, so both readings are taken in
 * the same state: an idle engine with nothing in flight. The feed keeps `WINDOW` evaluations outstanding, so the
 * broker holds a bounded backlog while it runs (as a service that enqueues at the rate it is served would).
 *
 * Outcomes: `enqueue()` returns each evaluation's handle, and by default the feed drops it at once, as a service
 * that does not wait for outcomes does; anything the engine kept per outcome nobody waits on would show up as
 * growth. With `--awaited` the feed reads every handle's `done` and counts its resolutions instead (what
 * `engine.run()` does): an outcome that is awaited must not be retained after it resolved either.
 *
 *   node --expose-gc dist/bench/memory.bench.js [--quick] [--awaited] [--json]
 *   node --expose-gc dist/bench/memory.bench.js --idle [--json]
 *
 * `--idle`: the idle heap after 10,000, 100,000 and 300,000 one-evaluation jobs were enqueued at once and drained,
 * against the heap before them (`runIdleAfterDrainBench`; goal at most 1.1×). Exits with code 1 above it.
 *
 * `--quick`: 100,000 evaluations, checkpoints at 10,000 and 100,000. Exits with code 1 when the growth is 10% or
 * more.
 */
import { availableParallelism } from 'node:os';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { createEngine, type Engine } from '../src/engine/engine.js';
import type { BenchResult } from './lib/types.js';

/** Evaluations outstanding (enqueued, not yet acked) while the feed runs. */
const WINDOW = 4096;
/** The growth the issue allows between the two checkpoints. */
export const MAX_HEAP_GROWTH = 0.1;

export interface MemoryBenchOptions {
  readonly quick?: boolean;
  /** Pool threads (default: the machine's parallelism, at most 4). */
  readonly threads?: number;
  /** Await every evaluation's `done` (default: drop every handle). */
  readonly awaited?: boolean;
}

interface Reading {
  readonly evaluations: number;
  readonly heapUsed: number;
  readonly heapTotal: number;
  readonly external: number;
  readonly rss: number;
  readonly ms: number;
}

function collect(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('The memory bench needs a GC it can trigger: run node with --expose-gc');
  gc();
  gc();
}

/** Lets queued callbacks (promise jobs, immediates) run, so nothing half-finished is measured. */
async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/**
 * Feeds no-op evaluations until `target` have been acked (never more than `WINDOW` outstanding), counting acks by
 * the broker's event, or (`awaited`) by each handle's `done`.
 */
function feedUntil(engine: Engine, state: { enqueued: number; acked: number }, target: number, awaited: boolean): Promise<void> {
  return new Promise<void>((resolve) => {
    let off = (): void => undefined;
    const acked = (): void => {
      state.acked++;
      if (state.acked >= target) {
        off();
        resolve();
      } else if (state.enqueued - state.acked < WINDOW / 2) refill();
    };
    const refill = (): void => {
      const limit = Math.min(target, state.acked + WINDOW);
      while (state.enqueued < limit) {
        const i = state.enqueued++;
        const handle = engine.enqueue({ id: `e${i}`, jobId: `j${i}`, type: 'noop', priority: 50 });
        if (awaited) void handle.done.then(acked);
      }
    };
    if (!awaited) off = engine.broker.events.on('broker:ack', acked);
    refill();
  });
}

async function reading(evaluations: number, started: number): Promise<Reading> {
  await turns(10);
  collect();
  await turns(2);
  collect();
  const m = process.memoryUsage();
  return { evaluations, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, rss: m.rss, ms: performance.now() - started };
}

const mb = (bytes: number): number => Math.round((bytes / 1048576) * 100) / 100;

export async function runMemoryBench(options: MemoryBenchOptions = {}): Promise<BenchResult[]> {
  const total = options.quick === true ? 100_000 : 1_000_000;
  const checkpoint = total / 10;
  const threads = options.threads ?? Math.min(4, availableParallelism());
  const engine = createEngine({
    threads,
    schedulers: { noop: new URL('./fixtures/noop-scheduler.js', import.meta.url) },
    logger: pino({ level: 'silent' }),
  });
  await engine.start();
  const state = { enqueued: 0, acked: 0 };
  try {
    const started = performance.now();
    const awaited = options.awaited === true;
    await feedUntil(engine, state, checkpoint, awaited);
    const first = await reading(checkpoint, started);
    await feedUntil(engine, state, total, awaited);
    const last = await reading(total, started);
    const broker = engine.broker.stats();
    if (broker.totalReady + broker.totalUnacked + broker.totalPending !== 0 || state.acked !== total) {
      throw new Error(`Expected every evaluation acked, got ${state.acked} of ${total} (${JSON.stringify(broker)})`);
    }
    const growth = (last.heapUsed - first.heapUsed) / first.heapUsed;
    const perEval = (last.heapUsed - first.heapUsed) / (total - checkpoint);
    const evalsPerSec = Math.round(((total - checkpoint) * 1000) / (last.ms - first.ms));
    const at = (r: Reading): BenchResult => ({
      scope: 'memory',
      id: `memory.heap-at-${r.evaluations}`,
      name: `main-thread heap after GC at ${r.evaluations.toLocaleString('en-US')} evaluations`,
      unit: 'MB',
      heapUsedMb: mb(r.heapUsed),
      heapTotalMb: mb(r.heapTotal),
      externalMb: mb(r.external),
      rssMb: mb(r.rss),
      threads,
      notes: `heap used ${mb(r.heapUsed)} MB (total ${mb(r.heapTotal)} MB), external ${mb(r.external)} MB, rss ${mb(r.rss)} MB`,
    });
    return [
      at(first),
      at(last),
      {
        scope: 'memory',
        id: 'memory.heap-growth',
        name: `heap growth from ${checkpoint.toLocaleString('en-US')} to ${total.toLocaleString('en-US')} no-op evaluations`,
        ratio: Math.round((last.heapUsed / first.heapUsed) * 1000) / 1000,
        baseline: `heap after GC at ${checkpoint.toLocaleString('en-US')}`,
        growthPct: Math.round(growth * 1000) / 10,
        bytesPerEvaluation: Math.round(perEval * 100) / 100,
        opsPerSec: evalsPerSec,
        threads,
        pass: growth < MAX_HEAP_GROWTH,
        notes: `goal: under ${MAX_HEAP_GROWTH * 100}% growth; ${WINDOW} evaluations outstanding while feeding; readings taken idle; outcomes ${options.awaited === true ? 'awaited' : 'dropped at enqueue'}`,
      },
    ];
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
}

/** What an idle engine may keep after a drain, against before it: the bound, at any job count. */
export const MAX_IDLE_RATIO = 1.1;

/**
 * An idle engine holds nothing for jobs with nothing in flight: the heap after GC of an engine that ran a few
 * evaluations, against the same engine after `jobs` more (each of its own job, all enqueued at once, so the broker
 * holds `jobs` job slots at its peak) were acked and it went idle again.
 */
export async function runIdleAfterDrainBench(jobs: number, threads = Math.min(4, availableParallelism())): Promise<BenchResult> {
  const engine = createEngine({
    threads,
    schedulers: { noop: new URL('./fixtures/noop-scheduler.js', import.meta.url) },
    logger: pino({ level: 'silent' }),
  });
  await engine.start();
  try {
    const started = performance.now();
    // Warm-up: the JIT, the metrics' children and the pool's buffers are in the baseline, not in the growth.
    const warm = { enqueued: 0, acked: 0 };
    await feedUntil(engine, warm, 10_000, false);
    const before = await reading(warm.acked, started);
    let acked = 0;
    const drained = new Promise<void>((resolve) => {
      const off = engine.broker.events.on('broker:ack', () => {
        if (++acked === jobs) {
          off();
          resolve();
        }
      });
    });
    for (let i = 0; i < jobs; i++) engine.enqueue({ id: `drain-${i}`, jobId: `drain-job-${i}`, type: 'noop', priority: 50 });
    await drained;
    const after = await reading(jobs, started);
    const ratio = Math.round((after.heapUsed / before.heapUsed) * 1000) / 1000;
    return {
      scope: 'memory',
      id: `memory.idle-after-drain-${jobs}`,
      name: `idle heap after ${jobs.toLocaleString('en-US')} one-evaluation jobs drained, against before them`,
      ratio,
      baseline: 'heap after GC of the same engine before the jobs came',
      heapBeforeMb: mb(before.heapUsed),
      heapAfterMb: mb(after.heapUsed),
      threads,
      pass: ratio <= MAX_IDLE_RATIO,
      notes: `goal: at most ${MAX_IDLE_RATIO}×; heap ${mb(before.heapUsed)} MB before, ${mb(after.heapUsed)} MB after, both idle after GC`,
    };
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href && process.argv.includes('--idle')) {
  const jobs = [10_000, 100_000, 300_000];
  const results: BenchResult[] = [];
  for (const n of jobs) results.push(await runIdleAfterDrainBench(n));
  if (process.argv.includes('--json')) console.log(JSON.stringify(results, null, 2));
  else for (const r of results) console.log(`${r.name}: ${r['ratio']}× (${r['heapBeforeMb']} → ${r['heapAfterMb']} MB) — ${r['pass'] === true ? 'ok' : 'FAIL'} (goal ≤ ${MAX_IDLE_RATIO}×)`);
  if (results.some((r) => r['pass'] !== true)) process.exitCode = 1;
} else if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const results = await runMemoryBench({ quick: process.argv.includes('--quick'), awaited: process.argv.includes('--awaited') });
  if (process.argv.includes('--json')) console.log(JSON.stringify(results, null, 2));
  else {
    console.table(results.slice(0, 2).map((r) => ({ name: r.name, 'heap MB': r['heapUsedMb'], 'heap total MB': r['heapTotalMb'], 'external MB': r['externalMb'], 'rss MB': r['rssMb'] })));
    const summary = results[2]!;
    console.log(`${summary.name}: ${summary['growthPct']}% (${summary['bytesPerEvaluation']} bytes per evaluation; ${summary.opsPerSec?.toLocaleString('en-US')} evaluations/s on ${summary.threads} threads) — ${summary['pass'] === true ? 'ok' : 'FAIL'} (goal < ${MAX_HEAP_GROWTH * 100}%)`);
  }
  if (results[2]?.['pass'] !== true) process.exitCode = 1;
}
