/**
 * The engine under CPU-bound work, against raw Piscina in the same run with the same threads:
 * 1. the job-cost sweep: throughput of a burst of jobs that each burn 0 (no-op), 0.1, 1 or 10 ms of CPU, against
 *    Piscina and against the cores' limit (threads × 1000 / cost jobs/s);
 * 2. mixed-load fairness: 99% of jobs burn 1 ms and 1% burn 100 ms, offered open loop at 60% or 90% of the
 *    threads' capacity; the figure is the short jobs' enqueue → done latency (p50/p99/max), counted from when each
 *    job was due to be sent, so that a sender held up by a busy main thread cannot hide the wait (no coordinated
 *    omission). A free thread should take the next job: no short job waits behind a long one while a thread idles.
 * Both also count the engine's nack timeouts: with the default nack timeout none is a fault, so any is spurious.
 */
import { pathToFileURL } from 'node:url';
import { createEngine, type Engine } from '../src/engine/engine.js';
import { Latency, nowUs, round } from './lib/latency.js';
import { MEAN_MS, mixedCosts, SHORT_MS } from './lib/mixed-costs.js';
import { openLoop } from './lib/open-loop.js';
import { withPiscina } from './lib/piscina-pool.js';
import { printTable } from './lib/table.js';
import type { BenchResult } from './lib/types.js';

const fixture = (name: string): URL => new URL(`./fixtures/${name}.js`, import.meta.url);

/** CPU per job of the sweep, ms; 0 is a no-op. */
export const SWEEP_COSTS_MS: readonly number[] = [0, 0.1, 1, 10];

interface EngineRun {
  readonly engine: Engine;
  /** Nack timeouts the broker counted since the engine started. */
  readonly nackTimeouts: () => number;
}

async function costEngine(threads: number): Promise<EngineRun> {
  // Defaults everywhere else: what a service gets without tuning is what is measured.
  const engine = createEngine({ threads, schedulers: { cost: fixture('cost-scheduler') } });
  let timeouts = 0;
  engine.broker.events.on('broker:nack', ({ timedOut }) => {
    if (timedOut) timeouts++;
  });
  await engine.start();
  return { engine, nackTimeouts: () => timeouts };
}

/** Calls `onAck(payload index)` for every ack. */
function onAcks(engine: Engine, onAck: (index: number) => void): () => void {
  return engine.broker.events.on('broker:ack', ({ evaluation }) => onAck((evaluation.payload as { index: number }).index));
}

function label(costMs: number): string {
  return costMs === 0 ? 'no-op' : `${costMs} ms`;
}

/** How many jobs make a burst of about `seconds` of work on `threads` threads (no-op: a fixed count). */
function burstSize(costMs: number, threads: number, seconds: number, noopCount: number): number {
  return costMs === 0 ? noopCount : Math.max(threads * 20, Math.round((threads * 1000 * seconds) / costMs));
}

async function engineBurst(threads: number, costMs: number, count: number): Promise<{ opsPerSec: number; nackTimeouts: number }> {
  const { engine, nackTimeouts } = await costEngine(threads);
  try {
    const warm = Math.min(200, count);
    await burst(engine, 'w', warm, costMs);
    const start = performance.now();
    await burst(engine, 'e', count, costMs);
    return { opsPerSec: count / ((performance.now() - start) / 1000), nackTimeouts: nackTimeouts() };
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
}

function burst(engine: Engine, prefix: string, count: number, costMs: number): Promise<void> {
  let acked = 0;
  return new Promise((resolve) => {
    const off = onAcks(engine, () => {
      if (++acked === count) {
        off();
        resolve();
      }
    });
    for (let i = 0; i < count; i++) engine.enqueue({ id: `${prefix}${i}`, jobId: `${prefix}${i}`, type: 'cost', priority: 50, payload: { ms: costMs, index: i } });
  });
}

async function piscinaBurst(threads: number, costMs: number, count: number): Promise<{ opsPerSec: number }> {
  return withPiscina(fixture('piscina-cost'), threads, async (pool) => {
    await Promise.all(Array.from({ length: Math.min(200, count) }, () => pool.run({ ms: costMs })));
    const start = performance.now();
    const runs: Promise<unknown>[] = new Array(count);
    for (let i = 0; i < count; i++) runs[i] = pool.run({ ms: costMs });
    await Promise.all(runs);
    return { opsPerSec: count / ((performance.now() - start) / 1000) };
  });
}

/** One row of the job-cost sweep: engine and Piscina bursts, alternating which goes first over `rounds`. */
export async function compareCost(threads: number, costMs: number, { quick = false, rounds = 2 } = {}): Promise<BenchResult> {
  const count = burstSize(costMs, threads, quick ? 0.5 : 1.5, quick ? 30_000 : 100_000);
  let engineOps = 0;
  let rawOps = 0;
  let timeouts = 0;
  for (let round = 0; round < rounds; round++) {
    const engineFirst = round % 2 === 1;
    if (engineFirst) {
      const e = await engineBurst(threads, costMs, count);
      engineOps += e.opsPerSec;
      timeouts += e.nackTimeouts;
    }
    globalThis.gc?.();
    rawOps += (await piscinaBurst(threads, costMs, count)).opsPerSec;
    globalThis.gc?.();
    if (!engineFirst) {
      const e = await engineBurst(threads, costMs, count);
      engineOps += e.opsPerSec;
      timeouts += e.nackTimeouts;
    }
  }
  engineOps /= rounds;
  rawOps /= rounds;
  const limit = costMs > 0 ? (threads * 1000) / costMs : undefined;
  const ofLimit = limit === undefined ? '' : `; ${round((100 * engineOps) / limit, 1)}% of the cores' limit (${round(limit, 0)}/s), Piscina ${round((100 * rawOps) / limit, 1)}%`;
  return {
    scope: 'engine',
    id: `engine.cost.${costMs === 0 ? 'noop' : `${costMs}ms`}`,
    name: `throughput, ${label(costMs)} of CPU per job`,
    ratio: round(engineOps / rawOps),
    baseline: 'raw piscina.run() of the same job',
    opsPerSec: round(engineOps, 0),
    baselineOpsPerSec: round(rawOps, 0),
    threads,
    unit: 'jobs/s',
    ...(limit === undefined ? {} : { coresLimitPerSec: round(limit, 0), shareOfLimit: round(engineOps / limit, 3) }),
    nackTimeouts: timeouts,
    notes: `bursts of ${count.toLocaleString('en-US')} submitted at once, ${rounds} alternating rounds (mean)${ofLimit}; engine defaults; ${timeouts} nack timeouts`,
  };
}

interface FairnessSide {
  readonly short: Latency;
  readonly maxShortUs: number;
  readonly nackTimeouts: number;
}

async function engineMixed(threads: number, costs: Float64Array, ratePerSec: number): Promise<FairnessSide> {
  const { engine, nackTimeouts } = await costEngine(threads);
  try {
    await burst(engine, 'w', 200, SHORT_MS);
    const short = new Latency();
    let maxShortUs = 0;
    const due = new Float64Array(costs.length);
    let left = costs.length;
    let finish!: () => void;
    const allDone = new Promise<void>((resolve) => (finish = resolve));
    const off = onAcks(engine, (index) => {
      if (costs[index] === SHORT_MS) {
        const us = nowUs() - due[index]!;
        short.recordUs(us);
        if (us > maxShortUs) maxShortUs = us;
      }
      if (--left === 0) finish();
    });
    await openLoop(
      costs.length,
      ratePerSec,
      (i, dueUs) => {
        due[i] = dueUs;
        engine.enqueue({ id: `m${i}`, jobId: `m${i}`, type: 'cost', priority: 50, payload: { ms: costs[i]!, index: i } });
      },
      allDone,
    );
    off();
    return { short, maxShortUs, nackTimeouts: nackTimeouts() };
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
}

async function piscinaMixed(threads: number, costs: Float64Array, ratePerSec: number): Promise<FairnessSide> {
  return withPiscina(fixture('piscina-cost'), threads, async (pool) => {
    await Promise.all(Array.from({ length: 200 }, () => pool.run({ ms: SHORT_MS })));
    const short = new Latency();
    let maxShortUs = 0;
    let left = costs.length;
    let finish!: () => void;
    const allDone = new Promise<void>((resolve) => (finish = resolve));
    await openLoop(
      costs.length,
      ratePerSec,
      (i, dueUs) => {
        const ms = costs[i]!;
        void pool.run({ ms }).then(() => {
          if (ms === SHORT_MS) {
            const us = nowUs() - dueUs;
            short.recordUs(us);
            if (us > maxShortUs) maxShortUs = us;
          }
          if (--left === 0) finish();
        });
      },
      allDone,
    );
    return { short, maxShortUs, nackTimeouts: 0 };
  });
}

export interface FairnessComparison {
  readonly result: BenchResult;
  readonly engine: Latency;
  readonly raw: Latency;
}

/**
 * Mixed-load fairness at `load` (a share of the threads' capacity): short jobs' p99 enqueue → done, Piscina's over
 * the engine's (> 1: the engine's short jobs wait less). Piscina's queue is central, so its free thread always
 * takes the next job; the engine's must do at least as well.
 */
export async function compareFairness(threads: number, load: number, count: number): Promise<FairnessComparison> {
  const costs = mixedCosts(count);
  const ratePerSec = (load * threads * 1000) / MEAN_MS;
  const raw = await piscinaMixed(threads, costs, ratePerSec);
  globalThis.gc?.();
  const engine = await engineMixed(threads, costs, ratePerSec);
  const e = engine.short.summary();
  const r = raw.short.summary();
  const percent = Math.round(load * 100);
  return {
    result: {
      scope: 'engine',
      id: `engine.fairness-${percent}`,
      name: `mixed load at ${percent}%: short jobs' enqueue → done (1% of jobs 100 ms, 99% 1 ms)`,
      ratio: round(r.p99Us / e.p99Us),
      baseline: "piscina short jobs' p99 (>1 = engine's wait less)",
      ...e,
      maxUs: round(engine.maxShortUs),
      baselineP50Us: r.p50Us,
      baselineP99Us: r.p99Us,
      baselineMaxUs: round(raw.maxShortUs),
      threads,
      nackTimeouts: engine.nackTimeouts,
      notes: `${count.toLocaleString('en-US')} jobs offered open loop at ${round(ratePerSec, 0)}/s (latency from each job's due time); max ${round(engine.maxShortUs / 1000, 1)} ms vs Piscina ${round(raw.maxShortUs / 1000, 1)} ms; engine defaults; ${engine.nackTimeouts} nack timeouts`,
    },
    engine: engine.short,
    raw: raw.short,
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const quick = process.argv.includes('--quick');
  const threadsArg = process.argv.indexOf('--threads');
  const threads = threadsArg > 0 ? Number(process.argv[threadsArg + 1]) : 2;
  const only = process.argv.indexOf('--only');
  const what = only > 0 ? process.argv[only + 1] : undefined;
  const results: BenchResult[] = [];
  if (what === undefined || what === 'cost') for (const cost of SWEEP_COSTS_MS) results.push(await compareCost(threads, cost, { quick }));
  if (what === undefined || what === 'fairness') {
    for (const load of [0.6, 0.9]) results.push((await compareFairness(threads, load, quick ? 1500 : 4000)).result);
  }
  printTable(`cpu load (threads=${threads})`, results);
  for (const r of results) console.log(`${r.id}: ${r.notes}`);
}
