/**
 * A small SVG chart writer for the benchmark report: linear or log axes, line / step-area / scatter series,
 * native tooltips (`<title>`), no script and no external resource.
 */

export type ScaleKind = 'linear' | 'log';

export interface Tick {
  readonly value: number;
  readonly label: string;
}

export interface AxisSpec {
  readonly label: string;
  readonly scale: ScaleKind;
  readonly min?: number;
  readonly max?: number;
  /** Fixed ticks (otherwise computed). */
  readonly ticks?: readonly Tick[];
  readonly format?: (value: number) => string;
}

export interface SeriesSpec {
  readonly label: string;
  readonly color: string;
  readonly kind: 'line' | 'step-area' | 'scatter';
  readonly points: ReadonlyArray<readonly [number, number]>;
  readonly dashed?: boolean;
  readonly marker?: 'circle' | 'square' | 'diamond' | 'none';
  /** Per-point text drawn next to scatter points. */
  readonly pointLabels?: readonly string[];
  /** Per-point tooltip. */
  readonly tooltips?: readonly string[];
  /** Per-point upper whisker (scatter): a vertical line from the point up to this y. */
  readonly whiskers?: readonly number[];
}

export interface ChartSpec {
  readonly id: string;
  readonly title: string;
  readonly x: AxisSpec;
  readonly y: AxisSpec;
  readonly series: readonly SeriesSpec[];
  readonly width?: number;
  readonly height?: number;
  readonly note?: string;
}

export const COLORS = {
  engine: '#1f5fbf',
  baseline: '#e0701a',
  third: '#2a9d55',
  fourth: '#8e44ad',
  grid: '#e3e6ea',
  axis: '#5b6470',
  text: '#1d232b',
} as const;

export function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

/** Compact number: 1.2k, 35k, 1.5M; small values with up to 3 significant digits. */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs >= 1e9) return `${trim(value / 1e9)}G`;
  if (abs >= 1e6) return `${trim(value / 1e6)}M`;
  if (abs >= 1e4) return `${trim(value / 1e3)}k`;
  if (abs >= 100) return String(Math.round(value));
  if (abs === 0) return '0';
  return String(Number(value.toPrecision(3)));
}

function trim(value: number): string {
  return String(Number(value.toPrecision(3)));
}

/** Formats µs as µs / ms / s. */
export function formatMicros(us: number): string {
  if (us >= 1e6) return `${trim(us / 1e6)} s`;
  if (us >= 1000) return `${trim(us / 1000)} ms`;
  return `${trim(us)} µs`;
}

interface Scale {
  (value: number): number;
  readonly min: number;
  readonly max: number;
  readonly ticks: readonly Tick[];
}

function finite(values: number[]): number[] {
  return values.filter((v) => Number.isFinite(v));
}

function makeScale(axis: AxisSpec, values: number[], from: number, to: number): Scale {
  const format = axis.format ?? formatNumber;
  const data = finite(axis.scale === 'log' ? values.filter((v) => v > 0) : values);
  let min = axis.min ?? (data.length > 0 ? Math.min(...data) : 0);
  let max = axis.max ?? (data.length > 0 ? Math.max(...data) : 1);
  if (axis.scale === 'log') {
    if (!(min > 0)) min = max > 0 ? max / 10 : 1;
    if (!(max > 0)) max = min * 10;
    if (axis.min === undefined) min = 10 ** Math.floor(Math.log10(min) + 1e-9);
    if (axis.max === undefined) max = 10 ** Math.ceil(Math.log10(max) - 1e-9);
    if (max <= min) max = min * 10;
    const lo = Math.log10(min);
    const span = Math.log10(max) - lo;
    const ticks = axis.ticks ?? logTicks(min, max, format);
    const f = ((value: number) => from + ((Math.log10(Math.max(value, min / 1e3)) - lo) / span) * (to - from)) as Scale;
    return Object.assign(f, { min, max, ticks });
  }
  if (axis.min === undefined) min = Math.min(0, min);
  if (max <= min) max = min + 1;
  const step = niceStep((max - min) / 5);
  if (axis.max === undefined) max = Math.ceil(max / step - 1e-9) * step;
  const ticks: Tick[] = [];
  if (axis.ticks !== undefined) ticks.push(...axis.ticks);
  else for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step) ticks.push({ value: v, label: format(Number(v.toPrecision(12))) });
  const f = ((value: number) => from + ((value - min) / (max - min)) * (to - from)) as Scale;
  return Object.assign(f, { min, max, ticks });
}

function niceStep(raw: number): number {
  const power = 10 ** Math.floor(Math.log10(raw));
  const n = raw / power;
  return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * power;
}

function logTicks(min: number, max: number, format: (v: number) => string): Tick[] {
  const ticks: Tick[] = [];
  const decades = Math.log10(max / min);
  const multipliers = decades <= 2 ? [1, 2, 5] : decades <= 4 ? [1, 3] : [1];
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) {
    for (const m of multipliers) {
      const v = m * 10 ** e;
      if (v >= min * (1 - 1e-9) && v <= max * (1 + 1e-9)) ticks.push({ value: v, label: format(v) });
    }
  }
  return ticks;
}

function n(value: number): string {
  return Number.isFinite(value) ? value.toFixed(1) : '0';
}

function markerPath(kind: SeriesSpec['marker'], x: number, y: number): string {
  const r = 4.5;
  switch (kind) {
    case 'square':
      return `<rect x="${n(x - r)}" y="${n(y - r)}" width="${n(2 * r)}" height="${n(2 * r)}"`;
    case 'diamond':
      return `<path d="M${n(x)} ${n(y - r * 1.3)}L${n(x + r * 1.3)} ${n(y)}L${n(x)} ${n(y + r * 1.3)}L${n(x - r * 1.3)} ${n(y)}Z"`;
    default:
      return `<circle cx="${n(x)}" cy="${n(y)}" r="${r}"`;
  }
}

/** Renders one chart as an `<svg>` element (class `chart`, `data-chart` = id, `data-points` = drawn points). */
export function renderChart(spec: ChartSpec): string {
  const width = spec.width ?? 560;
  const height = spec.height ?? 320;
  // Two legend columns, or one when a label would not fit in half the width (~6 px per character at 11 px).
  const legendColumns = spec.series.some((s) => s.label.length * 6.2 + 30 > (width - 84) / 2) ? 1 : 2;
  const legendRows = Math.ceil(spec.series.length / legendColumns);
  const margin = { left: 64, right: 20, top: 34, bottom: 58 + legendRows * 18 };
  const plot = { x0: margin.left, x1: width - margin.right, y0: height - margin.bottom, y1: margin.top };
  const xs = spec.series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = spec.series.flatMap((s) => [...s.points.map((p) => p[1]), ...(s.whiskers ?? [])]);
  const x = makeScale(spec.x, xs, plot.x0, plot.x1);
  const y = makeScale(spec.y, ys, plot.y0, plot.y1);
  const clampX = (v: number): number => Math.min(plot.x1, Math.max(plot.x0, x(v)));
  const clampY = (v: number): number => Math.min(plot.y0, Math.max(plot.y1, y(v)));
  const out: string[] = [];
  let drawn = 0;
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="${escapeXml(spec.id)}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="${escapeXml(spec.title)}">`,
  );
  out.push(`<title>${escapeXml(spec.title)}</title>`);
  out.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#fff"/>`);
  out.push(`<text x="${margin.left}" y="20" class="chart-title" font-size="14" font-weight="600" fill="${COLORS.text}">${escapeXml(spec.title)}</text>`);
  // Grid and ticks.
  out.push('<g class="grid">');
  for (const t of x.ticks) {
    const px = x(t.value);
    if (px < plot.x0 - 0.5 || px > plot.x1 + 0.5) continue;
    out.push(`<line x1="${n(px)}" y1="${plot.y1}" x2="${n(px)}" y2="${plot.y0}" stroke="${COLORS.grid}"/>`);
    out.push(`<text x="${n(px)}" y="${plot.y0 + 16}" font-size="11" text-anchor="middle" fill="${COLORS.axis}">${escapeXml(t.label)}</text>`);
  }
  for (const t of y.ticks) {
    const py = y(t.value);
    if (py > plot.y0 + 0.5 || py < plot.y1 - 0.5) continue;
    out.push(`<line x1="${plot.x0}" y1="${n(py)}" x2="${plot.x1}" y2="${n(py)}" stroke="${COLORS.grid}"/>`);
    out.push(`<text x="${plot.x0 - 6}" y="${n(py + 4)}" font-size="11" text-anchor="end" fill="${COLORS.axis}">${escapeXml(t.label)}</text>`);
  }
  out.push('</g>');
  out.push(`<rect x="${plot.x0}" y="${plot.y1}" width="${plot.x1 - plot.x0}" height="${plot.y0 - plot.y1}" fill="none" stroke="${COLORS.axis}"/>`);
  out.push(`<text x="${(plot.x0 + plot.x1) / 2}" y="${plot.y0 + 34}" font-size="12" text-anchor="middle" fill="${COLORS.text}">${escapeXml(spec.x.label)}</text>`);
  out.push(
    `<text transform="translate(14 ${(plot.y0 + plot.y1) / 2}) rotate(-90)" font-size="12" text-anchor="middle" fill="${COLORS.text}">${escapeXml(spec.y.label)}</text>`,
  );
  // Series.
  out.push(`<g class="plot">`);
  for (const s of spec.series) {
    const dash = s.dashed === true ? ' stroke-dasharray="6 4"' : '';
    const pts = s.points.filter((p) => Number.isFinite(p[0]) && Number.isFinite(p[1]) && (spec.x.scale !== 'log' || p[0] > 0) && (spec.y.scale !== 'log' || p[1] > 0));
    if (pts.length === 0) continue;
    out.push(`<g class="series" data-series="${escapeXml(s.label)}">`);
    if (s.kind === 'line') {
      const d = pts.map((p, i) => `${i === 0 ? 'M' : 'L'}${n(clampX(p[0]))} ${n(clampY(p[1]))}`).join('');
      out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${dash}><title>${escapeXml(s.label)}</title></path>`);
      for (let i = 0; i < pts.length && s.marker !== 'none'; i++) {
        const p = pts[i]!;
        const tip = s.tooltips?.[i] ?? `${s.label}: ${formatNumber(p[1])} at ${formatNumber(p[0])}`;
        out.push(`${markerPath(s.marker, clampX(p[0]), clampY(p[1]))} fill="${s.color}"><title>${escapeXml(tip)}</title></${s.marker === 'square' ? 'rect' : s.marker === 'diamond' ? 'path' : 'circle'}>`);
      }
      drawn += pts.length;
    } else if (s.kind === 'step-area') {
      // Points are [bin lower edge, value] with a final [upper edge, 0].
      let d = `M${n(clampX(pts[0]![0]))} ${n(plot.y0)}`;
      for (let i = 0; i < pts.length - 1; i++) {
        const a = pts[i]!;
        const b = pts[i + 1]!;
        d += `L${n(clampX(a[0]))} ${n(clampY(a[1]))}L${n(clampX(b[0]))} ${n(clampY(a[1]))}`;
      }
      d += `L${n(clampX(pts[pts.length - 1]![0]))} ${n(plot.y0)}Z`;
      out.push(`<path d="${d}" fill="${s.color}" fill-opacity="0.18" stroke="${s.color}" stroke-width="1.5"${dash}><title>${escapeXml(s.label)}</title></path>`);
      drawn += pts.length;
    } else {
      for (let i = 0; i < s.points.length; i++) {
        const p = s.points[i]!;
        if (!Number.isFinite(p[0]) || !Number.isFinite(p[1])) continue;
        const px = clampX(p[0]);
        const py = clampY(p[1]);
        const whisker = s.whiskers?.[i];
        if (whisker !== undefined && Number.isFinite(whisker)) {
          const wy = clampY(whisker);
          out.push(`<line x1="${n(px)}" y1="${n(py)}" x2="${n(px)}" y2="${n(wy)}" stroke="${s.color}" stroke-width="1.5"/>`);
          out.push(`<line x1="${n(px - 4)}" y1="${n(wy)}" x2="${n(px + 4)}" y2="${n(wy)}" stroke="${s.color}" stroke-width="1.5"/>`);
        }
        const tip = s.tooltips?.[i] ?? `${s.label}: (${formatNumber(p[0])}, ${formatNumber(p[1])})`;
        const tag = s.marker === 'square' ? 'rect' : s.marker === 'diamond' ? 'path' : 'circle';
        out.push(`${markerPath(s.marker, px, py)} fill="${s.color}" fill-opacity="0.85" stroke="#fff"><title>${escapeXml(tip)}</title></${tag}>`);
        const label = s.pointLabels?.[i];
        if (label !== undefined) out.push(`<text x="${n(px + 7)}" y="${n(py - 6)}" font-size="10" fill="${COLORS.text}">${escapeXml(label)}</text>`);
        drawn++;
      }
    }
    out.push('</g>');
  }
  out.push('</g>');
  // Legend.
  out.push('<g class="legend">');
  spec.series.forEach((s, i) => {
    const lx = margin.left + (i % legendColumns) * ((width - margin.left - margin.right) / 2);
    const ly = height - legendRows * 18 + Math.floor(i / legendColumns) * 18 - 4;
    const dash = s.dashed === true ? ' stroke-dasharray="6 4"' : '';
    if (s.kind === 'scatter') out.push(`${markerPath(s.marker, lx + 11, ly - 4)} fill="${s.color}"/>`);
    else out.push(`<line x1="${lx}" y1="${ly - 4}" x2="${lx + 22}" y2="${ly - 4}" stroke="${s.color}" stroke-width="${s.kind === 'step-area' ? 6 : 2}"${dash}/>`);
    out.push(`<text x="${lx + 28}" y="${ly}" font-size="11" fill="${COLORS.text}">${escapeXml(s.label)}</text>`);
  });
  out.push('</g>');
  out.push('</svg>');
  return out.join('').replace('class="chart"', `class="chart" data-points="${drawn}"`);
}
