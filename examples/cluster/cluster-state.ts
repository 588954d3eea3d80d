/**
 * The simulated cluster: a seeded generator of nodes and job specs, the initial state written into the engine's
 * state store, and the audit of the final state (is every node's accounting right, is any node overcommitted?).
 */
import type { Snapshot } from '../../src/index.js';
import type { StateStore } from '../../src/state/state-store.js';
import { MAX_COUNT, Table, type AllocRecord, type Constraint, type JobRecord, type JobType, type NodeRecord } from './model.js';

/** A small seeded PRNG (mulberry32): the same seed gives the same cluster, run after run. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Random = () => number;

function pick<T>(random: Random, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)]!;
}

/** Picks by weight: `[[value, weight], …]`. */
function weighted<T>(random: Random, items: ReadonlyArray<readonly [T, number]>): T {
  const total = items.reduce((s, [, w]) => s + w, 0);
  let r = random() * total;
  for (const [value, w] of items) if ((r -= w) < 0) return value;
  return items[items.length - 1]![0];
}

function between(random: Random, min: number, max: number, step: number): number {
  return min + step * Math.floor(random() * (Math.floor((max - min) / step) + 1));
}

export const DATACENTERS: readonly string[] = ['dc1', 'dc2', 'dc3'];

export function generateNode(random: Random, n: number): NodeRecord {
  const nodeClass = weighted(random, [['general', 50], ['compute', 25], ['memory', 15], ['storage', 10]] as const);
  const cores = pick(random, [2, 4, 8, 8, 16]);
  const gbPerCore = nodeClass === 'memory' ? 16 : nodeClass === 'compute' ? 4 : 8;
  return {
    id: `node-${String(n).padStart(4, '0')}`,
    datacenter: weighted(random, [['dc1', 50], ['dc2', 30], ['dc3', 20]] as const),
    nodeClass,
    cpuMhz: cores * between(random, 2400, 3200, 100),
    memoryMb: cores * gbPerCore * 1024,
    usedCpuMhz: 0,
    usedMemoryMb: 0,
    allocs: 0,
    attributes: {
      kernelVersion: pick(random, ['5.4.0', '5.10.0', '5.15.0', '6.1.0', '6.8.0']),
      arch: random() < 0.8 ? 'amd64' : 'arm64',
      docker: random() < 0.95,
      rack: `rack-${'abcdefghijkl'[Math.floor(random() * 12)]!}${1 + Math.floor(random() * 8)}`,
    },
  };
}

const CONSTRAINTS: readonly Constraint[] = [
  { attribute: 'arch', operator: '=', value: 'amd64' },
  { attribute: 'kernelVersion', operator: 'version>=', value: '5.10' },
  { attribute: 'rack', operator: 'regexp', value: '^rack-[a-h][1-6]$' },
  { attribute: 'nodeClass', operator: '!=', value: 'storage' },
];

/** The first version of job `id`. */
export function generateJob(random: Random, id: string): JobRecord {
  const type: JobType = random() < 0.7 ? 'service' : 'batch';
  const constraints = CONSTRAINTS.filter(() => random() < 0.3);
  const dcs = DATACENTERS.filter(() => random() < 0.6);
  return {
    id,
    type,
    priority: type === 'service' ? between(random, 50, 80, 5) : between(random, 20, 50, 5),
    version: 1,
    count: type === 'service' ? between(random, 1, 6, 1) : between(random, 1, MAX_COUNT, 1),
    cpuMhz: between(random, 100, 2000, 50),
    memoryMb: between(random, 128, 4096, 128),
    datacenters: dcs.length > 0 ? dcs : ['dc1'],
    constraints,
    allAtOnce: type === 'service' && random() < 0.1,
    ...(type === 'batch' ? { runtimeMs: between(random, 2000, 10000, 500) } : {}),
  };
}

/** The next version of a job: a re-registration that scales it or changes its resources. */
export function nextVersion(random: Random, job: JobRecord): JobRecord {
  const max = job.type === 'service' ? 6 : MAX_COUNT;
  const count = Math.min(max, Math.max(1, job.count + pick(random, [-1, 0, 0, 1])));
  const cpuMhz = random() < 0.5 ? job.cpuMhz : between(random, 100, 2000, 50);
  return { ...job, version: job.version + 1, count, cpuMhz };
}

/** Writes the nodes into the store in one transaction. */
export function seedNodes(state: StateStore, count: number, random: Random): void {
  state.write((txn) => {
    for (let n = 1; n <= count; n++) {
      const node = generateNode(random, n);
      txn.put(Table.NODES, node.id, node);
    }
  });
}

export interface CapacityAudit {
  readonly nodes: number;
  readonly allocs: number;
  /** Nodes whose used CPU or memory exceeds their capacity. */
  readonly overcommitted: number;
  /** Nodes whose recorded used capacity differs from the sum of the allocations on them. */
  readonly mismatched: number;
  /** Allocations on a node that does not exist. */
  readonly orphanAllocs: number;
  readonly cpuUsedPct: number;
  readonly memoryUsedPct: number;
}

/** Checks the invariant of the model: for every node, Σ allocations = used ≤ capacity. */
export function auditCapacity(snapshot: Snapshot): CapacityAudit {
  const sums = new Map<string, { cpu: number; mem: number; allocs: number }>();
  let allocs = 0;
  for (const { value: alloc } of snapshot.list<AllocRecord>(Table.ALLOCS)) {
    allocs++;
    const s = sums.get(alloc.nodeId) ?? { cpu: 0, mem: 0, allocs: 0 };
    s.cpu += alloc.cpuMhz;
    s.mem += alloc.memoryMb;
    s.allocs++;
    sums.set(alloc.nodeId, s);
  }
  let nodes = 0;
  let overcommitted = 0;
  let mismatched = 0;
  let cpu = 0;
  let cpuUsed = 0;
  let mem = 0;
  let memUsed = 0;
  for (const { value: node } of snapshot.list<NodeRecord>(Table.NODES)) {
    nodes++;
    const s = sums.get(node.id) ?? { cpu: 0, mem: 0, allocs: 0 };
    sums.delete(node.id);
    if (node.usedCpuMhz > node.cpuMhz || node.usedMemoryMb > node.memoryMb || s.cpu > node.cpuMhz || s.mem > node.memoryMb) overcommitted++;
    if (s.cpu !== node.usedCpuMhz || s.mem !== node.usedMemoryMb || s.allocs !== node.allocs) mismatched++;
    cpu += node.cpuMhz;
    cpuUsed += node.usedCpuMhz;
    mem += node.memoryMb;
    memUsed += node.usedMemoryMb;
  }
  let orphanAllocs = 0;
  for (const s of sums.values()) orphanAllocs += s.allocs;
  return {
    nodes,
    allocs,
    overcommitted,
    mismatched,
    orphanAllocs,
    cpuUsedPct: cpu === 0 ? 0 : (100 * cpuUsed) / cpu,
    memoryUsedPct: mem === 0 ? 0 : (100 * memUsed) / mem,
  };
}
