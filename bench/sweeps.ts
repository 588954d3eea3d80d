/**
 * The two knobs users tune, swept.
 *
 * 1. Thread count (1..N): at each count, engine throughput against raw `piscina.run()`, idle dispatch latency
 *    against Piscina's one-way time, and dispatch latency under a steady offered load against Piscina under the
 *    same load — all measured in the same run on the same thread count (the functions of `engine.bench.ts`, plus
 *    the loaded-latency measurement defined here).
 *
 * 2. Redelivery backoff under a failure-injecting scheduler (`fixtures/flaky-scheduler.ts`): a dependency is down
 *    for `outageMs` while evaluations keep arriving; every delivery before it recovers throws. What the sweep varies
 *    is what actually spaces the retries of a failing *evaluation*: the broker's nack delays. After the d-th
 *    delivery is nacked the broker waits `initialNackDelayMs` (d = 1), then `(d − 1) × subsequentNackDelayMs` —
 *    its baseline and its growth step; `deliveryLimit` is its cap, in deliveries (set high here so that nothing is
 *    failed and every point measures the same work). The engine's `backoff` option (baselineMs/limitMs) spaces a
 *    worker's dequeue retries after broker errors (and task retries), not evaluation redeliveries; one control
 *    point runs a very slow `backoff` with the middle nack delays to show that it does not move the result.
 *    The sweep reports retry load (deliveries per success, failed deliveries per second of outage) against
 *    time-to-success (enqueue → success) and overshoot (recovery → success: what too long a delay costs).
 *
 * 3. Task retries under a failure-injecting handler (`fixtures/flaky-task-handler.ts`), the same outage: here the
 *    engine's `backoff` is the knob — `engine.tasks` retries a retryable run after `baselineMs × 4^k`, capped at
 *    `limitMs` — so this sweep varies exactly baseline/limit, with a manual run (`forceRun`) per task arriving
 *    evenly over the outage and `retry` high enough that no run ends failed.
 */
import { pino } from 'pino';
import type { BackoffOptions } from '../src/backoff.js';
import { createEngine } from '../src/engine/engine.js';
import { engineIdleLatency, engineThroughput, piscinaIdleLatency, piscinaThroughput, whenAcked } from './engine.bench.js';
import type { FlakyPayload } from './fixtures/flaky-scheduler.js';
import { Latency, nowUs, round } from './lib/latency.js';
import { withPiscina } from './lib/piscina-pool.js';
import { distributionOf, type Distribution } from './lib/quantiles.js';

const fixture = (name: string): URL => new URL(`./fixtures/${name}.js`, import.meta.url);

type Summary = ReturnType<Latency['summary']>;

// ---------------------------------------------------------------------------------------------------------------
// Thread-count sweep

export interface ThreadSweepOptions {
  readonly quick?: boolean;
  /** Offered load of the loaded-latency figure, evaluations (and Piscina tasks) per second. Default 10,000. */
  readonly loadRate?: number;
  readonly onPoint?: (point: ThreadSweepPoint) => void;
}

export interface ThreadSweepPoint {
  readonly threads: number;
  readonly engineOpsPerSec: number;
  readonly piscinaOpsPerSec: number;
  /** engine / raw Piscina throughput at this thread count. */
  readonly throughputRatio: number;
  readonly idle: { readonly engine: Summary; readonly piscina: Summary };
  readonly loaded: { readonly rate: number; readonly engine: Summary; readonly piscina: Summary };
  readonly distributions: { readonly loadedEngine: Distribution; readonly loadedPiscina: Distribution };
}


/**
 * Sends `count` submissions at `rate` per second in 1 ms bursts (a timer per millisecond submits everything due by
 * then). `submit(i)` is called right after `sent[i]` is stamped, so latency is measured from each submission call,
 * not from the moment it was due: this measures the system, not the timer's jitter.
 */
async function paced(count: number, rate: number, sent: Float64Array, submit: (i: number) => void): Promise<void> {
  const start = performance.now();
  let i = 0;
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      const due = Math.min(count, Math.floor(((performance.now() - start) * rate) / 1000) + 1);
      for (; i < due; i++) {
        sent[i] = nowUs();
        submit(i);
      }
      if (i < count) setTimeout(tick, 1);
      else resolve();
    };
    tick();
  });
}

/** enqueue → scheduler entry with `rate` evaluations per second arriving (after a short warm-up). */
export async function engineLoadedLatency(threads: number, rate: number, durationMs: number): Promise<Latency> {
  const engine = createEngine({
    threads,
    schedulers: { stamp: fixture('stamp-scheduler') },
    broker: { initialNackDelayMs: 3_600_000 },
  });
  await engine.start();
  const count = Math.max(1, Math.round((rate * durationMs) / 1000));
  const warm = Math.min(2000, count);
  const stamps = new Float64Array(new SharedArrayBuffer(8 * (count + warm)));
  const sent = new Float64Array(count + warm);
  const latency = new Latency();
  try {
    const warmed = whenAcked(engine, warm);
    await paced(warm, rate, sent, (i) => engine.enqueue({ id: `w${i}`, jobId: `w${i}`, type: 'stamp', priority: 50, payload: { stamps, index: i } }));
    await warmed;
    const done = whenAcked(engine, count);
    const measured = sent.subarray(warm);
    await paced(count, rate, measured, (i) =>
      engine.enqueue({ id: `e${i}`, jobId: `j${i}`, type: 'stamp', priority: 50, payload: { stamps, index: warm + i } }),
    );
    await done;
    for (let i = 0; i < count; i++) latency.recordUs(stamps[warm + i]! - measured[i]!);
    return latency;
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
}

/** piscina.run() → task entry under the same offered load. */
export async function piscinaLoadedLatency(threads: number, rate: number, durationMs: number): Promise<Latency> {
  const count = Math.max(1, Math.round((rate * durationMs) / 1000));
  const warm = Math.min(2000, count);
  const stamps = new Float64Array(new SharedArrayBuffer(8 * (count + warm)));
  const sent = new Float64Array(count + warm);
  const runs: Array<Promise<unknown>> = [];
  const latency = new Latency();
  return withPiscina(fixture('piscina-noop'), threads, async (pool) => {
    await paced(warm, rate, sent, (i) => runs.push(pool.run({ stamps, index: i })));
    await Promise.all(runs.splice(0));
    const measured = sent.subarray(warm);
    await paced(count, rate, measured, (i) => runs.push(pool.run({ stamps, index: warm + i })));
    await Promise.all(runs);
    for (let i = 0; i < count; i++) latency.recordUs(stamps[warm + i]! - measured[i]!);
    return latency;
  });
}

function collect(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

export async function threadSweep(counts: readonly number[], options: ThreadSweepOptions = {}): Promise<ThreadSweepPoint[]> {
  const quick = options.quick === true;
  const rate = options.loadRate ?? 10_000;
  const throughputCount = quick ? 20_000 : 100_000;
  const idleSamples = quick ? 200 : 1000;
  const loadedMs = quick ? 500 : 2000;
  const points: ThreadSweepPoint[] = [];
  for (const threads of counts) {
    collect();
    const raw = await piscinaThroughput(threads, throughputCount);
    collect();
    const engine = await engineThroughput(threads, throughputCount);
    collect();
    const idlePiscina = (await piscinaIdleLatency(threads, idleSamples)).summary();
    const idleEngine = (await engineIdleLatency(threads, idleSamples)).summary();
    collect();
    const loadedPiscina = await piscinaLoadedLatency(threads, rate, loadedMs);
    collect();
    const loadedEngine = await engineLoadedLatency(threads, rate, loadedMs);
    const point: ThreadSweepPoint = {
      threads,
      engineOpsPerSec: round(engine.opsPerSec, 0),
      piscinaOpsPerSec: round(raw.opsPerSec, 0),
      throughputRatio: round(engine.opsPerSec / raw.opsPerSec),
      idle: { engine: idleEngine, piscina: idlePiscina },
      loaded: { rate, engine: loadedEngine.summary(), piscina: loadedPiscina.summary() },
      distributions: {
        loadedEngine: distributionOf(`engine, ${threads} thread${threads === 1 ? '' : 's'}`, loadedEngine),
        loadedPiscina: distributionOf(`raw Piscina, ${threads} thread${threads === 1 ? '' : 's'}`, loadedPiscina),
      },
    };
    points.push(point);
    options.onPoint?.(point);
  }
  return points;
}

// ---------------------------------------------------------------------------------------------------------------
// Backoff sweep

export interface BackoffConfig {
  readonly label: string;
  /** Broker: re-enqueue delay after the first delivery was nacked (the baseline), ms. */
  readonly initialNackDelayMs: number;
  /** Broker: after the d-th delivery (d ≥ 2) the delay is (d − 1) × this (the growth step), ms. */
  readonly subsequentNackDelayMs: number;
  /** Engine `backoff` (only the control point sets it). */
  readonly backoff?: BackoffOptions;
  readonly control?: boolean;
}

export interface BackoffSweepPoint {
  readonly config: BackoffConfig;
  readonly outageMs: number;
  readonly evaluations: number;
  readonly succeeded: number;
  /** Evaluations that reached the delivery limit (moved to `_failed`): should be 0. */
  readonly failed: number;
  /** Retry load: deliveries (scheduler calls) per successful evaluation; 1 = no retries. */
  readonly deliveriesPerSuccess: number;
  /** Failed deliveries per second of outage: the load the retries put on the broken dependency. */
  readonly failedDeliveriesPerSec: number;
  /** enqueue → success, ms. */
  readonly timeToSuccess: { readonly p50Ms: number; readonly p99Ms: number; readonly maxMs: number; readonly meanMs: number };
  /** dependency recovered → success, ms: what the delay costs after the failure is gone. */
  readonly overshoot: { readonly p50Ms: number; readonly p99Ms: number; readonly maxMs: number; readonly meanMs: number };
  /** First enqueue → last success, ms. */
  readonly wallMs: number;
}

export interface BackoffSweepOptions {
  readonly quick?: boolean;
  readonly threads?: number;
  readonly onPoint?: (point: BackoffSweepPoint) => void;
}

/** The grid: baseline and step each at 1/40, 1/10 and 2/5 of the outage, plus the control point. */
export function backoffGrid(outageMs: number): BackoffConfig[] {
  const fractions = [0.025, 0.1, 0.4];
  const configs: BackoffConfig[] = [];
  for (const fi of fractions) {
    for (const fs of fractions) {
      const initial = Math.round(outageMs * fi);
      const step = Math.round(outageMs * fs);
      configs.push({ label: `${initial}/${step}`, initialNackDelayMs: initial, subsequentNackDelayMs: step });
    }
  }
  const mid = Math.round(outageMs * 0.1);
  configs.push({
    label: `${mid}/${mid} + backoff 2000/5000`,
    initialNackDelayMs: mid,
    subsequentNackDelayMs: mid,
    backoff: { baselineMs: 2000, limitMs: 5000 },
    control: true,
  });
  return configs;
}

function msSummary(latency: Latency): BackoffSweepPoint['timeToSuccess'] {
  const s = latency.summary();
  return { p50Ms: round(s.p50Us / 1000), p99Ms: round(s.p99Us / 1000), maxMs: round(latency.percentileUs(100) / 1000), meanMs: round(s.meanUs / 1000) };
}

/** Runs one backoff configuration: `evaluations` arrive evenly over an outage of `outageMs`. */
export async function backoffPoint(config: BackoffConfig, options: { threads: number; outageMs: number; evaluations: number }): Promise<BackoffSweepPoint> {
  const { threads, outageMs, evaluations } = options;
  const engine = createEngine({
    threads,
    schedulers: { flaky: fixture('flaky-scheduler') },
    broker: {
      initialNackDelayMs: config.initialNackDelayMs,
      subsequentNackDelayMs: config.subsequentNackDelayMs,
      // High enough that no evaluation is failed: every point does the same work.
      deliveryLimit: 1000,
    },
    ...(config.backoff === undefined ? {} : { backoff: config.backoff }),
    logger: pino({ level: 'error' }),
  });
  await engine.start();
  const attempts = new Int32Array(new SharedArrayBuffer(4 * evaluations));
  const succeededAt = new Float64Array(new SharedArrayBuffer(8 * evaluations));
  const enqueuedAt = new Float64Array(evaluations);
  let acked = 0;
  let failed = 0;
  try {
    const finished = new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (acked + failed === evaluations) {
          offAck();
          offFailed();
          clearTimeout(guard);
          resolve();
        }
      };
      const offAck = engine.broker.events.on('broker:ack', () => {
        acked++;
        check();
      });
      const offFailed = engine.broker.events.on('broker:failed', () => {
        failed++;
        check();
      });
      const guard = setTimeout(() => reject(new Error(`backoff sweep ${config.label}: not finished after ${outageMs + 60_000} ms`)), outageMs + 60_000);
    });
    const start = nowUs() / 1000;
    const healthyAt = start + outageMs;
    // Arrivals spread evenly over the outage, submitted in 1 ms bursts.
    const rate = (evaluations * 1000) / outageMs;
    const sentUs = new Float64Array(evaluations);
    await paced(evaluations, rate, sentUs, (i) => {
      enqueuedAt[i] = sentUs[i]! / 1000;
      const payload: FlakyPayload = { healthyAt, attempts, succeededAt, index: i };
      engine.enqueue({ id: `f${i}`, jobId: `f${i}`, type: 'flaky', priority: 50, payload });
    });
    await finished;
    const toSuccess = new Latency();
    const overshoot = new Latency();
    let deliveries = 0;
    let failedDeliveries = 0;
    let last = start;
    for (let i = 0; i < evaluations; i++) {
      const calls = Atomics.load(attempts, i);
      deliveries += calls;
      const done = succeededAt[i]!;
      if (done > 0) {
        failedDeliveries += calls - 1;
        toSuccess.recordUs((done - enqueuedAt[i]!) * 1000);
        overshoot.recordUs(Math.max(0, done - Math.max(healthyAt, enqueuedAt[i]!)) * 1000);
        last = Math.max(last, done);
      } else failedDeliveries += calls;
    }
    return {
      config,
      outageMs,
      evaluations,
      succeeded: acked,
      failed,
      deliveriesPerSuccess: round(deliveries / Math.max(1, acked), 3),
      failedDeliveriesPerSec: round((failedDeliveries * 1000) / outageMs, 0),
      timeToSuccess: msSummary(toSuccess),
      overshoot: msSummary(overshoot),
      wallMs: round(last - start, 1),
    };
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
}

export async function backoffSweep(options: BackoffSweepOptions = {}): Promise<BackoffSweepPoint[]> {
  const quick = options.quick === true;
  const outageMs = quick ? 200 : 400;
  const evaluations = quick ? 100 : 400;
  const points: BackoffSweepPoint[] = [];
  for (const config of backoffGrid(outageMs)) {
    collect();
    const point = await backoffPoint(config, { threads: options.threads ?? 2, outageMs, evaluations });
    points.push(point);
    options.onPoint?.(point);
  }
  return points;
}

// ---------------------------------------------------------------------------------------------------------------
// Task-retry sweep (engine `backoff`)

export interface TaskRetryConfig {
  readonly label: string;
  readonly baselineMs: number;
  readonly limitMs: number;
}

export interface TaskRetrySweepPoint {
  readonly config: TaskRetryConfig;
  readonly outageMs: number;
  readonly runs: number;
  readonly succeeded: number;
  /** Runs that ended failed (retries exhausted): should be 0. */
  readonly failed: number;
  /** Retry load: attempts per successful run; 1 = no retries. */
  readonly attemptsPerSuccess: number;
  /** Failed attempts per second of outage. */
  readonly failedAttemptsPerSec: number;
  /** forceRun → run finished with success, ms. */
  readonly timeToSuccess: BackoffSweepPoint['timeToSuccess'];
  /** dependency recovered → run finished with success, ms. */
  readonly overshoot: BackoffSweepPoint['overshoot'];
  readonly wallMs: number;
}

/** baselineMs at 1/40, 1/10 and 2/5 of the outage, limitMs at 2/5, 1 and 4 outages (factor 4, no jitter). */
export function taskRetryGrid(outageMs: number): TaskRetryConfig[] {
  const configs: TaskRetryConfig[] = [];
  for (const fb of [0.025, 0.1, 0.4]) {
    for (const fl of [0.4, 1, 4]) {
      const baselineMs = Math.round(outageMs * fb);
      const limitMs = Math.round(outageMs * fl);
      configs.push({ label: `${baselineMs}/${limitMs}`, baselineMs, limitMs });
    }
  }
  return configs;
}

/** A daily cron 12 hours from now (UTC), so no scheduled run falls inside the measurement: only forced runs run. */
function farCron(): string {
  const at = new Date(Date.now() + 12 * 3_600_000);
  return `${at.getUTCMinutes()} ${at.getUTCHours()} * * *`;
}

export async function taskRetryPoint(config: TaskRetryConfig, options: { threads: number; outageMs: number; runs: number }): Promise<TaskRetrySweepPoint> {
  const { threads, outageMs, runs } = options;
  const engine = createEngine({
    threads,
    handlers: { flaky: fixture('flaky-task-handler') },
    backoff: { baselineMs: config.baselineMs, limitMs: config.limitMs },
    logger: pino({ level: 'error' }),
  });
  await engine.start();
  const forcedAt = new Float64Array(runs);
  const toSuccess = new Latency();
  const overshoot = new Latency();
  let succeeded = 0;
  let failed = 0;
  let attempts = 0;
  let failedAttempts = 0;
  try {
    const start = nowUs() / 1000;
    const healthyAt = start + outageMs;
    const cron = farCron();
    for (let i = 0; i < runs; i++) {
      engine.tasks.add({ id: `t${i}`, cron, maxConcurrency: 1, retry: 100, handler: 'flaky', payload: { healthyAt } });
    }
    let last = start;
    const finished = new Promise<void>((resolve, reject) => {
      const guard = setTimeout(() => reject(new Error(`task-retry sweep ${config.label}: not finished after ${outageMs + 60_000} ms`)), outageMs + 60_000);
      const off = engine.tasks.events.on('task:run:finish', ({ taskId, status, attempts: n }) => {
        const now = nowUs() / 1000;
        const i = Number(taskId.slice(1));
        attempts += n;
        if (status === 'success') {
          succeeded++;
          failedAttempts += n - 1;
          toSuccess.recordUs((now - forcedAt[i]!) * 1000);
          overshoot.recordUs(Math.max(0, now - Math.max(healthyAt, forcedAt[i]!)) * 1000);
          last = Math.max(last, now);
        } else {
          failed++;
          failedAttempts += n;
        }
        if (succeeded + failed === runs) {
          off();
          clearTimeout(guard);
          resolve();
        }
      });
    });
    const rate = (runs * 1000) / outageMs;
    const sentUs = new Float64Array(runs);
    const forced: Array<Promise<unknown>> = [];
    await paced(runs, rate, sentUs, (i) => {
      forcedAt[i] = sentUs[i]! / 1000;
      forced.push(engine.tasks.forceRun(`t${i}`));
    });
    await Promise.all(forced);
    await finished;
    return {
      config,
      outageMs,
      runs,
      succeeded,
      failed,
      attemptsPerSuccess: round(attempts / Math.max(1, succeeded), 3),
      failedAttemptsPerSec: round((failedAttempts * 1000) / outageMs, 0),
      timeToSuccess: msSummary(toSuccess),
      overshoot: msSummary(overshoot),
      wallMs: round(last - start, 1),
    };
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
}

export async function taskRetrySweep(options: { quick?: boolean; threads?: number; onPoint?: (p: TaskRetrySweepPoint) => void } = {}): Promise<TaskRetrySweepPoint[]> {
  const quick = options.quick === true;
  const outageMs = quick ? 200 : 400;
  const runs = quick ? 100 : 400;
  const points: TaskRetrySweepPoint[] = [];
  for (const config of taskRetryGrid(outageMs)) {
    collect();
    const point = await taskRetryPoint(config, { threads: options.threads ?? 2, outageMs, runs });
    points.push(point);
    options.onPoint?.(point);
  }
  return points;
}
