import { isSharedArrayBuffer } from 'node:util/types';
import { InvalidArgumentError, InvalidStateError } from '../errors.js';
import {
  CANCELED_UNSTARTED,
  GENERATION_MASK,
  MAX_SLOTS,
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
 * Every method that takes a slot number rejects one that is not an integer below `capacity` (`InvalidArgumentError`):
 * a fraction or a negative number would otherwise reach `Atomics` as a different word (`0.25` is slot 0's heartbeat).
 *
 * Allocation (`allocate`/`release`) is main-thread only; the state words are shared. Invariants of the allocator:
 * - `#live` maps the base of every range handed out and not yet released to its count; `#allocated` is their sum.
 *   `release` takes exactly such a range, so a double or partial release is an error, not a silent overlap.
 * - The free ranges below `#next` are `[#freeStarts[i], #freeEnds[i])`, sorted, disjoint and never adjacent (a
 *   released range merges with its neighbours). None ends at `#next`: free space at the end goes back to `#next`.
 * - Live ranges, free ranges and `[#next, capacity)` partition the table.
 * - `#largestFree` is at least the longest free range (an upper bound, made exact by a scan that finds no fit), so a
 *   request that fits no hole skips the scan.
 */
export class SlotTable {
  readonly #buffer: SharedArrayBuffer;
  readonly #words: Int32Array;
  readonly #maxSlots: number;
  /**
   * Slots known to be in the buffer: the hot-path bound for slot numbers. The buffer only grows, so a stale value is
   * too small, never too large; a pool thread refreshes it on a miss (main grew the buffer without telling it).
   */
  #capacity: number;
  #next = 0;
  readonly #live = new Map<number, number>();
  readonly #freeStarts: number[] = [];
  readonly #freeEnds: number[] = [];
  #largestFree = 0;
  #allocated = 0;

  private constructor(buffer: SharedArrayBuffer) {
    this.#buffer = buffer;
    // A view without a length tracks the growable buffer's current length.
    this.#words = new Int32Array(buffer);
    this.#maxSlots = Math.floor((buffer.growable ? buffer.maxByteLength : buffer.byteLength) / SLOT_BYTES);
    this.#capacity = buffer.byteLength / SLOT_BYTES;
  }

  /**
   * A new table (main thread). `maxSlots` bounds the address space reserved for growth; `initialSlots` defaults to
   * 1024, or to `maxSlots` when that is smaller.
   */
  static create(options: { initialSlots?: number; maxSlots?: number } = {}): SlotTable {
    const maxSlots = options.maxSlots ?? 1 << 22;
    if (!Number.isInteger(maxSlots) || maxSlots < 1 || maxSlots > MAX_SLOTS) {
      throw new InvalidArgumentError('maxSlots', `an integer from 1 to ${MAX_SLOTS}`, maxSlots);
    }
    const initialSlots = options.initialSlots ?? Math.min(1024, maxSlots);
    if (!Number.isInteger(initialSlots) || initialSlots < 1 || initialSlots > maxSlots) {
      throw new InvalidArgumentError('initialSlots', `an integer from 1 to maxSlots (${maxSlots})`, initialSlots);
    }
    const buffer = new SharedArrayBuffer(initialSlots * SLOT_BYTES, { maxByteLength: maxSlots * SLOT_BYTES });
    return new SlotTable(buffer);
  }

  /**
   * The same table seen from a pool thread: `buffer` is the main table's `buffer`. Anything else (not shared, or not
   * a whole number of slots) is rejected, since a misfit buffer would put every slot's fields at the wrong words.
   */
  static attach(buffer: SharedArrayBuffer): SlotTable {
    if (!isSharedArrayBuffer(buffer)) {
      throw new InvalidArgumentError('buffer', 'a SharedArrayBuffer (the `buffer` of a SlotTable)', buffer);
    }
    const { byteLength } = buffer;
    if (byteLength < SLOT_BYTES || byteLength % SLOT_BYTES !== 0) {
      throw new InvalidArgumentError('buffer.byteLength', `a positive multiple of ${SLOT_BYTES} (bytes per slot)`, byteLength);
    }
    const reserved = buffer.growable ? buffer.maxByteLength : byteLength;
    if (reserved % SLOT_BYTES !== 0 || reserved > MAX_SLOTS * SLOT_BYTES) {
      throw new InvalidArgumentError(
        buffer.growable ? 'buffer.maxByteLength' : 'buffer.byteLength',
        `a multiple of ${SLOT_BYTES} (bytes per slot) of at most ${MAX_SLOTS * SLOT_BYTES}`,
        reserved,
      );
    }
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

  /**
   * Reserves `count` contiguous slots and returns the first. Takes the lowest free range that fits (first fit), and
   * only past the end of the used part, growing the buffer when needed, when none does. The slots are `IDLE` as
   * long as nobody touched them outside a range of their own.
   */
  allocate(count: number): number {
    if (!Number.isInteger(count) || count < 1) throw new InvalidArgumentError('count', 'a positive integer', count);
    let base = count <= this.#largestFree ? this.#takeFree(count) : -1;
    if (base < 0) {
      base = this.#next;
      const end = base + count;
      if (end > this.#capacity) this.#grow(end); // throws before anything changed when the table is full
      this.#next = end;
    }
    this.#live.set(base, count);
    this.#allocated += count;
    return base;
  }

  /**
   * Returns a range from `allocate`: `base` and `count` exactly as allocated, not yet released, every slot `IDLE`
   * (finish or cancel+finish first). Throws, changing nothing, otherwise.
   */
  release(base: number, count: number): void {
    const live = this.#live.get(base);
    if (live === undefined) {
      throw new InvalidArgumentError('base', 'the first slot of a range from allocate() that is not yet released', base);
    }
    if (live !== count) {
      throw new InvalidArgumentError('count', `${live} (the size of the range allocated at slot ${base})`, count);
    }
    for (let slot = base; slot < base + count; slot++) {
      const state = this.state(slot);
      if (state !== SlotState.IDLE) {
        throw new InvalidStateError(`Expected slot ${slot} to be IDLE before release, got state ${state}`);
      }
    }
    this.#live.delete(base);
    this.#allocated -= count;
    const first = base | 0; // a live base is a small non-negative integer; `| 0` turns a -0 that found slot 0 into 0
    this.#addFree(first, first + count);
  }

  state(slot: number): SlotStateValue {
    return wordState(Atomics.load(this.#words, this.#at(slot, SlotField.WORD)));
  }

  generation(slot: number): number {
    return wordGeneration(Atomics.load(this.#words, this.#at(slot, SlotField.WORD)));
  }

  /** Main: `IDLE→CLAIMED`. Returns the claim's generation, or -1 when the slot is not idle. */
  claim(slot: number): number {
    const at = this.#at(slot, SlotField.WORD);
    const word = Atomics.load(this.#words, at);
    if (wordState(word) !== SlotState.IDLE) return -1;
    const generation = wordGeneration(word);
    const seen = Atomics.compareExchange(this.#words, at, word, packWord(SlotState.CLAIMED, generation));
    return seen === word ? generation : -1;
  }

  /** Thread: `CLAIMED→RUNNING` for `generation`. False when canceled or stale: the item must be skipped. */
  start(slot: number, generation: number, owner = 0): boolean {
    const at = this.#at(slot, SlotField.WORD);
    const expected = packWord(SlotState.CLAIMED, generation);
    if (Atomics.compareExchange(this.#words, at, expected, packWord(SlotState.RUNNING, generation)) !== expected) {
      return false;
    }
    Atomics.store(this.#words, slotIndex(slot, SlotField.OWNER), owner); // `slot` was checked above
    return true;
  }

  /**
   * Main: `RUNNING→CLAIMED` for `generation`, as if the item had never started. Only for an item whose thread died
   * after finishing it but before sending its result: nothing else can touch the word then, and the item is
   * dispatched again. False when the slot is not running at that generation.
   */
  unstart(slot: number, generation: number): boolean {
    const at = this.#at(slot, SlotField.WORD);
    const expected = packWord(SlotState.RUNNING, generation);
    if (Atomics.compareExchange(this.#words, at, expected, packWord(SlotState.CLAIMED, generation)) !== expected) return false;
    // `slot` was checked above.
    Atomics.store(this.#words, slotIndex(slot, SlotField.HEARTBEAT), 0);
    Atomics.store(this.#words, slotIndex(slot, SlotField.OWNER), 0);
    Atomics.store(this.#words, slotIndex(slot, SlotField.PHASE), ThreadPhase.NONE);
    return true;
  }

  /**
   * Main: `CLAIMED|RUNNING→CANCEL` for `generation`. False when the slot is idle, already canceled or stale. A cancel
   * from `CLAIMED` wins the race with every thread's start CAS: `OWNER` then says so (`CANCELED_UNSTARTED`), for
   * `canceledBeforeStart`.
   */
  cancel(slot: number, generation: number): boolean {
    const at = this.#at(slot, SlotField.WORD);
    const unstarted = packWord(SlotState.CLAIMED, generation);
    const canceled = packWord(SlotState.CANCEL, generation);
    if (Atomics.compareExchange(this.#words, at, unstarted, canceled) === unstarted) {
      // Main is the only writer of OWNER while the word is CLAIMED or CANCEL-before-start, so the store cannot race.
      Atomics.store(this.#words, slotIndex(slot, SlotField.OWNER), CANCELED_UNSTARTED); // `slot` was checked above
      return true;
    }
    const running = packWord(SlotState.RUNNING, generation);
    return Atomics.compareExchange(this.#words, at, running, canceled) === running;
  }

  /**
   * Main: the item of `generation` was canceled before any thread started it (no thread ever will): nothing holds
   * it, and its dispatch can settle without waiting for a thread to say so.
   */
  canceledBeforeStart(slot: number, generation: number): boolean {
    const word = Atomics.load(this.#words, this.#at(slot, SlotField.WORD));
    return (
      word === packWord(SlotState.CANCEL, generation) &&
      Atomics.load(this.#words, slotIndex(slot, SlotField.OWNER)) === CANCELED_UNSTARTED // `slot` was checked above
    );
  }

  /**
   * Main: `CLAIMED|RUNNING|CANCEL→IDLE` with generation+1. False for a stale completion (the generation moved on)
   * or an idle slot: nothing changes then.
   */
  finish(slot: number, generation: number): boolean {
    const at = this.#at(slot, SlotField.WORD);
    const word = Atomics.load(this.#words, at);
    if (wordGeneration(word) !== (generation & GENERATION_MASK) || wordState(word) === SlotState.IDLE) return false;
    const next = packWord(SlotState.IDLE, (generation + 1) & GENERATION_MASK);
    if (Atomics.compareExchange(this.#words, at, word, next) !== word) return false;
    // `slot` was checked above.
    Atomics.store(this.#words, slotIndex(slot, SlotField.HEARTBEAT), 0);
    Atomics.store(this.#words, slotIndex(slot, SlotField.OWNER), 0);
    Atomics.store(this.#words, slotIndex(slot, SlotField.PHASE), ThreadPhase.NONE);
    return true;
  }

  /** Thread: has main asked the item of `generation` to stop (or moved past it)? */
  isCanceled(slot: number, generation: number): boolean {
    const word = Atomics.load(this.#words, this.#at(slot, SlotField.WORD));
    return wordState(word) === SlotState.CANCEL || wordGeneration(word) !== (generation & GENERATION_MASK);
  }

  /** Thread: "still working". Ignored unless the slot still holds `generation`. */
  heartbeat(slot: number, generation: number): void {
    if (wordGeneration(Atomics.load(this.#words, this.#at(slot, SlotField.WORD))) !== (generation & GENERATION_MASK)) return;
    Atomics.add(this.#words, slotIndex(slot, SlotField.HEARTBEAT), 1); // `slot` was checked above
  }

  /** Heartbeats counted for the slot's current item. */
  heartbeats(slot: number): number {
    return Atomics.load(this.#words, this.#at(slot, SlotField.HEARTBEAT));
  }

  /** Pool-thread index (+1) that started the slot's current item; 0 when none, -1 when canceled before any start. */
  owner(slot: number): number {
    return Atomics.load(this.#words, this.#at(slot, SlotField.OWNER));
  }

  /** Thread: records what it is doing with the item of `generation` (ignored when stale). */
  setPhase(slot: number, generation: number, phase: ThreadPhaseValue): void {
    if (wordGeneration(Atomics.load(this.#words, this.#at(slot, SlotField.WORD))) !== (generation & GENERATION_MASK)) return;
    Atomics.store(this.#words, slotIndex(slot, SlotField.PHASE), phase); // `slot` was checked above
  }

  /** What the thread last said it is doing with the slot's item. */
  phase(slot: number): ThreadPhaseValue {
    return Atomics.load(this.#words, this.#at(slot, SlotField.PHASE)) as ThreadPhaseValue;
  }

  /** Slots in `[base, base+count)` that are not idle. Any range within `capacity`, allocated or not. */
  busy(base: number, count: number): number {
    if (!Number.isInteger(base) || !Number.isInteger(count) || base < 0 || count < 0 || base + count > this.#capacity) {
      this.#checkRange(base, count);
    }
    let n = 0;
    for (let slot = base; slot < base + count; slot++) if (this.state(slot) !== SlotState.IDLE) n++;
    return n;
  }

  /**
   * The word index of `field` of `slot`, checked: every `Atomics` call goes through here. The common case costs a
   * type check and two comparisons against a cached capacity, no allocation; the rest (a miss on a thread after
   * growth, or a bad slot) is out of line.
   */
  #at(slot: number, field: number): number {
    // `typeof` first: `>>>` would throw a bare TypeError for a BigInt and call `valueOf` on an object.
    if (typeof slot !== 'number' || (slot >>> 0) !== slot || slot >= this.#capacity) this.#checkSlot(slot);
    return slotIndex(slot, field);
  }

  #checkSlot(slot: number): void {
    this.#capacity = this.#buffer.byteLength / SLOT_BYTES;
    if (typeof slot !== 'number' || (slot >>> 0) !== slot || slot >= this.#capacity) {
      throw new InvalidArgumentError('slot', `an integer from 0 to ${this.#capacity - 1}`, slot);
    }
  }

  #checkRange(base: number, count: number): void {
    this.#capacity = this.#buffer.byteLength / SLOT_BYTES;
    if (!Number.isInteger(base) || base < 0 || base > this.#capacity) {
      throw new InvalidArgumentError('base', `an integer from 0 to ${this.#capacity}`, base);
    }
    if (!Number.isInteger(count) || count < 0 || base + count > this.#capacity) {
      throw new InvalidArgumentError('count', `an integer from 0 to ${this.#capacity - base} (the slots from ${base} on)`, count);
    }
  }

  /** First fit: the base of `count` slots cut from the front of the lowest free range that holds them, or -1. */
  #takeFree(count: number): number {
    const starts = this.#freeStarts;
    const ends = this.#freeEnds;
    let largest = 0;
    for (let i = 0; i < starts.length; i++) {
      const start = starts[i]!;
      const length = ends[i]! - start;
      if (length > count) {
        starts[i] = start + count;
        return start;
      }
      if (length === count) {
        this.#removeFree(i);
        return start;
      }
      if (length > largest) largest = length;
    }
    this.#largestFree = largest;
    return -1;
  }

  /** Frees `[start, end)`: merged with the free ranges it touches, and given back to `#next` when it reaches it. */
  #addFree(start: number, end: number): void {
    const starts = this.#freeStarts;
    const ends = this.#freeEnds;
    // `i`: the first free range after `start` (binary search; the ranges are sorted and disjoint).
    let lo = 0;
    let hi = starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (starts[mid]! < start) lo = mid + 1;
      else hi = mid;
    }
    const i = lo;
    const joinsPrevious = i > 0 && ends[i - 1] === start;
    const joinsNext = i < starts.length && starts[i] === end;
    let at: number;
    if (joinsPrevious && joinsNext) {
      ends[i - 1] = ends[i]!;
      this.#removeFree(i);
      at = i - 1;
    } else if (joinsPrevious) {
      ends[i - 1] = end;
      at = i - 1;
    } else if (joinsNext) {
      starts[i] = start;
      at = i;
    } else {
      this.#insertFree(i, start, end);
      at = i;
    }
    if (ends[at] === this.#next) {
      // The last range (ranges never touch, so the one before it ends short of its start): back to `#next`.
      this.#next = starts[at]!;
      starts.pop();
      ends.pop();
      return;
    }
    const length = ends[at]! - starts[at]!;
    if (length > this.#largestFree) this.#largestFree = length;
  }

  // Shifts by hand: `splice` allocates the array of removed elements on every call.
  #removeFree(i: number): void {
    const starts = this.#freeStarts;
    const ends = this.#freeEnds;
    const last = starts.length - 1;
    for (let k = i; k < last; k++) {
      starts[k] = starts[k + 1]!;
      ends[k] = ends[k + 1]!;
    }
    starts.pop();
    ends.pop();
  }

  #insertFree(i: number, start: number, end: number): void {
    const starts = this.#freeStarts;
    const ends = this.#freeEnds;
    starts.push(start);
    ends.push(end);
    for (let k = starts.length - 1; k > i; k--) {
      starts[k] = starts[k - 1]!;
      ends[k] = ends[k - 1]!;
    }
    starts[i] = start;
    ends[i] = end;
  }

  #grow(neededSlots: number): void {
    if (neededSlots > this.#maxSlots) {
      throw new InvalidStateError(`Expected at most ${this.#maxSlots} slots in the slot table, but ${neededSlots} are needed`);
    }
    const target = Math.min(this.#maxSlots, Math.max(neededSlots, this.capacity * 2));
    this.#buffer.grow(target * SLOT_BYTES);
    this.#capacity = target;
  }
}
