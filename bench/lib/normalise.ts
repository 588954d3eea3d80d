/**
 * The benchmark modules return slightly different shapes; the suite turns each into `BenchResult`s with a stable
 * `id`, and derives the ratios a module measured both sides of but did not divide (Schedule vs cron-parser,
 * hash trie vs copy-on-write Map).
 */
import type { BenchResult } from './types.js';
import type { TasksBenchResult } from './tasks-result.js';

/** What broker, schedule and state benches return. */
export interface PlainResult {
  readonly name: string;
  readonly opsPerSec: number;
  readonly p50Us?: number;
  readonly p99Us?: number;
  readonly p999Us?: number;
  readonly notes?: string;
}

export function slug(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9%]+/g, '-')
    .replace(/%/g, 'pct')
    .replace(/^-+|-+$/g, '');
}

function plain(scope: BenchResult['scope'], idPrefix: string, r: PlainResult, extra: Partial<BenchResult> = {}): BenchResult {
  return {
    scope,
    id: `${idPrefix}.${slug(r.name)}`,
    name: r.name,
    opsPerSec: r.opsPerSec,
    ...(r.p50Us === undefined ? {} : { p50Us: r.p50Us }),
    ...(r.p99Us === undefined ? {} : { p99Us: r.p99Us }),
    ...(r.p999Us === undefined ? {} : { p999Us: r.p999Us }),
    ...(r.notes === undefined ? {} : { notes: r.notes }),
    ...extra,
  };
}

function ratio(a: number, b: number): number {
  return Math.round((a / b) * 100) / 100;
}

/** `broker.bench.ts`: enqueue → dequeue → ack cycles per second (absolute: the broker has no baseline). */
export function fromBroker(results: readonly PlainResult[]): BenchResult[] {
  return results.map((r) => plain('broker', 'broker', r, { unit: 'cycles/s' }));
}

/**
 * `schedule.bench.ts`: next() calls per second. Each `Schedule.next()` figure gets the ratio to raw cron-parser's
 * `next()` in the same zone, measured in the same run.
 */
export function fromSchedule(results: readonly PlainResult[]): BenchResult[] {
  const raw = new Map<string, PlainResult>();
  for (const r of results) {
    const m = /^cron-parser next\(\), (.+)$/.exec(r.name);
    if (m !== null) raw.set(m[1]!, r);
  }
  return results.map((r) => {
    const zone = r.name.startsWith('Schedule.next()') ? r.name.slice(r.name.lastIndexOf(', ') + 2) : undefined;
    const base = zone === undefined ? undefined : raw.get(zone);
    return plain('schedule', 'schedule', r, {
      unit: 'calls/s',
      ...(base === undefined ? {} : { ratio: ratio(r.opsPerSec, base.opsPerSec), baseline: `cron-parser next(), ${zone}`, baselineOpsPerSec: base.opsPerSec }),
    });
  });
}

/**
 * `state.bench.ts` (the engine's state store; scope `engine`): the hash trie against copy-on-write `Map`s for
 * snapshot+write, and snapshot reads against plain `Map.get`, at each size, as ratios.
 */
export function fromState(results: readonly PlainResult[]): BenchResult[] {
  const byName = new Map(results.map((r) => [r.name, r]));
  return results.map((r) => {
    let base: PlainResult | undefined;
    let label = '';
    const trie = /^snapshot\+write, hash trie, (.+)$/.exec(r.name);
    const get = /^get, StateStore snapshot, (.+)$/.exec(r.name);
    if (trie !== null) {
      base = byName.get(`snapshot+write, COW Map, ${trie[1]!}`);
      label = 'copy-on-write Map';
    } else if (get !== null) {
      base = byName.get(`get, Map, ${get[1]!}`);
      label = 'Map.get (the price of snapshots)';
    }
    return {
      ...plain('engine', 'state', r, { name: `state: ${r.name}` }),
      ...(base === undefined ? {} : { ratio: ratio(r.opsPerSec, base.opsPerSec), baseline: label, baselineOpsPerSec: base.opsPerSec }),
    };
  });
}

/** What `tasks.bench.ts` returns (its own ids: `tasks.tick-vs-scan` is the one the CI floor reads), as checked here. */
type TasksLikeResult = Partial<TasksBenchResult> & { readonly name: string };

/** Checks the shape at run time (the module is loaded dynamically) and keeps the bench's own ids. */
export function fromTasks(results: unknown): BenchResult[] {
  if (!Array.isArray(results)) throw new TypeError(`tasks bench: expected an array of results, received ${typeof results}`);
  return results.map((value: unknown, i) => {
    const r = value as TasksLikeResult;
    if (r === null || typeof r !== 'object' || typeof r.name !== 'string') throw new TypeError(`tasks bench: result ${i} has no name`);
    const out: Record<string, unknown> = { scope: 'tasks', id: typeof r.id === 'string' ? r.id : `tasks.${slug(r.name)}`, name: r.name };
    for (const key of ['ratio', 'baseline', 'opsPerSec', 'p50Us', 'p99Us', 'bytesPerTask', 'notes'] as const) {
      if (r[key] !== undefined) out[key] = r[key];
    }
    return out as unknown as BenchResult;
  });
}
