/**
 * Gauges that add up every component on a registry. A gauge is registered once per registry and reused by every
 * component on it (see `metrics.ts`), so its `collect` cannot close over one component: it sums over the
 * components attached to that registry and name (the task gauges, `tickpool_plan_queue_depth`).
 *
 * A component is held weakly (a `WeakRef`), so that one dropped without a stop, or a stopped engine nobody holds
 * any more, cannot keep itself alive through a registry that outlives it; its `read` is a function of the
 * component that must not close over it (else the closure would hold it strongly). A component that is stopped
 * but still held reads its own value, which is 0 for whatever it no longer does.
 */
import type { Gauge } from 'prom-client';
import { gauge, type Registry } from './metrics.js';

interface Source {
  readonly ref: WeakRef<object>;
  readonly read: (owner: object) => number;
}

interface Sum {
  readonly sources: Set<Source>;
  /** Owners attached, so that one attached twice is counted once. */
  readonly owners: WeakSet<object>;
  /** `sources.size` at which dead references are swept next, for a registry that is never scraped. */
  sweepAt: number;
}

const sums = new WeakMap<Registry, Map<string, Sum>>();
const FIRST_SWEEP = 16;

/**
 * Adds `owner` to the gauge `config.name` of `registry` (registering the gauge on first use): at each scrape the
 * gauge is the sum of `read(owner)` over the owners still alive.
 */
export function addToSummedGauge<T extends object>(
  registry: Registry,
  config: { readonly name: string; readonly help: string },
  owner: T,
  read: (owner: T) => number,
): void {
  let byName = sums.get(registry);
  if (byName === undefined) sums.set(registry, (byName = new Map()));
  let sum = byName.get(config.name);
  if (sum === undefined) byName.set(config.name, (sum = { sources: new Set(), owners: new WeakSet(), sweepAt: FIRST_SWEEP }));
  const attached = sum;
  // Looked up (or registered) on every call, not once: after `registry.clear()` the gauge is registered anew.
  gauge(registry, {
    name: config.name,
    help: config.help,
    collect(this: Gauge) {
      this.set(total(attached));
    },
  });
  if (attached.owners.has(owner)) return;
  attached.owners.add(owner);
  // `read` is only ever called with this owner: widening its parameter type loses nothing.
  attached.sources.add({ ref: new WeakRef(owner), read: read as (owner: object) => number });
  if (attached.sources.size >= attached.sweepAt) {
    sweep(attached);
    attached.sweepAt = Math.max(FIRST_SWEEP, 2 * attached.sources.size);
  }
}

function total(sum: Sum): number {
  let value = 0;
  for (const source of sum.sources) {
    const owner = source.ref.deref();
    if (owner === undefined) sum.sources.delete(source);
    else value += source.read(owner);
  }
  return value;
}

function sweep(sum: Sum): void {
  for (const source of sum.sources) if (source.ref.deref() === undefined) sum.sources.delete(source);
}
