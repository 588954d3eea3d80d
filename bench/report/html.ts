/**
 * The report page: one self-contained HTML file (inline CSS and SVG, no external resource) with the ratios first,
 * the floors, the latency histograms and percentile curves, the thread-count sweep, the backoff sweep and main's CPU per
 * evaluation against threads (fan-out).
 *
 * A short inline script checks, once the page is laid out, that every chart has a size and a non-empty plot, and
 * writes the verdict to `<html data-render>`; the render test reads it back from headless Chromium.
 */
import { formatValue } from '../floors.js';
import type { Distribution, LatencyChart } from '../lib/quantiles.js';
import type { BenchResult } from '../lib/types.js';
import type { FanOutPoint } from '../fan-out.bench.js';
import type { LoadCurve } from '../load-curve.bench.js';
import type { BackoffSweepPoint, TaskRetrySweepPoint, ThreadSweepPoint } from '../sweeps.js';
import { histogramOf, logBins, ninesOf } from './histogram.js';
import type { SuiteReport } from './model.js';
import { COLORS, escapeXml as esc, formatMicros, formatNumber, renderChart, type SeriesSpec } from './svg.js';

const PALETTE = [COLORS.engine, COLORS.baseline, COLORS.third, COLORS.fourth, '#c0392b', '#16a085', '#7f8c8d', '#d35400'];

const NINES_TICKS = [
  { value: 0, label: '0%' },
  { value: 1, label: '90%' },
  { value: 2, label: '99%' },
  { value: 3, label: '99.9%' },
  { value: 4, label: '99.99%' },
];

function histogramChart(chart: LatencyChart): string {
  const edges = logBins(chart.series);
  const series: SeriesSpec[] = chart.series.map((s, i) => {
    const shares = histogramOf(s, edges);
    const points: Array<[number, number]> = shares.map((share, b) => [edges[b]!, share]);
    if (edges.length > 0) points.push([edges[edges.length - 1]!, 0]);
    return { label: `${s.label} (n=${s.count.toLocaleString('en-US')})`, color: PALETTE[i % PALETTE.length]!, kind: 'step-area', points };
  });
  return renderChart({
    id: `${chart.id}-histogram`,
    title: 'Histogram',
    x: { label: 'latency (log scale)', scale: 'log', format: formatMicros, ...(edges.length > 0 ? { min: edges[0]!, max: edges[edges.length - 1]! } : {}) },
    y: { label: '% of samples per bin', scale: 'linear', min: 0 },
    series,
  });
}

function percentileSeries(s: Distribution, color: string, dashed = false): SeriesSpec {
  const points = s.quantiles.filter((q) => q[0] < 100).map((q) => [ninesOf(q[0]), q[1]] as [number, number]);
  return {
    label: s.label,
    color,
    kind: 'line',
    dashed,
    marker: 'none',
    points,
    tooltips: s.quantiles.filter((q) => q[0] < 100).map((q) => `${s.label}: p${q[0]} = ${formatMicros(q[1])}`),
  };
}

function percentileChart(id: string, title: string, series: SeriesSpec[]): string {
  return renderChart({
    id,
    title,
    x: { label: 'percentile', scale: 'linear', min: 0, max: 4, ticks: NINES_TICKS },
    y: { label: 'latency (log scale)', scale: 'log', format: formatMicros },
    series,
  });
}

function latencySection(charts: readonly LatencyChart[]): string {
  if (charts.length === 0) return '';
  const parts = charts.map((chart) => {
    const stats = chart.series
      .map((s) => {
        const at = (p: number): string => formatMicros(s.quantiles.find((q) => q[0] === p)?.[1] ?? Number.NaN);
        return `<li><b>${esc(s.label)}</b>: p50 ${at(50)}, p99 ${at(99)}, p99.9 ${at(99.9)} (n=${s.count.toLocaleString('en-US')})</li>`;
      })
      .join('');
    return `<div class="figure"><h3>${esc(chart.title)} <small>(${chart.threads} thread${chart.threads === 1 ? '' : 's'})</small></h3>
<div class="row">${histogramChart(chart)}${percentileChart(`${chart.id}-percentiles`, 'By percentile', chart.series.map((s, i) => percentileSeries(s, PALETTE[i % PALETTE.length]!)))}</div>
<ul class="stats">${stats}</ul></div>`;
  });
  return `<section id="latency"><h2>Latency histograms</h2>
<p>Each engine latency next to its baseline, measured in the same run on the same thread count (Node's HDR-style
<code>perf_hooks.createHistogram</code>). Left: share of samples per latency bin (log scale). Right: latency by
percentile (HDR plot: each grid step adds a nine).</p>${parts.join('\n')}</section>`;
}

function threadSection(points: readonly ThreadSweepPoint[]): string {
  if (points.length === 0) return '';
  const t = points.map((p) => p.threads);
  const throughput = renderChart({
    id: 'thread-sweep-throughput',
    title: 'Throughput by thread count',
    x: { label: 'pool threads', scale: 'linear', min: 0, max: Math.max(...t) + 1, ticks: t.map((v) => ({ value: v, label: String(v) })) },
    y: { label: 'no-op evaluations (tasks) per second', scale: 'linear', min: 0 },
    series: [
      { label: 'engine', color: COLORS.engine, kind: 'line', points: points.map((p) => [p.threads, p.engineOpsPerSec]), tooltips: points.map((p) => `engine, ${p.threads} threads: ${formatNumber(p.engineOpsPerSec)}/s (${p.throughputRatio}× raw Piscina)`) },
      { label: 'raw piscina.run()', color: COLORS.baseline, kind: 'line', dashed: true, marker: 'square', points: points.map((p) => [p.threads, p.piscinaOpsPerSec]) },
    ],
  });
  const rate = points[0]!.loaded.rate;
  const latency = renderChart({
    id: 'thread-sweep-latency',
    title: `Dispatch latency by thread count (at ${formatNumber(rate)}/s offered, and idle)`,
    x: { label: 'pool threads', scale: 'linear', min: 0, max: Math.max(...t) + 1, ticks: t.map((v) => ({ value: v, label: String(v) })) },
    y: { label: 'latency (log scale)', scale: 'log', format: formatMicros },
    series: [
      { label: 'engine p50, loaded', color: COLORS.engine, kind: 'line', points: points.map((p) => [p.threads, p.loaded.engine.p50Us]) },
      { label: 'engine p99, loaded', color: COLORS.engine, kind: 'line', dashed: true, marker: 'diamond', points: points.map((p) => [p.threads, p.loaded.engine.p99Us]) },
      { label: 'piscina p50, loaded', color: COLORS.baseline, kind: 'line', marker: 'square', points: points.map((p) => [p.threads, p.loaded.piscina.p50Us]) },
      { label: 'piscina p99, loaded', color: COLORS.baseline, kind: 'line', dashed: true, marker: 'diamond', points: points.map((p) => [p.threads, p.loaded.piscina.p99Us]) },
      { label: 'engine p50, idle', color: COLORS.third, kind: 'line', points: points.map((p) => [p.threads, p.idle.engine.p50Us]) },
      { label: 'piscina p50, idle', color: COLORS.fourth, kind: 'line', marker: 'square', points: points.map((p) => [p.threads, p.idle.piscina.p50Us]) },
    ],
  });
  const curves = percentileChart(
    'thread-sweep-loaded-percentiles',
    `Loaded dispatch latency by percentile (${formatNumber(rate)}/s)`,
    points.flatMap((p, i) => [
      percentileSeries(p.distributions.loadedEngine, PALETTE[i % PALETTE.length]!),
      percentileSeries(p.distributions.loadedPiscina, PALETTE[i % PALETTE.length]!, true),
    ]),
  );
  const rows = points
    .map(
      (p) => `<tr><td>${p.threads}</td><td class="num"><b>${p.throughputRatio.toFixed(2)}×</b></td><td class="num">${formatNumber(p.engineOpsPerSec)}</td><td class="num">${formatNumber(p.piscinaOpsPerSec)}</td>
<td class="num">${formatMicros(p.idle.engine.p50Us)} / ${formatMicros(p.idle.engine.p99Us)}</td><td class="num">${formatMicros(p.idle.piscina.p50Us)} / ${formatMicros(p.idle.piscina.p99Us)}</td>
<td class="num">${formatMicros(p.loaded.engine.p50Us)} / ${formatMicros(p.loaded.engine.p99Us)} / ${formatMicros(p.loaded.engine.p999Us)}</td><td class="num">${formatMicros(p.loaded.piscina.p50Us)} / ${formatMicros(p.loaded.piscina.p99Us)} / ${formatMicros(p.loaded.piscina.p999Us)}</td></tr>`,
    )
    .join('');
  return `<section id="thread-sweep"><h2>Thread-count sweep</h2>
<p>At each thread count, in the same run: no-op evaluations per second through the whole engine (enqueue → scheduler
on a thread → ack) against raw <code>piscina.run()</code> of a no-op; dispatch latency (enqueue → scheduler entry)
idle, one at a time, and under a steady offered load of ${formatNumber(rate)}/s in 1 ms bursts, against Piscina's
one-way time (run → task entry) under the same load.</p>
<div class="row">${throughput}${latency}</div><div class="row">${curves}</div>
<table><thead><tr><th>threads</th><th>engine / piscina</th><th>engine ops/s</th><th>piscina ops/s</th><th>idle engine p50 / p99</th><th>idle piscina p50 / p99</th><th>loaded engine p50 / p99 / p99.9</th><th>loaded piscina p50 / p99 / p99.9</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}

function loadCurveSection(curves: readonly LoadCurve[]): string {
  if (curves.length === 0) return '';
  const palette = [COLORS.baseline, COLORS.engine, COLORS.third, COLORS.fourth];
  const rates = curves[0]!.points.map((p) => p.rate);
  const chart = renderChart({
    id: 'load-curve-p99',
    title: 'Dispatch latency p99 against offered load (open loop)',
    x: { label: 'offered load, jobs/s (log scale)', scale: 'log', format: (v: number) => formatNumber(v) },
    y: { label: 'p99 latency (log scale)', scale: 'log', format: formatMicros },
    series: curves.map((c, i) => ({
      label: `${c.label} p99`,
      color: palette[i % palette.length]!,
      kind: 'line' as const,
      ...(i === 0 ? { dashed: true, marker: 'square' as const } : {}),
      points: c.points.map((p) => [p.rate, p.p99Us] as [number, number]),
      tooltips: c.points.map((p) => `${c.label} at ${formatNumber(p.rate)}/s: p50 ${formatMicros(p.p50Us)}, p99 ${formatMicros(p.p99Us)}, p99.9 ${formatMicros(p.p999Us)}`),
    })),
  });
  const head = curves.map((c) => `<th>${esc(c.label)} p50 / p99 / p99.9</th>`).join('');
  const rows = rates
    .map((rate, i) => `<tr><td class="num">${formatNumber(rate)}</td>${curves.map((c) => {
      const p = c.points[i];
      return `<td class="num">${p === undefined ? '' : `${formatMicros(p.p50Us)} / ${formatMicros(p.p99Us)} / ${formatMicros(p.p999Us)}`}</td>`;
    }).join('')}</tr>`)
    .join('');
  return `<section id="load-curve"><h2>Latency against offered load</h2>
<p>Each side is offered jobs open loop at fixed rates; a job's latency is its scheduler's (task's) entry time minus
the time it was due to be sent, so a sender that falls behind shows as latency (no coordinated omission).</p>
<div class="row">${chart}</div>
<table><thead><tr><th>offered /s</th>${head}</tr></thead><tbody>${rows}</tbody></table></section>`;
}

/**
 * Main-thread CPU per evaluation against the thread count: one line per job cost and write count, raw Piscina's CPU
 * per task (no writes) dashed beside each job cost. A flat line is the goal: main is one thread.
 */
function fanOutSection(points: readonly FanOutPoint[]): string {
  if (points.length === 0) return '';
  const costs = [...new Set(points.map((p) => p.costMs))];
  const writes = [...new Set(points.map((p) => p.writes))];
  const series: SeriesSpec[] = [];
  let colour = 0;
  for (const costMs of costs) {
    for (const w of writes) {
      const line = points.filter((p) => p.costMs === costMs && p.writes === w).sort((a, b) => a.threads - b.threads);
      if (line.length === 0) continue;
      series.push({
        label: `tickpool, ${costMs} ms jobs, ${w} writes`,
        color: PALETTE[colour++ % PALETTE.length]!,
        kind: 'line',
        points: line.map((p) => [p.threads, p.mainUsPerEval] as [number, number]),
        tooltips: line.map((p) => `${costMs} ms, ${p.threads} threads, ${w} writes: main ${p.mainUsPerEval} µs per evaluation, ${formatNumber(p.evalsPerSec)}/s`),
      });
    }
    const piscina = points
      .filter((p) => p.costMs === costMs && p.writes === writes[0] && p.piscinaMainUsPerTask !== undefined)
      .sort((a, b) => a.threads - b.threads);
    if (piscina.length > 0) {
      series.push({
        label: `raw Piscina, ${costMs} ms tasks`,
        color: PALETTE[colour++ % PALETTE.length]!,
        kind: 'line',
        dashed: true,
        marker: 'square',
        points: piscina.map((p) => [p.threads, p.piscinaMainUsPerTask!] as [number, number]),
        tooltips: piscina.map((p) => `raw Piscina, ${costMs} ms, ${p.threads} threads: main ${p.piscinaMainUsPerTask} µs per task, ${formatNumber(p.piscinaPerSec ?? 0)}/s`),
      });
    }
  }
  const chart = renderChart({
    id: 'fan-out-main-cpu',
    title: 'Main-thread CPU per evaluation against pool threads',
    x: { label: 'pool threads (log scale)', scale: 'log', format: (v: number) => formatNumber(v) },
    y: { label: 'main CPU per evaluation (log scale)', scale: 'log', format: formatMicros },
    series,
  });
  const rows = [...points]
    .sort((a, b) => a.costMs - b.costMs || a.writes - b.writes || a.threads - b.threads)
    .map((p) => `<tr><td class="num">${p.costMs}</td><td class="num">${p.threads}</td><td class="num">${p.writes}</td><td class="num">${formatMicros(p.mainUsPerEval)}</td><td class="num">${formatNumber(p.evalsPerSec)}</td><td class="num">${p.piscinaMainUsPerTask === undefined ? '' : formatMicros(p.piscinaMainUsPerTask)}</td><td class="num">${p.piscinaPerSec === undefined ? '' : formatNumber(p.piscinaPerSec)}</td></tr>`)
    .join('');
  return `<section id="fan-out"><h2>Main thread per evaluation</h2>
<p>Main is one thread: its CPU time per evaluation caps the engine at one over that cost, whatever the cores. Each
point is one drain of <code>engine.run()</code> calls, all in flight at once, main's CPU time read from the kernel;
raw <code>piscina.run()</code> of the same CPU work on the same threads beside it (it has no state to write). With
more threads than cores the threads oversubscribe them; main's CPU per evaluation is still its own cost.</p>
<div class="row">${chart}</div>
<table><thead><tr><th>job ms</th><th>threads</th><th>writes a plan</th><th>main per evaluation</th><th>evaluations/s</th><th>Piscina main per task</th><th>Piscina tasks/s</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}

/** One point of a retry sweep, whichever knob it turns. */
interface RetryPoint {
  readonly label: string;
  readonly control: boolean;
  /** [column, value] of the knobs. */
  readonly knobs: ReadonlyArray<readonly [string, number]>;
  /** Deliveries (or attempts) per success. */
  readonly load: number;
  readonly failedPerSec: number;
  readonly timeToSuccess: BackoffSweepPoint['timeToSuccess'];
  readonly overshoot: BackoffSweepPoint['overshoot'];
  readonly succeeded: number;
  readonly total: number;
  readonly failed: number;
}

function retrySection(id: string, title: string, intro: string, unit: string, points: readonly RetryPoint[], legend: string): string {
  if (points.length === 0) return '';
  const grid = points.filter((p) => !p.control);
  const control = points.filter((p) => p.control);
  const scatter = (chart: string, chartTitle: string, y: (p: RetryPoint) => number, whisker: (p: RetryPoint) => number, yLabel: string): string =>
    renderChart({
      id: `${id}-${chart}`,
      title: chartTitle,
      x: { label: `retry load: ${unit} per success`, scale: 'linear', min: 1 },
      y: { label: yLabel, scale: 'linear', min: 0 },
      series: [
        {
          label: `${legend}; whisker = p99`,
          color: COLORS.engine,
          kind: 'scatter',
          points: grid.map((p) => [p.load, y(p)]),
          whiskers: grid.map(whisker),
          pointLabels: grid.map((p) => p.label),
          tooltips: grid.map((p) => `${p.label}: ${p.load} ${unit}/success, ${p.failedPerSec} failed ${unit}/s during the outage, time-to-success mean ${p.timeToSuccess.meanMs} ms p99 ${p.timeToSuccess.p99Ms} ms, overshoot p50 ${p.overshoot.p50Ms} ms`),
        },
        ...(control.length === 0
          ? []
          : [
              {
                label: 'control: same delays + slow engine backoff',
                color: COLORS.baseline,
                kind: 'scatter' as const,
                marker: 'diamond' as const,
                points: control.map((p) => [p.load, y(p)] as [number, number]),
                whiskers: control.map(whisker),
                tooltips: control.map((p) => `${p.label}: ${p.load} ${unit}/success`),
              },
            ]),
      ],
    });
  const knobNames = points[0]!.knobs.map((k) => k[0]);
  const rows = points
    .map(
      (p) => `<tr${p.control ? ' class="control"' : ''}><td>${esc(p.label)}</td>${p.knobs.map((k) => `<td class="num">${k[1]}</td>`).join('')}
<td class="num"><b>${p.load.toFixed(2)}</b></td><td class="num">${formatNumber(p.failedPerSec)}</td><td class="num">${p.timeToSuccess.meanMs} / ${p.timeToSuccess.p50Ms} / ${p.timeToSuccess.p99Ms}</td>
<td class="num">${p.overshoot.p50Ms} / ${p.overshoot.p99Ms}</td><td class="num">${p.succeeded}/${p.total}${p.failed > 0 ? ` (${p.failed} failed)` : ''}</td></tr>`,
    )
    .join('');
  return `<section id="${esc(id)}"><h2>${esc(title)}</h2><p>${intro}</p>
<div class="row">${scatter('time', 'Time-to-success against retry load', (p) => p.timeToSuccess.meanMs, (p) => p.timeToSuccess.p99Ms, 'start → success, mean ms')}${scatter('overshoot', 'Overshoot against retry load', (p) => p.overshoot.p50Ms, (p) => p.overshoot.p99Ms, 'recovery → success, p50 ms')}</div>
<table><thead><tr><th>setting</th>${knobNames.map((k) => `<th>${esc(k)}</th>`).join('')}<th>${esc(unit)} per success</th><th>failed ${esc(unit)}/s</th><th>time-to-success mean / p50 / p99 ms</th><th>overshoot p50 / p99 ms</th><th>succeeded</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}

function backoffSection(points: readonly BackoffSweepPoint[]): string {
  if (points.length === 0) return '';
  const first = points[0]!;
  return retrySection(
    'backoff-sweep',
    'Backoff sweep: evaluation redelivery under a failure-injecting scheduler',
    `A dependency is down for ${first.outageMs} ms while ${first.evaluations} evaluations arrive evenly; every delivery
before it recovers throws, the worker nacks, and the broker redelivers after its nack delay: <code>initialNackDelayMs</code>
after the first delivery (the baseline), then <code>(d − 1) × subsequentNackDelayMs</code> after the d-th (the step);
<code>deliveryLimit</code> (the cap, in deliveries) is set high so nothing fails. Short delays find the recovery
sooner but hammer the broken dependency; long ones spare it and overshoot. The engine's <code>backoff</code>
(baselineMs/limitMs) spaces dequeue retries, not redeliveries: the control point runs a very slow one with the
same nack delays, and lands on the same spot.`,
    'deliveries',
    points.map((p) => ({
      label: p.config.label,
      control: p.config.control === true,
      knobs: [
        ['initialNackDelayMs', p.config.initialNackDelayMs],
        ['subsequentNackDelayMs', p.config.subsequentNackDelayMs],
      ],
      load: p.deliveriesPerSuccess,
      failedPerSec: p.failedDeliveriesPerSec,
      timeToSuccess: p.timeToSuccess,
      overshoot: p.overshoot,
      succeeded: p.succeeded,
      total: p.evaluations,
      failed: p.failed,
    })),
    'broker nack delays initial/step (ms)',
  );
}

function taskRetrySection(points: readonly TaskRetrySweepPoint[]): string {
  if (points.length === 0) return '';
  const first = points[0]!;
  return retrySection(
    'task-retry-sweep',
    'Backoff sweep: task retries under a failure-injecting handler',
    `The same outage of ${first.outageMs} ms for ${first.runs} task runs started evenly over it (<code>forceRun</code>);
every attempt before the recovery fails retryably and <code>engine.tasks</code> retries it after the engine's
<code>backoff</code>: <code>baselineMs × 4^k</code>, capped at <code>limitMs</code> (<code>retry</code> is high so no
run ends failed). The baseline sets how hard the first seconds hit the dependency; the limit sets how long a run
can sleep past the recovery.`,
    'attempts',
    points.map((p) => ({
      label: p.config.label,
      control: false,
      knobs: [
        ['baselineMs', p.config.baselineMs],
        ['limitMs', p.config.limitMs],
      ],
      load: p.attemptsPerSuccess,
      failedPerSec: p.failedAttemptsPerSec,
      timeToSuccess: p.timeToSuccess,
      overshoot: p.overshoot,
      succeeded: p.succeeded,
      total: p.runs,
      failed: p.failed,
    })),
    'engine backoff baselineMs/limitMs',
  );
}

function resultsTable(results: readonly BenchResult[]): string {
  const rows = results
    .map((r) => {
      const lat = r.p50Us === undefined ? '' : `${formatMicros(r.p50Us)} / ${r.p99Us === undefined ? '' : formatMicros(r.p99Us)}${r.p999Us === undefined ? '' : ` / ${formatMicros(r.p999Us)}`}`;
      const base = r.baselineP50Us === undefined ? (r.baselineOpsPerSec === undefined ? '' : `${formatNumber(r.baselineOpsPerSec)}/s`) : `${formatMicros(r.baselineP50Us)} / ${r.baselineP99Us === undefined ? '' : formatMicros(r.baselineP99Us)}`;
      return `<tr><td>${esc(r.scope)}</td><td>${esc(r.name)}</td><td class="num">${r.ratio === undefined ? '' : `<b>${r.ratio.toFixed(2)}×</b>`}</td><td>${esc(r.baseline ?? '')}</td>
<td class="num">${r.opsPerSec === undefined ? '' : `${formatNumber(r.opsPerSec)} ${esc(r.unit ?? 'ops/s')}`}</td><td class="num">${lat}</td><td class="num">${base}</td><td class="notes">${esc(r.notes ?? '')}</td></tr>`;
    })
    .join('');
  return `<section id="results"><h2>All figures</h2><table><thead><tr><th>scope</th><th>benchmark</th><th>ratio</th><th>baseline</th><th>throughput</th><th>p50 / p99 / p99.9</th><th>baseline</th><th>notes</th></tr></thead><tbody>${rows}</tbody></table></section>`;
}

const CHECK_SCRIPT = `(function () {
  var root = document.documentElement;
  try {
    var charts = Array.prototype.slice.call(document.querySelectorAll('svg.chart'));
    var bad = [];
    charts.forEach(function (c) {
      var box = c.getBoundingClientRect();
      if (!(box.width > 0 && box.height > 0)) bad.push(c.getAttribute('data-chart') + ': not laid out');
      var plot = c.querySelector('g.plot');
      var inner = plot ? plot.getBBox() : { width: 0, height: 0 };
      if (Number(c.getAttribute('data-points')) > 0 && !(inner.width > 0 || inner.height > 0)) bad.push(c.getAttribute('data-chart') + ': empty plot');
      if (/NaN|Infinity/.test(c.outerHTML)) bad.push(c.getAttribute('data-chart') + ': non-finite coordinates');
    });
    root.setAttribute('data-render-charts', String(charts.length));
    root.setAttribute('data-render', bad.length ? 'bad: ' + bad.join('; ') : 'ok');
  } catch (e) {
    root.setAttribute('data-render', 'error: ' + e);
  }
})();`;

const STYLE = `body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d232b;margin:24px auto;max-width:1200px;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #e3e6ea;padding-bottom:4px}h3{font-size:15px;margin:16px 0 6px}
.meta{color:#5b6470}.badge{display:inline-block;padding:2px 8px;border-radius:4px;font-weight:600}.pass{background:#d9f2e1;color:#17693a}.fail{background:#fbdcdc;color:#9b1c1c}.none{background:#eef0f3;color:#5b6470}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px;width:100%}th,td{border-bottom:1px solid #e3e6ea;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f6f7f9}
td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}td.notes{color:#5b6470;font-size:12px}tr.control td{background:#fff8ef}
.row{display:flex;flex-wrap:wrap;gap:16px}svg.chart{border:1px solid #e3e6ea;border-radius:4px;max-width:100%;height:auto}ul.stats{margin:4px 0 12px;color:#5b6470}code{background:#f3f4f6;padding:0 3px;border-radius:3px}`;

/** The whole page. */
export function renderReport(report: SuiteReport): string {
  const m = report.machine;
  const checked = report.floors.length > 0;
  const badge = !checked
    ? '<span class="badge none">floors not checked</span>'
    : report.passed
      ? '<span class="badge pass">all floors met</span>'
      : '<span class="badge fail">below a floor</span>';
  const ratioRows = report.ratios
    .map((r) => `<tr><td>${esc(r.scope)}</td><td>${esc(r.name)}</td><td class="num"><b>${r.ratio.toFixed(2)}×</b></td><td>${esc(r.baseline ?? '')}</td><td class="num">${r.threads ?? ''}</td></tr>`)
    .join('');
  const floorRows = report.floors
    .map(
      (c) => `<tr><td>${c.pass ? '<span class="badge pass">pass</span>' : '<span class="badge fail">FAIL</span>'}</td><td>${esc(c.benchmark)}</td><td class="num">${c.value === undefined ? esc(c.reason ?? '—') : esc(formatValue(c.value, c.unit))}</td>
<td class="num">≥ ${esc(formatValue(c.min, c.unit))}</td><td>${esc(c.goal)}</td><td class="num">${c.attempts}</td></tr>`,
    )
    .join('');
  const problems = [
    ...report.errors.map((e) => `<li><b>${esc(e.benchmark)}</b> failed: <code>${esc(e.error)}</code></li>`),
    ...report.skipped.map((s) => `<li><b>${esc(s.benchmark)}</b> skipped: ${esc(s.reason)}</li>`),
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>tickpool benchmarks — ${esc(report.generatedAt)}</title><style>${STYLE}</style></head>
<body>
<h1>tickpool benchmarks ${badge}</h1>
<p class="meta">${esc(report.generatedAt)} · Node ${esc(m.node)} · ${m.cpus} CPU${m.cpus === 1 ? '' : 's'} (${esc(m.cpuModel)}) · ${m.totalMemoryGiB} GiB · ${esc(m.platform)}/${esc(m.arch)}${m.commit === undefined ? '' : ` · commit ${esc(m.commit)}`}<br>
profile ${esc(report.options.profile)}${report.options.quick ? ' (quick)' : ''} · scopes ${esc(report.options.scopes.join(', '))} · ${report.options.threads} pool thread${report.options.threads === 1 ? '' : 's'} for every engine figure and its baseline</p>
${problems.length > 0 ? `<ul class="problems">${problems.join('')}</ul>` : ''}
<section id="ratios"><h2>Ratios</h2><p>Every engine figure against its baseline, measured in the same run on the same thread count (&gt; 1 = tickpool faster).</p>
<table><thead><tr><th>scope</th><th>benchmark</th><th>ratio</th><th>against</th><th>threads</th></tr></thead><tbody>${ratioRows}</tbody></table></section>
${checked ? `<section id="floors"><h2>Floors</h2><table><thead><tr><th></th><th>benchmark</th><th>figure (best run)</th><th>floor</th><th>goal</th><th>runs</th></tr></thead><tbody>${floorRows}</tbody></table></section>` : ''}
${latencySection(report.latency)}
${threadSection(report.sweeps.threads)}
${backoffSection(report.sweeps.backoff)}
${taskRetrySection(report.sweeps.taskRetry)}
${loadCurveSection(report.sweeps.loadCurves ?? [])}
${fanOutSection(report.sweeps.fanOut ?? [])}
${resultsTable(report.results)}
<script>${CHECK_SCRIPT}</script>
</body></html>
`;
}
