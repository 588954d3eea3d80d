/**
 * State store costs, and the measurement behind the choice of a persistent hash trie over copy-on-write `Map`s.
 *
 * The pattern that matters is "snapshot, then write" — every plan and every replica update after a scheduler took a
 * snapshot. With copy-on-write of a table `Map`, that write clones the whole table (O(n)); with the trie it copies
 * one path (O(log32 n)). Reads pay for it: a trie lookup hashes the key and walks 2–4 nodes instead of one
 * `Map.get`. Each tinybench iteration runs BATCH operations; ops/s and per-op p50/p99 come from batch times.
 *
 *   node dist/bench/state.bench.js [--quick] [--json]
 */
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { HashTrie } from '../src/state/hash-trie.js';
import { PlanApplier } from '../src/state/plan-applier.js';
import { Replica } from '../src/state/replica.js';
import { StateStore } from '../src/state/state-store.js';
import type { ChangeSet, Snapshot } from '../src/state/types.js';
import { runBatchScenarios } from './lib/batch-bench.js';

export interface StateBenchResult {
  readonly name: string;
  readonly opsPerSec: number;
  readonly p50Us: number;
  readonly p99Us: number;
  readonly notes: string;
}

const BATCH = 200;
const SIZES = [1_000, 10_000, 100_000] as const;
const key = (i: number): string => `alloc-${i.toString(36).padStart(6, '0')}`;

/** The baseline the brief suggested: one Map per table, cloned on the first write after a snapshot. */
class CowTable<V> {
  #map = new Map<string, V>();
  #shared = false;
  snapshot(): ReadonlyMap<string, V> {
    this.#shared = true;
    return this.#map;
  }
  set(k: string, v: V): void {
    if (this.#shared) {
      this.#map = new Map(this.#map);
      this.#shared = false;
    }
    this.#map.set(k, v);
  }
}

interface Scenario {
  readonly name: string;
  readonly notes: string;
  setup(): () => void | Promise<void>;
}

function scenarios(): Scenario[] {
  const list: Scenario[] = [];
  for (const n of SIZES) {
    list.push({
      name: `snapshot+write, COW Map, ${n.toLocaleString('en-US')} records`,
      notes: 'baseline: clone the table Map on the first write after a snapshot',
      setup() {
        const table = new CowTable<number>();
        for (let i = 0; i < n; i++) table.set(key(i), i);
        let i = 0;
        return () => {
          for (let b = 0; b < BATCH; b++, i++) {
            table.snapshot();
            table.set(key(i % n), i);
          }
        };
      },
    });
    list.push({
      name: `snapshot+write, hash trie, ${n.toLocaleString('en-US')} records`,
      notes: 'the structure used: snapshot = keep the root, write = copy one path',
      setup() {
        let trie = HashTrie.empty<number>();
        for (let i = 0; i < n; i++) trie = trie.set(key(i), i);
        let i = 0;
        let held: HashTrie<number> = trie;
        return () => {
          for (let b = 0; b < BATCH; b++, i++) {
            held = trie;
            trie = trie.set(key(i % n), i);
          }
          if (held.size < 0) throw new Error('unreachable');
        };
      },
    });
    list.push({
      name: `get, Map, ${n.toLocaleString('en-US')} records`,
      notes: 'baseline read',
      setup() {
        const map = new Map<string, number>();
        for (let i = 0; i < n; i++) map.set(key(i), i);
        const keys = Array.from({ length: BATCH }, (_, b) => key((b * 7919) % n));
        let sink = 0;
        return () => {
          for (const k of keys) sink += map.get(k)!;
          if (sink < 0) throw new Error('unreachable');
        };
      },
    });
    list.push({
      name: `get, StateStore snapshot, ${n.toLocaleString('en-US')} records`,
      notes: 'Snapshot.get: table lookup, key hash, trie walk',
      setup() {
        const store = new StateStore({ tables: ['allocs'] });
        store.write((txn) => {
          for (let i = 0; i < n; i++) txn.put('allocs', key(i), i);
        });
        const snap: Snapshot = store.snapshot();
        const keys = Array.from({ length: BATCH }, (_, b) => key((b * 7919) % n));
        let sink = 0;
        return () => {
          for (const k of keys) sink += snap.get<number>('allocs', k)!.value;
          if (sink < 0) throw new Error('unreachable');
        };
      },
    });
  }
  list.push({
    name: 'StateStore snapshot + 1-record write, 10,000 records',
    notes: 'includes structuredClone + deep freeze of a small object value and one change listener',
    setup() {
      const store = new StateStore({ tables: ['allocs'] });
      store.write((txn) => {
        for (let i = 0; i < 10_000; i++) txn.put('allocs', key(i), { node: 'n1', cpu: i % 8 });
      });
      let changes = 0;
      store.onChange(() => changes++);
      let i = 0;
      return () => {
        for (let b = 0; b < BATCH; b++, i++) {
          store.snapshot();
          store.write((txn) => txn.put('allocs', key(i % 10_000), { node: 'n2', cpu: i % 8 }));
        }
      };
    },
  });
  list.push({
    name: 'PlanApplier, 1-write plans, 10,000 records',
    notes: 'submit BATCH plans in one tick and await them: version check, commit, result',
    setup() {
      const state = new StateStore({ tables: ['allocs'] });
      state.write((txn) => {
        for (let i = 0; i < 10_000; i++) txn.put('allocs', key(i), { node: 'n1', cpu: 1 });
      });
      const applier = new PlanApplier({ state, logger: pino({ level: 'warn' }) });
      let i = 0;
      return async () => {
        const pending = [];
        const snap = state.snapshot();
        for (let b = 0; b < BATCH; b++, i++) {
          const k = key(i % 10_000);
          pending.push(applier.submit({ writes: [{ table: 'allocs', key: k, value: { node: 'n2', cpu: 2 }, readIndex: snap.get('allocs', k)?.modifyIndex ?? 0 }] }));
        }
        await Promise.all(pending);
      };
    },
  });
  list.push({
    name: 'Replica apply + snapshot, 10,000 records',
    notes: 'one 1-record change set (structured-cloned, as after postMessage) then a snapshot, per op',
    setup() {
      const store = new StateStore({ tables: ['allocs'], historyLimit: 0 });
      const replica = new Replica();
      store.write((txn) => {
        for (let i = 0; i < 10_000; i++) txn.put('allocs', key(i), { node: 'n1', cpu: 1 });
      });
      replica.reset(structuredClone(store.full()));
      const sets: ChangeSet[] = [];
      store.onChange((c) => sets.push(structuredClone(c)));
      for (let i = 0; i < 200_000; i++) store.write((txn) => txn.put('allocs', key(i % 10_000), { node: 'n2', cpu: i % 8 }));
      let next = 0;
      return () => {
        for (let b = 0; b < BATCH; b++) {
          if (next === sets.length) {
            // Out of prepared change sets: start over from a fresh copy so indexes stay consecutive.
            replica.reset({ index: sets[0]!.index - 1, changes: [] });
            next = 0;
          }
          replica.apply(sets[next++]!);
          replica.snapshot();
        }
      };
    },
  });
  return list;
}

export async function runStateBench(options: { quick?: boolean } = {}): Promise<StateBenchResult[]> {
  const quick = options.quick === true;
  return runBatchScenarios(
    scenarios().map((scenario) => ({ ...scenario, calls: BATCH })),
    { time: quick ? 150 : 1000, warmupIterations: quick ? 5 : 20, iterations: 10 },
  );
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const results = await runStateBench({ quick: process.argv.includes('--quick') });
  if (process.argv.includes('--json')) console.log(JSON.stringify(results, null, 2));
  else console.table(results.map((r) => ({ name: r.name, 'ops/s': r.opsPerSec.toLocaleString('en-US'), 'p50 µs/op': r.p50Us, 'p99 µs/op': r.p99Us })));
}
