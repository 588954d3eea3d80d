import { Counter, Gauge, Histogram, Registry, type CounterConfiguration, type GaugeConfiguration, type HistogramConfiguration } from 'prom-client';

import { InvalidOptionError } from '../errors.js';

export { Registry } from 'prom-client';

/**
 * prom-client throws when a name is registered twice. Components that share a registry (two brokers in one
 * process, or an engine re-created in tests) reuse the metric registered first instead.
 */
/** The typed error for a registry that already holds `name` as a metric of another type. */
export function metricConflict(name: string, expectedType: string, found: unknown): InvalidOptionError {
  const foundType = (found as { constructor?: { name?: string } } | null)?.constructor?.name ?? typeof found;
  // The received value shown is the type found under that name (the registry itself would print as `{}`).
  return new InvalidOptionError('registry', `a Registry where ${name} is free or a ${expectedType}`, foundType);
}

/**
 * The metric registered under `name`, if it is a `ctor`. prom-client is a peer dependency, so the registry (and a
 * metric an application registered on it) may come from another copy of prom-client 15 than the one tickpool
 * imports: a metric of the same class name from such a copy has the same API and is used as one of ours.
 */
function existing<T>(registry: Registry, name: string, ctor: abstract new (...args: never[]) => T): T | undefined {
  const found = registry.getSingleMetric(name);
  if (found === undefined) return undefined;
  if (!(found instanceof ctor) && (found as { constructor?: { name?: unknown } }).constructor?.name !== ctor.name) {
    throw metricConflict(name, ctor.name, found);
  }
  return found as T;
}

export function counter<L extends string>(registry: Registry, config: CounterConfiguration<L>): Counter<L> {
  return existing(registry, config.name, Counter<L>) ?? new Counter<L>({ ...config, registers: [registry] });
}

export function gauge<L extends string>(registry: Registry, config: GaugeConfiguration<L>): Gauge<L> {
  return existing(registry, config.name, Gauge<L>) ?? new Gauge<L>({ ...config, registers: [registry] });
}

export function histogram<L extends string>(registry: Registry, config: HistogramConfiguration<L>): Histogram<L> {
  return existing(registry, config.name, Histogram<L>) ?? new Histogram<L>({ ...config, registers: [registry] });
}

/** Buckets in seconds for latencies from 10 µs to 10 s. */
export const latencyBucketsSeconds: readonly number[] = [
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

/** What tickpool calls on a registry. */
const registryMethods: readonly string[] = ['registerMetric', 'getSingleMetric', 'removeSingleMetric', 'metrics', 'getMetricsAsJSON', 'resetMetrics', 'clear'];

/**
 * A prom-client `Registry`, recognised by its shape rather than by `instanceof`: an application's registry comes
 * from the application's copy of prom-client, which need not be the copy tickpool resolves (two installs of the
 * peer range, or a bundler that inlined one). Metrics made by tickpool's copy register on it and are collected by
 * it, since a registry only calls `get()`/`reset()` on its metrics.
 */
export function isRegistry(value: unknown): value is Registry {
  if (value === null || typeof value !== 'object') return false;
  const r = value as Record<string, unknown>;
  return registryMethods.every((name) => typeof r[name] === 'function');
}
