/**
 * What each busy thread runs, read from the items the pool has seen start and from their slots: a thread owns the
 * slot of the item it runs (`owner` = its index + 1, set by the CAS that started it).
 */
import type { SlotTable } from '../slots/slot-table.js';
import type { PendingItem } from './pending-item.js';
import type { RunningItem } from './pool-types.js';

export function runningItems(running: Iterable<PendingItem>, slots: SlotTable): RunningItem[] {
  const items: RunningItem[] = [];
  for (const pending of running) {
    const { item } = pending;
    const owner = slots.generation(item.slot) === item.generation ? slots.owner(item.slot) : 0;
    if (owner <= 0) continue;
    const [id, name] = item.kind === 'eval' ? [item.evaluation.id, item.evaluation.type] : [item.run.runId, item.run.taskId];
    items.push({ threadIndex: owner - 1, kind: item.kind, id, name, startedAt: pending.startedAt, predictedMs: pending.predictedMs, slot: item.slot, generation: item.generation });
  }
  return items.sort((a, b) => a.threadIndex - b.threadIndex);
}
