/**
 * The plan applier's fit check (Nomad's `evaluatePlan`), passed to `createEngine({ evaluatePlan })`. It runs on
 * the main thread, serially with every other plan, on the writes that survived the version check.
 *
 * A node's used capacity lives in its record, and a plan moves it with one write per node. The version check
 * already rejects a node write when another plan changed the node first; what it cannot see is that the
 * allocation writes on that node then have nobody accounting for them — committing them would overcommit the
 * node. So this check rejects, until nothing changes:
 * - an allocation write whose node (old or new) has no surviving node write;
 * - a node write whose new used capacity is not the node's current one plus the surviving allocation writes on it
 *   (some of its allocations were rejected), or exceeds the node's capacity;
 * - and with a rejected write, every allocation write touching the same nodes, and their node writes.
 * What remains is consistent: Σ allocations = used ≤ capacity holds after the commit for every node.
 */
import type { EvaluatePlan, Plan, PlanWrite, Snapshot } from '../../src/index.js';
import { Table, type AllocRecord, type NodeRecord } from './model.js';

export interface FitCheckStats {
  /** Plans checked. */
  plans: number;
  /** Allocation writes rejected because a node they touch changed under the plan (its node write was rejected). */
  staleNode: number;
  /** Node writes whose used capacity did not match the allocation writes that survived. */
  mismatch: number;
  /** Node writes that would have exceeded the node's CPU or memory. */
  overcommit: number;
}

interface Move {
  readonly write: PlanWrite;
  /** Node ids this allocation write takes capacity from or gives it to. */
  readonly nodes: readonly string[];
}

export function createFitCheck(): { readonly evaluatePlan: EvaluatePlan; readonly stats: Readonly<FitCheckStats> } {
  const stats: FitCheckStats = { plans: 0, staleNode: 0, mismatch: 0, overcommit: 0 };

  const evaluatePlan = (state: Snapshot, plan: Plan): PlanWrite[] | undefined => {
    stats.plans++;
    const nodeWrites = new Map<string, PlanWrite>();
    const moves: Move[] = [];
    const delta = new Map<string, { cpu: number; mem: number; allocs: number }>();
    const add = (nodeId: string, cpu: number, mem: number, allocs: number): void => {
      const d = delta.get(nodeId) ?? { cpu: 0, mem: 0, allocs: 0 };
      d.cpu += cpu;
      d.mem += mem;
      d.allocs += allocs;
      delta.set(nodeId, d);
    };
    for (const write of plan.writes) {
      if (write.table === Table.NODES) {
        nodeWrites.set(write.key, write);
        continue;
      }
      if (write.table !== Table.ALLOCS) continue;
      const nodes: string[] = [];
      const before = state.get<AllocRecord>(Table.ALLOCS, write.key)?.value;
      if (before !== undefined) {
        add(before.nodeId, -before.cpuMhz, -before.memoryMb, -1);
        nodes.push(before.nodeId);
      }
      const after = write.delete === true ? undefined : (write.value as AllocRecord);
      if (after !== undefined) {
        add(after.nodeId, after.cpuMhz, after.memoryMb, 1);
        if (!nodes.includes(after.nodeId)) nodes.push(after.nodeId);
      }
      moves.push({ write, nodes });
    }

    const badNodes = new Set<string>();
    for (const move of moves) {
      for (const nodeId of move.nodes) {
        if (!nodeWrites.has(nodeId) && !badNodes.has(nodeId)) {
          badNodes.add(nodeId);
          stats.staleNode++;
        }
      }
    }
    for (const [nodeId, write] of nodeWrites) {
      const current = state.get<NodeRecord>(Table.NODES, nodeId)?.value;
      const next = write.value as NodeRecord | undefined;
      const d = delta.get(nodeId) ?? { cpu: 0, mem: 0, allocs: 0 };
      if (current === undefined || next === undefined) {
        badNodes.add(nodeId);
        stats.mismatch++;
      } else if (
        next.usedCpuMhz !== current.usedCpuMhz + d.cpu ||
        next.usedMemoryMb !== current.usedMemoryMb + d.mem ||
        next.allocs !== current.allocs + d.allocs ||
        next.cpuMhz !== current.cpuMhz ||
        next.memoryMb !== current.memoryMb
      ) {
        badNodes.add(nodeId);
        stats.mismatch++;
      } else if (next.usedCpuMhz > next.cpuMhz || next.usedMemoryMb > next.memoryMb || next.usedCpuMhz < 0 || next.usedMemoryMb < 0) {
        badNodes.add(nodeId);
        stats.overcommit++;
      }
    }
    if (badNodes.size === 0) return undefined;

    // Spread the rejection: an allocation write on a bad node goes, and so does the accounting of its other node.
    const rejected = new Set<PlanWrite>();
    for (let changed = true; changed; ) {
      changed = false;
      for (const move of moves) {
        if (rejected.has(move.write) || !move.nodes.some((n) => badNodes.has(n))) continue;
        rejected.add(move.write);
        for (const n of move.nodes) badNodes.add(n);
        changed = true;
      }
    }
    for (const nodeId of badNodes) {
      const write = nodeWrites.get(nodeId);
      if (write !== undefined) rejected.add(write);
    }
    return [...rejected];
  };

  return { evaluatePlan, stats };
}
