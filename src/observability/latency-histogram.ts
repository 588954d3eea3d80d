/**
 * A latency histogram cheap enough for a per-evaluation hot path. One prom-client `Histogram.observe` costs hundreds
 * of nanoseconds (it allocates a closure, hashes the labels and scans the buckets); here each label value's series is
 * a Float64Array of bucket counts plus sum and count (a few ns per observation), exported by a collector that speaks
 * prom-client's metric protocol (`get()` returning histogram values), so the registry serializes it like any other
 * histogram. Nothing is sampled or dropped: every observation lands in its bucket, only the bookkeeping is cheaper.
 * That protocol is prom-client's internals, not its documented API: test/observability/latency-histogram-contract
 * pins it against the prom-client copies of the peer range (text, OpenMetrics, JSON and cluster aggregation).
 */
import type { Metric, MetricValueWithName, Registry } from 'prom-client';
import { latencyBucketsSeconds, metricConflict } from './metrics.js';

/** Bucket counts of one label set, in milliseconds internally (the clock's unit), exported in seconds. */
export class LatencySeries {
  /** counts[i] = observations in (bound[i-1], bound[i]]; the last slot is (last bound, +Inf). */
  readonly counts: Float64Array;
  sumMs = 0;
  count = 0;
  readonly #boundsMs: Float64Array;

  constructor(boundsMs: Float64Array) {
    this.#boundsMs = boundsMs;
    this.counts = new Float64Array(boundsMs.length + 1);
  }

  observeMs(ms: number): void {
    // A clock set backwards (ManualClock.set) must not produce a negative latency.
    const value = ms > 0 ? ms : 0;
    const bounds = this.#boundsMs;
    const n = bounds.length;
    let i = 0;
    while (i < n && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sumMs += value;
    this.count++;
  }

  reset(): void {
    this.counts.fill(0);
    this.sumMs = 0;
    this.count = 0;
  }
}

export interface LatencyHistogramConfig {
  readonly name: string;
  readonly help: string;
  readonly labelName: string;
  readonly bucketsSeconds?: readonly number[];
}

export interface HistogramExport {
  readonly name: string;
  readonly help: string;
  readonly type: 'histogram';
  readonly aggregator: 'sum';
  readonly values: HistogramValue[];
}

/** A value as prom-client's own Histogram reports it: buckets carry `exemplar: null` when none was recorded. */
type HistogramValue = MetricValueWithName<string> & { readonly exemplar?: null };

function isLatencyHistogram(value: unknown): value is LatencyHistogram {
  return (value as { constructor?: { name?: unknown } } | null)?.constructor?.name === 'LatencyHistogram' && typeof (value as { series?: unknown }).series === 'function';
}

/** A histogram collector with one label, registered on a prom-client registry. */
export class LatencyHistogram {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram' as const;
  readonly aggregator = 'sum' as const;
  readonly labelNames: readonly string[];
  readonly #boundsSeconds: readonly number[];
  readonly #boundsMs: Float64Array;
  readonly #series = new Map<string, LatencySeries>();

  /** The histogram registered under `config.name`, or a new one (two engines may share a registry). */
  static on(registry: Registry, config: LatencyHistogramConfig): LatencyHistogram {
    const found = registry.getSingleMetric(config.name) as unknown;
    if (found instanceof LatencyHistogram) return found;
    // Another copy of tickpool on the same registry (two versions in one process) made it: the same protocol.
    if (isLatencyHistogram(found)) return found;
    if (found !== undefined) throw metricConflict(config.name, 'LatencyHistogram', found);
    return new LatencyHistogram(registry, config);
  }

  constructor(registry: Registry, config: LatencyHistogramConfig) {
    this.name = config.name;
    this.help = config.help;
    this.labelNames = [config.labelName];
    this.#boundsSeconds = [...(config.bucketsSeconds ?? latencyBucketsSeconds)];
    this.#boundsMs = Float64Array.from(this.#boundsSeconds, (s) => s * 1000);
    // The registry only needs name/get/reset from a metric; the cast is to its class-typed signature.
    registry.registerMetric(this as unknown as Metric);
  }

  /** The series for one label value, created on first use; callers keep it to observe without a lookup. */
  series(labelValue: string): LatencySeries {
    let series = this.#series.get(labelValue);
    if (series === undefined) {
      series = new LatencySeries(this.#boundsMs);
      this.#series.set(labelValue, series);
    }
    return series;
  }

  /**
   * The registry's metric protocol, as prom-client's own Histogram answers it. (prom-client's typings declare
   * `type` as a numeric enum while every metric reports a string at runtime, hence the local return type.)
   */
  async get(): Promise<HistogramExport> {
    const label = this.labelNames[0]!;
    const values: HistogramValue[] = [];
    for (const [labelValue, series] of this.#series) {
      let cumulative = 0;
      for (let i = 0; i < this.#boundsSeconds.length; i++) {
        cumulative += series.counts[i]!;
        values.push({ labels: { le: this.#boundsSeconds[i]!, [label]: labelValue }, value: cumulative, metricName: `${this.name}_bucket`, exemplar: null });
      }
      values.push({ labels: { le: '+Inf', [label]: labelValue }, value: series.count, metricName: `${this.name}_bucket`, exemplar: null });
      values.push({ labels: { [label]: labelValue }, value: series.sumMs / 1000, metricName: `${this.name}_sum` });
      values.push({ labels: { [label]: labelValue }, value: series.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    for (const series of this.#series.values()) series.reset();
  }
}
