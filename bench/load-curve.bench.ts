/**
 * Dispatch latency against offered load: the engine and raw Piscina, each offered evaluations (tasks) open loop at fixed rates from 1,000/s up to past saturation. Job `i`
 * is due at `start + i / rate`; the sender wakes on a timer and sends everything due, and the latency of job `i` is
 * its scheduler's entry time minus its due time, so a sender that falls behind (a busy main thread) shows up as
 * latency instead of lowering the load (no coordinated omission).
 */
import { pathToFileURL } from 'node:url';
import { createEngine, type Engine } from '../src/engine/engine.js';
import { Latency, round } from './lib/latency.js';
import { countdown, openLoop } from './lib/open-loop.js';
import { withPiscina } from './lib/piscina-pool.js';
import { printTable } from './lib/table.js';
import type { BenchResult } from './lib/types.js';

const fixture = (name: string): URL => new URL(`./fixtures/${name}.js`, import.meta.url);

export const FULL_RATES: readonly number[] = [1_000, 5_000, 10_000, 20_000, 40_000, 80_000, 160_000];
export const QUICK_RATES: readonly number[] = [1_000, 10_000, 40_000, 160_000];
/** A point's p99 above this is "past saturation" for the summary figure. */
export const SATURATION_P99_US = 10_000;

export interface LoadPoint {
  readonly rate: number;
  readonly count: number;
  readonly p50Us: number;
  readonly p99Us: number;
  readonly p999Us: number;
}

export interface LoadCurve {
  readonly label: string;
  readonly threads: number;
  readonly points: readonly LoadPoint[];
}

/** One rate's jobs: how many, where the threads stamp their entry, and when each was due. */
function pointBuffers(rate: number, seconds: number): { count: number; stamps: Float64Array; due: Float64Array } {
  const count = Math.max(200, Math.round(rate * seconds));
  return { count, stamps: new Float64Array(new SharedArrayBuffer(8 * count)), due: new Float64Array(count) };
}

function toPoint(rate: number, count: number, due: Float64Array, stamps: Float64Array): LoadPoint {
  const latency = new Latency();
  for (let i = 0; i < count; i++) latency.recordUs(stamps[i]! - due[i]!);
  const s = latency.summary();
  return { rate, count, p50Us: s.p50Us, p99Us: s.p99Us, p999Us: s.p999Us };
}

async function engineCurve(threads: number, rates: readonly number[], seconds: number): Promise<LoadPoint[]> {
  const engine: Engine = createEngine({
    threads,
    schedulers: { stamp: fixture('stamp-scheduler') },
    broker: { initialNackDelayMs: 3_600_000 },
  });
  await engine.start();
  const points: LoadPoint[] = [];
  try {
    let prefix = 0;
    for (const rate of [rates[0]!, ...rates]) {
      const { count, stamps, due } = pointBuffers(rate, seconds);
      const { allDone, done } = countdown(count);
      const off = engine.broker.events.on('broker:ack', done);
      const p = prefix++;
      await openLoop(
        count,
        rate,
        (i, dueUs) => {
          due[i] = dueUs;
          engine.enqueue({ id: `${p}:${i}`, jobId: `${p}:${i}`, type: 'stamp', priority: 50, payload: { stamps, index: i } });
        },
        allDone,
      );
      off();
      // The first round warms up (JIT, modules, the cost model) and is not reported.
      if (p > 0) points.push(toPoint(rate, count, due, stamps));
      globalThis.gc?.();
    }
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
  return points;
}

async function piscinaCurve(threads: number, rates: readonly number[], seconds: number): Promise<LoadPoint[]> {
  return withPiscina(fixture('piscina-noop'), threads, async (pool) => {
    const points: LoadPoint[] = [];
    let round = 0;
    for (const rate of [rates[0]!, ...rates]) {
      const { count, stamps, due } = pointBuffers(rate, seconds);
      const { allDone, done } = countdown(count);
      await openLoop(
        count,
        rate,
        (i, dueUs) => {
          due[i] = dueUs;
          void pool.run({ stamps, index: i }).then(done);
        },
        allDone,
      );
      if (round++ > 0) points.push(toPoint(rate, count, due, stamps));
      globalThis.gc?.();
    }
    return points;
  });
}

/** The first offered load whose p99 exceeds SATURATION_P99_US (Infinity when none did). */
export function saturationRate(points: readonly LoadPoint[]): number {
  return points.find((p) => p.p99Us > SATURATION_P99_US)?.rate ?? Number.POSITIVE_INFINITY;
}

export interface LoadCurveComparison {
  readonly curves: LoadCurve[];
  readonly results: BenchResult[];
}

/** The curves of Piscina and the engine, and one result row per rate. */
export async function compareLoadCurves(
  threads: number,
  { quick = false }: { readonly quick?: boolean } = {},
): Promise<LoadCurveComparison> {
  const rates = quick ? QUICK_RATES : FULL_RATES;
  const seconds = quick ? 0.25 : 0.6;
  const raw = await piscinaCurve(threads, rates, seconds);
  globalThis.gc?.();
  const engine = await engineCurve(threads, rates, seconds);
  const curves: LoadCurve[] = [
    { label: 'raw Piscina', threads, points: raw },
    { label: 'engine', threads, points: engine },
  ];
  const results: BenchResult[] = [];
  for (const curve of curves.slice(1)) {
    curve.points.forEach((p, i) => {
      const base = raw[i]!;
      results.push({
        scope: 'engine',
        id: `engine.load-curve.${p.rate}`,
        name: `dispatch latency at ${p.rate.toLocaleString('en-US')}/s offered (${curve.label})`,
        ratio: round(base.p99Us / p.p99Us),
        baseline: "piscina p99 at the same load (>1 = engine's lower)",
        p50Us: p.p50Us,
        p99Us: p.p99Us,
        p999Us: p.p999Us,
        baselineP50Us: base.p50Us,
        baselineP99Us: base.p99Us,
        threads,
        notes: `${p.count.toLocaleString('en-US')} jobs open loop, latency from each job's due time; Piscina p99.9 ${base.p999Us} µs`,
      });
    });
    const engineSat = saturationRate(curve.points);
    const rawSat = saturationRate(raw);
    results.push({
      scope: 'engine',
      id: `engine.load-curve.saturation`,
      name: `offered load where p99 first exceeds ${SATURATION_P99_US / 1000} ms (${curve.label})`,
      ...(Number.isFinite(rawSat) ? { ratio: round(engineSat / rawSat) } : {}),
      baseline: 'piscina, the same (>1 = engine holds more load)',
      threads,
      notes: `engine ${engineSat.toLocaleString('en-US')}/s, Piscina ${rawSat.toLocaleString('en-US')}/s (Infinity: never within the rates tried)`,
    });
  }
  return { curves, results };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const quick = process.argv.includes('--quick');
  const { results } = await compareLoadCurves(2, { quick });
  printTable('dispatch latency against offered load (threads=2)', results);
}
