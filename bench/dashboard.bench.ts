/**
 * What the dashboard costs. Two rows:
 * - no-op throughput of an engine whose dashboard a page polls every second (the page's requests: overview,
 *   evaluations, tasks, as `app.js` makes them), against the same engine with no one looking, in alternating rounds
 *   in one process: the ratio (goal ≥ 0.95);
 * - how long each data endpoint answers with 1,000,000 evaluations queued (a paused type holds them): p50 and max of
 *   repeated requests (goal < 50 ms).
 *
 *   node --expose-gc dist/bench/dashboard.bench.js [--rounds 6] [--queued 1000000] [--json]
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { createDashboard } from '../src/dashboard/dashboard.js';
import { createEngine } from '../src/engine/engine.js';

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
    const endpoints: Record<string, { p50Ms: number; maxMs: number }> = {};
    const paths = {
      overview: 'api/overview',
      'evaluations ready, newest': 'api/evaluations?state=ready&limit=50',
      'evaluations ready, oldest, page 2': '',
      'evaluations failed (none)': 'api/evaluations?state=failed&limit=50',
      'evaluation detail': 'api/evaluations/q999999',
      tasks: 'api/tasks',
    };
    const first = (await (await fetch(`${base}/api/evaluations?state=ready&order=oldest&limit=50`)).json()) as { nextCursor?: string };
    paths['evaluations ready, oldest, page 2'] = `api/evaluations?state=ready&order=oldest&limit=50&cursor=${encodeURIComponent(first.nextCursor ?? '')}`;
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
