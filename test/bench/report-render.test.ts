/**
 * The `--report` page: built from a made-up run (no benchmark is run, nothing is timed), checked to be
 * self-contained, then rendered in headless Chromium (Debian package `chromium`): the page's own check, run after
 * layout, must find every chart laid out with a non-empty plot. Skipped, saying so, when Chromium is not installed.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, test } from 'node:test';
import { Latency } from '../../bench/lib/latency.js';
import { distributionOf, type LatencyChart } from '../../bench/lib/quantiles.js';
import { renderReport, writeReport, type SuiteReport } from '../../bench/report/index.js';
import type { FanOutPoint } from '../../bench/fan-out.bench.js';
import type { BackoffSweepPoint, TaskRetrySweepPoint, ThreadSweepPoint } from '../../bench/sweeps.js';

/** A deterministic latency distribution: a log-normal-ish body around `centerUs` and a tail. */
function latency(centerUs: number, samples: number, seed: number): Latency {
  const l = new Latency();
  let x = seed;
  const random = (): number => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
  for (let i = 0; i < samples; i++) {
    const u = random();
    const tail = u > 0.98 ? 20 * random() : 1;
    l.recordUs(centerUs * Math.exp((random() - 0.5) * 1.2) * tail);
  }
  return l;
}

const summary = (l: Latency) => l.summary();

function sample(): SuiteReport {
  const charts: LatencyChart[] = [
    { id: 'engine-idle-latency', title: 'Idle dispatch latency', threads: 2, series: [distributionOf('engine', latency(40, 2000, 1)), distributionOf('raw Piscina', latency(13, 2000, 2))] },
    { id: 'engine-cancel-latency', title: 'Cancel latency', threads: 2, series: [distributionOf('engine', latency(25, 100, 3)), distributionOf('raw Piscina <abort>', latency(500, 100, 4))] },
  ];
  const threads: ThreadSweepPoint[] = [1, 2, 3, 4].map((t) => {
    const e = latency(150 + 20 * t, 3000, 10 + t);
    const p = latency(120 + 10 * t, 3000, 20 + t);
    return {
      threads: t,
      engineOpsPerSec: 90_000 + 10_000 * t,
      piscinaOpsPerSec: 35_000,
      throughputRatio: (90_000 + 10_000 * t) / 35_000,
      idle: { engine: summary(latency(36, 200, 30 + t)), piscina: summary(latency(13, 200, 40 + t)) },
      loaded: { rate: 10_000, engine: summary(e), piscina: summary(p) },
      distributions: { loadedEngine: distributionOf(`engine, ${t} threads`, e), loadedPiscina: distributionOf(`raw Piscina, ${t} threads`, p) },
    };
  });
  const backoff: BackoffSweepPoint[] = [
    [5, 5, 7.4, 115],
    [5, 20, 4.8, 128],
    [20, 80, 3.4, 173],
    [80, 80, 2.8, 160],
    [20, 20, 4.5, 130, 1],
  ].map(([initial, step, dps, mean, control]) => ({
    config: { label: `${initial}/${step}${control === 1 ? ' + backoff 2000/5000' : ''}`, initialNackDelayMs: initial!, subsequentNackDelayMs: step!, ...(control === 1 ? { control: true, backoff: { baselineMs: 2000, limitMs: 5000 } } : {}) },
    outageMs: 200,
    evaluations: 100,
    succeeded: 100,
    failed: 0,
    deliveriesPerSuccess: dps!,
    failedDeliveriesPerSec: Math.round(((dps! - 1) * 100 * 1000) / 200),
    timeToSuccess: { p50Ms: mean!, p99Ms: mean! * 1.8, maxMs: mean! * 2, meanMs: mean! },
    overshoot: { p50Ms: step! / 2, p99Ms: step! * 2, maxMs: step! * 2, meanMs: step! / 2 },
    wallMs: 300,
  }));
  const taskRetry: TaskRetrySweepPoint[] = [
    [5, 80, 4.0, 117],
    [20, 200, 3.3, 186],
    [80, 800, 2.6, 266],
  ].map(([baselineMs, limitMs, aps, mean]) => ({
    config: { label: `${baselineMs}/${limitMs}`, baselineMs: baselineMs!, limitMs: limitMs! },
    outageMs: 200,
    runs: 100,
    succeeded: 100,
    failed: 0,
    attemptsPerSuccess: aps!,
    failedAttemptsPerSec: Math.round(((aps! - 1) * 100 * 1000) / 200),
    timeToSuccess: { p50Ms: mean!, p99Ms: mean! * 1.6, maxMs: mean! * 1.7, meanMs: mean! },
    overshoot: { p50Ms: limitMs! / 4, p99Ms: limitMs! / 2, maxMs: limitMs! / 2, meanMs: limitMs! / 4 },
    wallMs: 400,
  }));
  const fanOut: FanOutPoint[] = [0.2, 1].flatMap((costMs) =>
    [1, 2, 4, 8, 16].flatMap((threads) =>
      [0, 10].map((writes) => ({
        costMs,
        threads,
        writes,
        evaluations: 10_000,
        mainUsPerEval: 12 + writes * 1.5 + (threads > 2 ? 1 : 0),
        evalsPerSec: Math.round((1000 / costMs) * Math.min(threads, 2)),
        piscinaMainUsPerTask: 40 + threads,
        piscinaPerSec: Math.round((800 / costMs) * Math.min(threads, 2)),
      })),
    ),
  );
  return {
    suite: 'tickpool-bench',
    schema: 1,
    generatedAt: '2026-01-01T00:00:00.000Z',
    machine: { node: 'v20.0.0', v8: '11', platform: 'linux', arch: 'x64', cpus: 2, cpuModel: 'Test CPU <&>', totalMemoryGiB: 8 },
    options: { scopes: ['broker', 'engine', 'tasks'], profile: 'full', quick: false, threads: 2, sweepThreads: [1, 2, 3, 4], sweeps: true, check: false, json: undefined, report: 'x' },
    ratios: [{ id: 'engine.throughput', scope: 'engine', name: 'throughput', ratio: 2.9, baseline: 'raw piscina.run()', threads: 2 }],
    floors: [{ floor: 'engine throughput / raw piscina.run()', benchmark: 'throughput', resultId: 'engine.throughput', value: 2.9, min: 1, unit: '×', goal: '≥ 5×', pass: true, attempts: 1 }],
    passed: true,
    results: [
      { scope: 'engine', id: 'engine.throughput', name: 'throughput', ratio: 2.9, baseline: 'raw piscina.run()', opsPerSec: 100_000, baselineOpsPerSec: 35_000, threads: 2 },
      { scope: 'broker', id: 'broker.cycle-x', name: 'cycle <script>alert(1)</script>', opsPerSec: 1_200_000, unit: 'cycles/s' },
    ],
    latency: charts,
    sweeps: { threads, backoff, taskRetry, fanOut },
    skipped: [{ benchmark: 'tasks', reason: 'bench/tasks.bench.ts is not in this tree yet' }],
    errors: [],
    durationsMs: { broker: 1 },
  };
}

/** 2 per latency chart, 3 for the thread sweep, 2 for each backoff sweep, 1 for the fan-out. */
const EXPECTED_CHARTS = 2 * 2 + 3 + 2 + 2 + 1;

test('the page is self-contained, escapes what it prints, and has every chart', () => {
  const html = renderReport(sample());
  assert.doesNotMatch(html, /<(script|link|img|iframe)[^>]+(src|href)=/i, 'no external resource');
  assert.doesNotMatch(html, /https?:\/\/(?!www\.w3\.org\/2000\/svg)/, 'no URL other than the SVG namespace');
  assert.doesNotMatch(html, /<script>alert/, 'benchmark names are escaped');
  assert.match(html, /Test CPU &lt;&amp;&gt;/);
  assert.equal((html.match(/<svg [^>]*class="chart"/g) ?? []).length, EXPECTED_CHARTS);
  for (const id of ['engine-idle-latency-histogram', 'engine-idle-latency-percentiles', 'thread-sweep-throughput', 'thread-sweep-latency', 'thread-sweep-loaded-percentiles', 'backoff-sweep-time', 'backoff-sweep-overshoot', 'task-retry-sweep-time', 'task-retry-sweep-overshoot', 'fan-out-main-cpu']) {
    assert.match(html, new RegExp(`data-chart="${id}"`), id);
  }
  assert.doesNotMatch(html.replace(/<script>[\s\S]*?<\/script>/g, ''), /NaN|Infinity/, 'every coordinate and figure is finite');
  assert.match(html, /<h2>Ratios<\/h2>[\s\S]*<h2>Floors<\/h2>[\s\S]*<h2>Latency histograms<\/h2>[\s\S]*<h2>Thread-count sweep<\/h2>[\s\S]*<h2>Backoff sweep: evaluation[\s\S]*<h2>Backoff sweep: task retries[\s\S]*<h2>Main thread per evaluation<\/h2>/, 'ratios first');
});

/** `$CHROMIUM_PATH` when set (only it), else Debian's `/usr/bin/chromium`. */
function findChromium(): string | undefined {
  const configured = process.env['CHROMIUM_PATH'];
  const candidates = configured !== undefined && configured !== '' ? [configured] : ['/usr/bin/chromium', '/usr/bin/chromium-browser'];
  return candidates.find((p) => existsSync(p));
}

const chromium = findChromium();
const dirs: string[] = [];
after(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

function run(file: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: 120_000, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(Object.assign(error, { stderr }));
      else resolve({ stdout, stderr });
    });
  });
}

test(
  'headless Chromium lays out every chart of the report',
  { skip: chromium === undefined ? `Chromium is not installed (looked for ${process.env['CHROMIUM_PATH'] || '/usr/bin/chromium'}): apt-get install -y chromium (Debian) to run this render test` : false },
  async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tickpool-report-'));
    dirs.push(dir);
    const page = await writeReport(join(dir, 'report'), sample());
    const json = JSON.parse(await readFile(join(dir, 'report', 'results.json'), 'utf8')) as SuiteReport;
    assert.equal(json.suite, 'tickpool-bench');
    const flags = [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
      `--user-data-dir=${join(dir, 'profile')}`,
      '--window-size=1280,4000',
    ];
    const { stdout } = await run(chromium!, [...flags, '--dump-dom', pathToFileURL(page).href]);
    const root = /<html[^>]*>/.exec(stdout)?.[0] ?? '';
    assert.match(root, /data-render="ok"/, `the page's layout check: ${root}`);
    assert.match(root, new RegExp(`data-render-charts="${EXPECTED_CHARTS}"`), root);

    const png = join(dir, 'report.png');
    await run(chromium!, [...flags, `--screenshot=${png}`, pathToFileURL(page).href]);
    const bytes = await readFile(png);
    assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG');
    assert.ok((await stat(png)).size > 20_000, 'a screenshot with something drawn in it');
  },
);
