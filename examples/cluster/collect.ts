/**
 * Garbage collection of finished batch allocations as a pure function of a snapshot: the plan deletes every
 * allocation whose `finishAt` has passed and writes each touched node's used capacity back, guarded by the
 * versions read (the same shape of plan the schedulers return, so the same fit check applies).
 */
import type { Plan, PlanWrite, Snapshot } from '../../src/index.js';
import { Table, type AllocRecord, type NodeRecord } from './model.js';

export function collectFinished(snapshot: Snapshot, now: number, checkCancel: () => void = () => {}): { plan: Plan | undefined; finished: number } {
  const writes: PlanWrite[] = [];
  const freed = new Map<string, { cpu: number; mem: number; allocs: number }>();
  let n = 0;
  for (const record of snapshot.list<AllocRecord>(Table.ALLOCS)) {
    if (++n % 1024 === 0) checkCancel();
    const alloc = record.value;
    if (alloc.finishAt === undefined || alloc.finishAt > now) continue;
    writes.push({ table: Table.ALLOCS, key: record.key, delete: true, readIndex: record.modifyIndex });
    const f = freed.get(alloc.nodeId) ?? { cpu: 0, mem: 0, allocs: 0 };
    f.cpu += alloc.cpuMhz;
    f.mem += alloc.memoryMb;
    f.allocs++;
    freed.set(alloc.nodeId, f);
  }
  const finished = writes.length;
  for (const [nodeId, f] of freed) {
    const node = snapshot.get<NodeRecord>(Table.NODES, nodeId);
    if (node === undefined) continue;
    const value: NodeRecord = {
      ...node.value,
      usedCpuMhz: node.value.usedCpuMhz - f.cpu,
      usedMemoryMb: node.value.usedMemoryMb - f.mem,
      allocs: node.value.allocs - f.allocs,
    };
    writes.push({ table: Table.NODES, key: nodeId, value, readIndex: node.modifyIndex });
  }
  return { plan: writes.length === 0 ? undefined : { writes }, finished };
}
