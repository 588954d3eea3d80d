/**
 * What becomes of an unsettled item when the thread it was on ended, read from its slot (which threads change only
 * by CAS, so what it says is what the thread did).
 */
import { SlotState, ThreadPhase } from '../slots/slot-layout.js';
import type { SlotTable } from '../slots/slot-table.js';
import type { PendingItem } from './pending-item.js';

/**
 * `lost`: it ran on thread `dead`. `again` (it runs again): it finished there and only its result died with the
 * thread, or it was pinned there and never started. `canceled`: it was pinned there and canceled before it started.
 * Undefined: it was not the dead thread's.
 */
export function fateOf(slots: SlotTable, pending: PendingItem, dead: number): 'lost' | 'again' | 'canceled' | undefined {
  const { slot, generation } = pending.item;
  const current = slots.generation(slot) === generation;
  const state = slots.state(slot);
  const owner = slots.owner(slot);
  if (current && (state === SlotState.RUNNING || state === SlotState.CANCEL) && owner === dead + 1) {
    // It did nothing wrong when it had finished: it runs again, as if it had not started.
    if (state === SlotState.RUNNING && slots.phase(slot) === ThreadPhase.FINISHED && slots.unstart(slot, generation)) return 'again';
    return 'lost';
  }
  if (pending.pinnedTo === dead) {
    if (current && state === SlotState.CLAIMED) return 'again';
    if (current && state === SlotState.CANCEL && owner <= 0) return 'canceled';
    return 'lost';
  }
  return undefined;
}
