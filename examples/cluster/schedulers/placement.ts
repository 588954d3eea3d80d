/**
 * The generic scheduler behind `service.ts` and `batch.ts`, run on a pool thread (Nomad's generic scheduler,
 * much reduced):
 *
 * 1. reconcile: compare the job's allocations with what its latest version asks for — keep the current ones (and
 *    finished batch ones, until the `gc` task collects them), stop the extra ones, place the missing or outdated ones;
 * 2. rank: for each placement, check every node for feasibility (datacenter, constraints, free capacity) and score
 *    every feasible one — BestFit v3 bin packing plus the strategy's preferences. This is the CPU-heavy part;
 * 3. pick one of the best few nodes and return a plan: the allocation writes, and one write per touched node with
 *    its new used capacity and the node's `modifyIndex` as `readIndex`. Two plans that pick the same node conflict;
 *    the loser is re-run by the engine against the refreshed state.
 */
import type { Plan, PlanWrite, Snapshot, StoredRecord, WorkContext } from '../../../src/index.js';
import { countUnplaced, enter, leave, type ProbeRef } from '../probe.js';
import { MAX_COUNT, Table, allocKey, compareVersions, type AllocRecord, type Constraint, type JobRecord, type NodeRecord } from '../model.js';

export interface Strategy {
  /** Penalty per allocation of the same job already on a node (Nomad's job anti-affinity), 0 for none. */
  readonly antiAffinity: number;
  /** Bonus for nodes of this class (a node affinity), if any. */
  readonly preferClass?: { readonly nodeClass: string; readonly bonus: number };
  /**
   * The pick is random among the best `pickAmong` nodes. With 1, every scheduler that runs against the same state
   * picks the same node and all but one of them conflict, often until they run out of plan attempts; a wider pick
   * keeps the packing tight and the conflicts at a rate the refresh absorbs (Nomad shuffles nodes and limits the
   * candidates it scores for the same reason). A re-run after a partly rejected plan has just lost a race for its
   * nodes, so each attempt doubles the width (up to `MAX_PICK`).
   */
  readonly pickAmong: number;
}

/** Evaluation fields this scheduler reads (the payload carries only measurement refs). */
export interface ClusterEvaluation {
  readonly id: string;
  readonly jobId: string;
}

export interface Outcome {
  readonly plan: Plan | undefined;
  /** Allocations that fit on no feasible node this time. */
  readonly unplaced: number;
}

/** Nodes checked between two looks at the cancel word. */
const CANCEL_CHECK_EVERY = 256;
/** Widest pick of a re-run (see `Strategy.pickAmong`). */
const MAX_PICK = 256;

interface Delta {
  cpu: number;
  mem: number;
  allocs: number;
}

/** A scheduler module's default export for one strategy: places the job, and reports to the demo's probe. */
export function placementScheduler(strategy: Strategy) {
  return async function place(
    evaluation: ClusterEvaluation & { readonly payload?: { readonly probe?: ProbeRef } },
    ctx: WorkContext,
  ): Promise<Plan | undefined> {
    const probe = evaluation.payload?.probe;
    const entered = enter(probe);
    try {
      const { plan, unplaced } = schedule(evaluation, ctx, strategy, Date.now());
      countUnplaced(probe, unplaced);
      return plan;
    } finally {
      leave(probe, ctx.threadIndex, entered);
    }
  };
}

export function schedule(evaluation: ClusterEvaluation, ctx: WorkContext, strategy: Strategy, now: number): Outcome {
  const snapshot = ctx.snapshot;
  const job = snapshot.get<JobRecord>(Table.JOBS, evaluation.jobId)?.value;
  if (job === undefined) return { plan: undefined, unplaced: 0 };

  // 1. Reconcile.
  const writes: PlanWrite[] = [];
  const deltas = new Map<string, Delta>();
  const jobOnNode = new Map<string, number>();
  const toPlace: Array<{ index: number; readIndex: number }> = [];
  for (let i = 0; i < MAX_COUNT; i++) {
    const key = allocKey(job.id, i);
    const current = snapshot.get<AllocRecord>(Table.ALLOCS, key);
    const alloc = current?.value;
    // Keep a current allocation, and a finished batch one: it ran, and the `gc` task collects it.
    const keep = alloc !== undefined && (alloc.jobVersion === job.version || (alloc.finishAt !== undefined && alloc.finishAt <= now));
    if (keep && i < job.count) {
      jobOnNode.set(alloc.nodeId, (jobOnNode.get(alloc.nodeId) ?? 0) + 1);
      continue;
    }
    if (alloc !== undefined) addDelta(deltas, alloc.nodeId, -alloc.cpuMhz, -alloc.memoryMb, -1);
    if (i < job.count) toPlace.push({ index: i, readIndex: current?.modifyIndex ?? 0 });
    else if (current !== undefined) writes.push({ table: Table.ALLOCS, key, delete: true, readIndex: current.modifyIndex });
  }
  if (toPlace.length === 0 && writes.length === 0) return { plan: undefined, unplaced: 0 };

  // 2. Feasibility that does not depend on capacity: once per node and evaluation.
  const nodes = feasibleNodes(snapshot, job, ctx);

  // 3. Rank and pick, one placement at a time (each one changes the capacity the next one sees).
  let unplaced = 0;
  const width = Math.min(MAX_PICK, strategy.pickAmong * 2 ** Math.min(8, ctx.attempt - 1));
  const scores = new Float64Array(nodes.length);
  for (const { index, readIndex } of toPlace) {
    let feasible = 0;
    for (let n = 0; n < nodes.length; n++) {
      if (n % CANCEL_CHECK_EVERY === 0) ctx.throwIfCanceled();
      const record = nodes[n]!;
      const score = rank(record.value, deltas.get(record.key), job, jobOnNode.get(record.key) ?? 0, strategy);
      scores[n] = score ?? Number.NEGATIVE_INFINITY;
      if (score !== undefined) feasible++;
    }
    const n = pickAmongBest(scores, feasible, width);
    if (n < 0) {
      unplaced++;
      continue;
    }
    const pick = nodes[n]!;
    const node = pick.value;
    addDelta(deltas, node.id, job.cpuMhz, job.memoryMb, 1);
    jobOnNode.set(node.id, (jobOnNode.get(node.id) ?? 0) + 1);
    const alloc: AllocRecord = {
      id: `${evaluation.id}/${index}`,
      jobId: job.id,
      jobVersion: job.version,
      nodeId: node.id,
      cpuMhz: job.cpuMhz,
      memoryMb: job.memoryMb,
      ...(job.runtimeMs === undefined ? {} : { finishAt: now + job.runtimeMs }),
    };
    writes.push({ table: Table.ALLOCS, key: allocKey(job.id, index), value: alloc, readIndex });
  }

  // 4. One write per node whose used capacity changed, guarded by the version the scheduler read.
  for (const [nodeId, d] of deltas) {
    if (d.cpu === 0 && d.mem === 0 && d.allocs === 0) continue;
    const record = snapshot.get<NodeRecord>(Table.NODES, nodeId);
    if (record === undefined) continue;
    const node = record.value;
    const value: NodeRecord = {
      ...node,
      usedCpuMhz: node.usedCpuMhz + d.cpu,
      usedMemoryMb: node.usedMemoryMb + d.mem,
      allocs: node.allocs + d.allocs,
    };
    writes.push({ table: Table.NODES, key: nodeId, value, readIndex: record.modifyIndex });
  }
  if (writes.length === 0) return { plan: undefined, unplaced };
  return { plan: { writes, allAtOnce: job.allAtOnce }, unplaced };
}

function addDelta(deltas: Map<string, Delta>, nodeId: string, cpu: number, mem: number, allocs: number): void {
  const d = deltas.get(nodeId);
  if (d === undefined) deltas.set(nodeId, { cpu, mem, allocs });
  else {
    d.cpu += cpu;
    d.mem += mem;
    d.allocs += allocs;
  }
}

/** Nodes in the job's datacenters that satisfy every constraint (Nomad's feasibility checkers). */
function feasibleNodes(snapshot: Snapshot, job: JobRecord, ctx: WorkContext): StoredRecord<NodeRecord>[] {
  const patterns = job.constraints.map((c) => (c.operator === 'regexp' ? new RegExp(c.value) : undefined));
  const out: StoredRecord<NodeRecord>[] = [];
  let n = 0;
  for (const record of snapshot.list<NodeRecord>(Table.NODES)) {
    if (n++ % CANCEL_CHECK_EVERY === 0) ctx.throwIfCanceled();
    const node = record.value;
    if (!job.datacenters.includes(node.datacenter) || !node.attributes.docker) continue;
    let ok = true;
    for (let c = 0; c < job.constraints.length && ok; c++) ok = satisfies(node, job.constraints[c]!, patterns[c]);
    if (ok) out.push(record);
  }
  return out;
}

function satisfies(node: NodeRecord, constraint: Constraint, pattern: RegExp | undefined): boolean {
  const actual = constraint.attribute === 'nodeClass' ? node.nodeClass : node.attributes[constraint.attribute];
  switch (constraint.operator) {
    case '=':
      return actual === constraint.value;
    case '!=':
      return actual !== constraint.value;
    case 'version>=':
      return compareVersions(actual, constraint.value) >= 0;
    case 'regexp':
      return pattern!.test(actual);
  }
}

/**
 * Score of placing one more allocation of `job` on `node`, or undefined when it does not fit.
 * BestFit v3 (Nomad's `ScoreFitBinPack`): with f the free fraction of CPU and memory after the placement,
 * `(20 − (10^f_cpu + 10^f_mem)) / 18` is 1 for a node filled exactly and 0 for an empty one.
 */
function rank(node: NodeRecord, delta: Delta | undefined, job: JobRecord, sameJob: number, strategy: Strategy): number | undefined {
  const usedCpu = node.usedCpuMhz + (delta?.cpu ?? 0) + job.cpuMhz;
  const usedMem = node.usedMemoryMb + (delta?.mem ?? 0) + job.memoryMb;
  if (usedCpu > node.cpuMhz || usedMem > node.memoryMb) return undefined;
  const freeCpu = 1 - usedCpu / node.cpuMhz;
  const freeMem = 1 - usedMem / node.memoryMb;
  let score = (20 - (10 ** freeCpu + 10 ** freeMem)) / 18;
  if (sameJob > 0 && strategy.antiAffinity > 0) score -= (strategy.antiAffinity * (sameJob + 1)) / job.count;
  if (strategy.preferClass !== undefined && node.nodeClass === strategy.preferClass.nodeClass) score += strategy.preferClass.bonus;
  return score;
}

/**
 * Index of a node drawn uniformly from the `width` best scores (ties at the cut included), or -1 when no node is
 * feasible (`-Infinity`). One selection pass for the cut, one reservoir-sampling pass for the draw.
 */
function pickAmongBest(scores: Float64Array, feasible: number, width: number): number {
  if (feasible === 0) return -1;
  const cut = feasible <= width ? Number.NEGATIVE_INFINITY : kthLargest(scores.slice(), width);
  let chosen = -1;
  let seen = 0;
  for (let i = 0; i < scores.length; i++) {
    const s = scores[i]!;
    if (s === Number.NEGATIVE_INFINITY || s < cut) continue;
    if (Math.random() * ++seen < 1) chosen = i;
  }
  return chosen;
}

/** The k-th largest value (k from 1), by quickselect; reorders `values`. */
function kthLargest(values: Float64Array, k: number): number {
  let lo = 0;
  let hi = values.length - 1;
  const target = k - 1;
  while (lo < hi) {
    const pivot = values[(lo + hi) >>> 1]!;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (values[i]! > pivot) i++;
      while (values[j]! < pivot) j--;
      if (i <= j) {
        const t = values[i]!;
        values[i++] = values[j]!;
        values[j--] = t;
      }
    }
    if (target <= j) hi = j;
    else if (target >= i) lo = i;
    else break;
  }
  return values[target]!;
}
