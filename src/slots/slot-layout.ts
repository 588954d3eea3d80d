/**
 * The memory layout of the slot table, named in one place (no bare offsets elsewhere). Imported by both the main
 * thread and pool threads, so it has no dependencies.
 *
 * Each slot is `SLOT_INT32S` Int32 words:
 * - `WORD`: the state in the low `STATE_BITS` bits and the generation above them. Keeping both in one word lets a
 *   single `Atomics.compareExchange` check the state *and* the generation: a thread that starts a run for an old
 *   generation cannot succeed after main has finished that slot and claimed it again for new work.
 * - `HEARTBEAT`: a counter the thread bumps to say "still working"; main compares it with what it saw last.
 * - `OWNER`: the pool-thread index that started the slot's current run (+1; 0 = none), so a thread crash can be
 *   traced to the slots it held. `CANCELED_UNSTARTED` (-1) when main canceled the item before any thread started it:
 *   no start can succeed after that, so the item holds nothing and can be settled at once.
 * - `PHASE`: what the thread is doing with the item (`ThreadPhase`), read by main for worker status.
 */
export const SlotField = Object.freeze({ WORD: 0, HEARTBEAT: 1, OWNER: 2, PHASE: 3 });
export const SLOT_INT32S = 4;
/** `OWNER` of an item main canceled before any thread started it. */
export const CANCELED_UNSTARTED = -1;
export const SLOT_BYTES = SLOT_INT32S * Int32Array.BYTES_PER_ELEMENT;
/** The most slots a table may reserve (1 GiB of address space); `create` and `attach` both hold buffers to it. */
export const MAX_SLOTS = 1 << 26;

export const SlotState = Object.freeze({
  /** Free: main may claim it. */
  IDLE: 0,
  /** Main claimed it for an item that has not started on a thread yet. */
  CLAIMED: 1,
  /** A thread started the item. */
  RUNNING: 2,
  /** Main asked the item to stop; the thread sees it through `ctx.canceled` without any message. */
  CANCEL: 3,
});
export type SlotStateValue = (typeof SlotState)[keyof typeof SlotState];

export const STATE_BITS = 2;
const STATE_MASK = (1 << STATE_BITS) - 1;
/** Generations wrap within 29 bits so that the packed word stays a non-negative Int32. */
export const GENERATION_MASK = (1 << (31 - STATE_BITS)) - 1;

export function packWord(state: SlotStateValue, generation: number): number {
  return ((generation & GENERATION_MASK) << STATE_BITS) | state;
}

export function wordState(word: number): SlotStateValue {
  return (word & STATE_MASK) as SlotStateValue;
}

export function wordGeneration(word: number): number {
  return word >>> STATE_BITS;
}

export function slotIndex(slot: number, field: number): number {
  return slot * SLOT_INT32S + field;
}

/**
 * What a thread is doing with the item in a slot (the `PHASE` field), so main can report worker activity. `FINISHED`:
 * the item's code has returned and its result waits to be sent; if the thread dies before sending it, the item
 * did no harm and is run again rather than counted lost.
 */
export const ThreadPhase = Object.freeze({ NONE: 0, WAITING_FOR_INDEX: 1, SCHEDULING: 2, RUNNING_TASK: 3, FINISHED: 4 });
export type ThreadPhaseValue = (typeof ThreadPhase)[keyof typeof ThreadPhase];
