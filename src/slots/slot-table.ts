import { InvalidArgumentError, InvalidStateError } from '../errors.js';
import {
  GENERATION_MASK,
  SLOT_BYTES,
  SlotField,
  SlotState,
  packWord,
  slotIndex,
  wordGeneration,
  wordState,
  ThreadPhase,
  type SlotStateValue,
  type ThreadPhaseValue,
} from './slot-layout.js';

/**
 * Slot states in a `SharedArrayBuffer`, changed only with `Atomics.compareExchange`:
 * main claims (`IDLE→CLAIMED`), a thread starts (`CLAIMED→RUNNING`; failing because of `CANCEL` means skip), main
 * finishes (`CLAIMED|RUNNING|CANCEL→IDLE` with generation+1). Every transition names the generation it expects, so
 * a completion or start for an older generation is stale and changes nothing.
 *
 * The buffer is growable (`maxByteLength`) and shared with pool threads once; they see growth without a message.
 * Allocation (`allocate`/`release`) is main-thread only; the state words are shared.
 */
export class SlotTable {
  readonly #buffer: SharedArrayBuffer;
  readonly #words: Int32Array;
  readonly #maxSlots: number;
  #next = 0;
  readonly #free = new Map<number, number[]>();
  #allocated = 0;

  private constructor(buffer: SharedArrayBuffer) {
    this.#buffer = buffer;
    // A view without a length tracks the growable buffer's current length.
    this.#words = new Int32Array(buffer);
    this.#maxSlots = Math.floor((buffer.growable ? buffer.maxByteLength : buffer.byteLength) / SLOT_BYTES);
  }

  /** A new table (main thread). `maxSlots` bounds the address space reserved for growth. */
  static create(options: { initialSlots?: number; maxSlots?: number } = {}): SlotTable {
    const initialSlots = options.initialSlots ?? 1024;
    const maxSlots = options.maxSlots ?? 1 << 22;
    if (!Number.isInteger(maxSlots) || maxSlots < 1 || maxSlots > 1 << 26) {
      throw new InvalidArgumentError('maxSlots', 'an integer from 1 to 67108864', maxSlots);
    }
    if (!Number.isInteger(initialSlots) || initialSlots < 1 || initialSlots > maxSlots) {
      throw new InvalidArgumentError('initialSlots', `an integer from 1 to maxSlots (${maxSlots})`, initialSlots);
    }
    const buffer = new SharedArrayBuffer(initialSlots * SLOT_BYTES, { maxByteLength: maxSlots * SLOT_BYTES });
    return new SlotTable(buffer);
  }

  /** The same table seen from a pool thread. */
  static attach(buffer: SharedArrayBuffer): SlotTable {
    return new SlotTable(buffer);
  }

  get buffer(): SharedArrayBuffer {
    return this.#buffer;
  }

  /** Slots the buffer holds now. */
  get capacity(): number {
    return this.#buffer.byteLength / SLOT_BYTES;
  }

  /** Slots handed out by `allocate` and not released (main thread's view). */
  get allocated(): number {
    return this.#allocated;
  }

  /** Bytes of shared memory in use. */
  get byteLength(): number {
    return this.#buffer.byteLength;
  }

  /** Reserves `count` contiguous slots, all `IDLE`; returns the first. Grows the buffer when needed. */
  allocate(count: number): number {
    if (!Number.isInteger(count) || count < 1) throw new InvalidArgumentError('count', 'a positive integer', count);
    const reuse = this.#free.get(count);
    const base = reuse?.pop();
    if (base !== undefined) {
      this.#allocated += count;
      return base;
    }
    const start = this.#next;
    const end = start + count;
    if (end > this.capacity) this.#grow(end);
    this.#next = end;
    this.#allocated += count;
    return start;
  }

  /** Returns a range from `allocate`. Every slot in it must be `IDLE` (finish or cancel+finish first). */
  release(base: number, count: number): void {
    for (let slot = base; slot < base + count; slot++) {
      const state = this.state(slot);
      if (state !== SlotState.IDLE) {
        throw new InvalidStateError(`Expected slot ${slot} to be IDLE before release, got state ${state}`);
      }
    }
    const list = this.#free.get(count);
    if (list === undefined) this.#free.set(count, [base]);
    else list.push(base);
    this.#allocated -= count;
  }

  state(slot: number): SlotStateValue {
    return wordState(Atomics.load(this.#words, slotIndex(slot, SlotField.WORD)));
  }

  generation(slot: number): number {
    return wordGeneration(Atomics.load(this.#words, slotIndex(slot, SlotField.WORD)));
  }

  /** Main: `IDLE→CLAIMED`. Returns the claim's generation, or -1 when the slot is not idle. */
  claim(slot: number): number {
    const at = slotIndex(slot, SlotField.WORD);
    const word = Atomics.load(this.#words, at);
    if (wordState(word) !== SlotState.IDLE) return -1;
    const generation = wordGeneration(word);
    const seen = Atomics.compareExchange(this.#words, at, word, packWord(SlotState.CLAIMED, generation));
    return seen === word ? generation : -1;
  }

  /** Thread: `CLAIMED→RUNNING` for `generation`. False when canceled or stale: the item must be skipped. */
  start(slot: number, generation: number, owner = 0): boolean {
    const at = slotIndex(slot, SlotField.WORD);
    const expected = packWord(SlotState.CLAIMED, generation);
    if (Atomics.compareExchange(this.#words, at, expected, packWord(SlotState.RUNNING, generation)) !== expected) {
      return false;
    }
    Atomics.store(this.#words, slotIndex(slot, SlotField.OWNER), owner);
    return true;
  }

  /** Main: `CLAIMED|RUNNING→CANCEL` for `generation`. False when the slot is idle, already canceled or stale. */
  cancel(slot: number, generation: number): boolean {
    const at = slotIndex(slot, SlotField.WORD);
    for (const from of [SlotState.CLAIMED, SlotState.RUNNING] as const) {
      const expected = packWord(from, generation);
      if (Atomics.compareExchange(this.#words, at, expected, packWord(SlotState.CANCEL, generation)) === expected) return true;
    }
    return false;
  }

  /**
   * Main: `CLAIMED|RUNNING|CANCEL→IDLE` with generation+1. False for a stale completion (the generation moved on)
   * or an idle slot: nothing changes then.
   */
  finish(slot: number, generation: number): boolean {
    const at = slotIndex(slot, SlotField.WORD);
    const word = Atomics.load(this.#words, at);
    if (wordGeneration(word) !== (generation & GENERATION_MASK) || wordState(word) === SlotState.IDLE) return false;
    const next = packWord(SlotState.IDLE, (generation + 1) & GENERATION_MASK);
    if (Atomics.compareExchange(this.#words, at, word, next) !== word) return false;
    Atomics.store(this.#words, slotIndex(slot, SlotField.HEARTBEAT), 0);
    Atomics.store(this.#words, slotIndex(slot, SlotField.OWNER), 0);
    Atomics.store(this.#words, slotIndex(slot, SlotField.PHASE), ThreadPhase.NONE);
    return true;
  }

  /** Thread: has main asked the item of `generation` to stop (or moved past it)? */
  isCanceled(slot: number, generation: number): boolean {
    const word = Atomics.load(this.#words, slotIndex(slot, SlotField.WORD));
    return wordState(word) === SlotState.CANCEL || wordGeneration(word) !== (generation & GENERATION_MASK);
  }

  /** Thread: "still working". Ignored unless the slot still holds `generation`. */
  heartbeat(slot: number, generation: number): void {
    if (wordGeneration(Atomics.load(this.#words, slotIndex(slot, SlotField.WORD))) !== (generation & GENERATION_MASK)) return;
    Atomics.add(this.#words, slotIndex(slot, SlotField.HEARTBEAT), 1);
  }

  /** Heartbeats counted for the slot's current item. */
  heartbeats(slot: number): number {
    return Atomics.load(this.#words, slotIndex(slot, SlotField.HEARTBEAT));
  }

  /** Pool-thread index (+1) that started the slot's current item; 0 when none. */
  owner(slot: number): number {
    return Atomics.load(this.#words, slotIndex(slot, SlotField.OWNER));
  }

  /** Thread: records what it is doing with the item of `generation` (ignored when stale). */
  setPhase(slot: number, generation: number, phase: ThreadPhaseValue): void {
    if (wordGeneration(Atomics.load(this.#words, slotIndex(slot, SlotField.WORD))) !== (generation & GENERATION_MASK)) return;
    Atomics.store(this.#words, slotIndex(slot, SlotField.PHASE), phase);
  }

  /** What the thread last said it is doing with the slot's item. */
  phase(slot: number): ThreadPhaseValue {
    return Atomics.load(this.#words, slotIndex(slot, SlotField.PHASE)) as ThreadPhaseValue;
  }

  /** Slots in `[base, base+count)` that are not idle. */
  busy(base: number, count: number): number {
    let n = 0;
    for (let slot = base; slot < base + count; slot++) if (this.state(slot) !== SlotState.IDLE) n++;
    return n;
  }

  #grow(neededSlots: number): void {
    if (neededSlots > this.#maxSlots) {
      throw new InvalidStateError(`Expected at most ${this.#maxSlots} slots in the slot table, but ${neededSlots} are needed`);
    }
    const target = Math.min(this.#maxSlots, Math.max(neededSlots, this.capacity * 2));
    this.#buffer.grow(target * SLOT_BYTES);
  }
}
