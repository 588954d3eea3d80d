/**
 * What the dashboard costs. Two rows:
 * - no-op throughput of an engine whose dashboard a page polls every second (the page's requests: overview,
 *   evaluations, tasks, as `app.js` makes them), against the same engine with no one looking, in alternating rounds
 *   in one process: the ratio (goal ≥ 0.95);
 * - how long each data endpoint answers with 1,000,000 evaluations queued (a paused type holds them): p50 and max of
 *   repeated requests (goal < 50 ms).
 *
 * With `--postgres URL` the second row runs on the PostgreSQL backend instead, in a fresh schema whose 1,000,000
 * queued rows are inserted by SQL (a paused type holds them; a few enqueued through the engine give the detail).
 *
 *   node --expose-gc dist/bench/dashboard.bench.js [--rounds 6] [--queued 1000000] [--postgres URL] [--json]
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { createDashboard } from '../src/dashboard/dashboard.js';
import pg from 'pg';
import { createEngine } from '../src/engine/engine.js';
import { postgresBackend } from '../src/postgres/index.js';

const noop = new URL('../test/fixtures/noop.js', import.meta.url);
const logger = pino({ level: 'silent' });

export interface DashboardBenchResult {
  /** No-op evaluations/s with the page polling, over without, per round. */
  readonly throughputRatios: readonly number[];
  readonly throughputRatio: number;
  /** Per endpoint with `queued` evaluations held: p50 and max answer time, ms. */
  readonly endpoints: Readonly<Record<string, { readonly p50Ms: number; readonly maxMs: number }>>;
  readonly queued: number;
}

async function serve(engine: Parameters<typeof createDashboard>[0]): Promise<{ base: string; close: () => Promise<void> }> {
  const handler = createDashboard(engine);
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    base: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        handler.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** One poll of the page: what `app.js` asks every second. */
async function poll(base: string, state = 'ready'): Promise<void> {
  for (const path of ['api/overview', `api/evaluations?state=${state}&limit=50`, 'api/tasks']) {
    const res = await fetch(`${base}/${path}`);
    await res.arrayBuffer();
  }
}

/** No-op evaluations/s over one drain of `n`, with the page polling every second when `looking`. */
async function drain(engine: ReturnType<typeof createEngine>, base: string, n: number, looking: boolean, prefix: string): Promise<number> {
  let polling = looking;
  const poller = (async () => {
    while (polling) {
      await poll(base);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  })();
  const started = performance.now();
  const runs: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) runs.push(engine.run({ id: `${prefix}${i}`, type: 'work' }));
  await Promise.all(runs);
  const perSec = n / ((performance.now() - started) / 1000);
  polling = false;
  await poller;
  return perSec;
}

/** Each data endpoint 15 times: p50 and max, ms. */
async function timeEndpoints(base: string, detailId: string): Promise<Record<string, { p50Ms: number; maxMs: number }>> {
  const endpoints: Record<string, { p50Ms: number; maxMs: number }> = {};
  const first = (await (await fetch(`${base}/api/evaluations?state=ready&order=oldest&limit=50`)).json()) as { nextCursor?: string };
  const paths = {
    overview: 'api/overview',
    'evaluations ready, newest': 'api/evaluations?state=ready&limit=50',
    'evaluations ready, oldest, page 2': `api/evaluations?state=ready&order=oldest&limit=50&cursor=${encodeURIComponent(first.nextCursor ?? '')}`,
    'evaluations failed (none)': 'api/evaluations?state=failed&limit=50',
    'evaluation detail': `api/evaluations/${detailId}`,
    tasks: 'api/tasks',
  };
  for (const [name, path] of Object.entries(paths)) {
    const times: number[] = [];
    for (let i = 0; i < 15; i++) {
      const t0 = performance.now();
      const res = await fetch(`${base}/${path}`);
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    endpoints[name] = { p50Ms: times[Math.floor(times.length / 2)]!, maxMs: times[times.length - 1]! };
  }
  return endpoints;
}

/** The data endpoints on PostgreSQL with `queued` rows held by a paused type. */
export async function runPostgresEndpoints(url: string, queued: number): Promise<Record<string, { p50Ms: number; maxMs: number }>> {
  const schema = `dash_bench_${process.pid}`;
  const admin = new pg.Pool({ connectionString: url, max: 1 });
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  const engine = createEngine({ threads: 1, logger, backend: postgresBackend({ connectionString: url, schema }), schedulers: { held: noop } });
  await engine.start();
  const { base, close } = await serve(engine);
  try {
    await engine.admin.pauseType('held');
    for (let i = 0; i < 10; i++) await engine.enqueue({ id: `d${i}`, type: 'held', jobId: `d${i}` }).accepted;
    await admin.query(
      `INSERT INTO "${schema}".evals (id, namespace, job_id, type, priority, modify_index, create_index, body, state, queue, holds_slot, ready_at)
       SELECT 'q' || g, 'default', 'q' || g, 'held', 50, 0, 0, b.body, 'ready', 'held', true, now()
         FROM generate_series(1, $1::int) g, (SELECT body FROM "${schema}".evals WHERE id = 'd0') b`,
      [queued],
    );
    await admin.query(`ANALYZE "${schema}".evals`);
    return await timeEndpoints(base, 'd5');
  } finally {
    await close();
    await engine.stop({ graceMs: 100 });
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

export async function runDashboardBench(options: { rounds?: number; queued?: number; drain?: number } = {}): Promise<DashboardBenchResult> {
  const rounds = options.rounds ?? 6;
  const queued = options.queued ?? 1_000_000;
  const n = options.drain ?? 200_000;
  const engine = createEngine({ threads: 2, logger, schedulers: { work: noop, held: noop } });
  await engine.start();
  const { base, close } = await serve(engine);
  try {
    await drain(engine, base, 20_000, false, 'warm');
    const ratios: number[] = [];
    for (let r = 0; r < rounds; r++) {
      // Alternating which goes first: a round's drift does not favour one side.
      const order = r % 2 === 0 ? [false, true] : [true, false];
      const perSec: Record<string, number> = {};
      for (const looking of order) perSec[String(looking)] = await drain(engine, base, n, looking, `r${r}${looking ? 'l' : 'n'}`);
      ratios.push(perSec['true']! / perSec['false']!);
    }
    await engine.admin.pauseType('held');
    for (let i = 0; i < queued; i++) engine.enqueue({ id: `q${i}`, type: 'held', jobId: `q${i}` });
    const endpoints = await timeEndpoints(base, 'q999999');
    const sorted = [...ratios].sort((a, b) => a - b);
    return { throughputRatios: ratios, throughputRatio: sorted[Math.floor(sorted.length / 2)]!, endpoints, queued };
  } finally {
    await close();
    await engine.stop({ graceMs: 100 });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const arg = (name: string): string | undefined => {
    const at = process.argv.indexOf(`--${name}`);
    return at < 0 ? undefined : process.argv[at + 1];
  };
  const postgres = arg('postgres');
  if (postgres !== undefined) {
    const queuedRows = Number(arg('queued') ?? 1_000_000);
    const endpoints = await runPostgresEndpoints(postgres, queuedRows);
    process.stdout.write(`PostgreSQL: data endpoints with ${queuedRows.toLocaleString('en')} evaluations queued (p50 / max ms):\n`);
    for (const [name, t] of Object.entries(endpoints)) process.stdout.write(`  ${name.padEnd(36)} ${t.p50Ms.toFixed(2).padStart(8)} ${t.maxMs.toFixed(2).padStart(8)}\n`);
    process.exit(0);
  }
  const result = await runDashboardBench({
    ...(arg('rounds') === undefined ? {} : { rounds: Number(arg('rounds')) }),
    ...(arg('queued') === undefined ? {} : { queued: Number(arg('queued')) }),
    ...(arg('drain') === undefined ? {} : { drain: Number(arg('drain')) }),
  });
  if (process.argv.includes('--json')) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else {
    process.stdout.write(`no-op throughput with the page polling / without: median ${result.throughputRatio.toFixed(3)} (rounds ${result.throughputRatios.map((r) => r.toFixed(3)).join(', ')})\n`);
    process.stdout.write(`data endpoints with ${result.queued.toLocaleString('en')} evaluations queued (p50 / max ms):\n`);
    for (const [name, t] of Object.entries(result.endpoints)) process.stdout.write(`  ${name.padEnd(36)} ${t.p50Ms.toFixed(2).padStart(8)} ${t.maxMs.toFixed(2).padStart(8)}\n`);
  }
}
