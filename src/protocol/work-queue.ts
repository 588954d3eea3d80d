/**
 * The work queue: the items main has dispatched and no thread has started, in shared memory. Main writes each item
 * once; a thread that is free takes the best one. No thread holds work it has not started, so no unstarted item
 * waits behind a busy thread while another is free, and what order the broker decided survives into the pool:
 * highest priority first, FIFO within a priority. Imported by both sides.
 *
 * Three shared buffers:
 * - control (`Int32Array`): the doorbell main arms for results (`MAIN_ARMED`), the parked-thread count and one park
 *   word per thread (`PARK_*`), a count of items each thread took (`TAKEN_*`, for idle detection), a 128-bit map of
 *   the priority levels that may hold items (`LEVELS`), and the directory of level rings (`RING_AT`: where each
 *   level's ring starts, 0 until main first uses that level);
 * Views over the growable buffers are made without a length, so they follow the buffer as main grows it, on every
 * thread, with no message.
 * - rings (growable): per level in use, `HEAD` (advanced by the threads with a CAS), `TAIL` (stored by main after it
 *   wrote the entry), and `RING_ENTRIES` entries of `[slot, generation]`;
 * - records (growable, one `RECORD_BYTES` record per slot of the slot table): the item main wrote for the slot's
 *   current claim. `GENERATION` is stored last, with `Atomics.store`, after the body; a body that does not fit inline
 *   lives in the overflow arena (growable), at `BODY_AT`.
 *
 * Taking an item (a thread): pick the highest level whose bit is set, CAS that ring's `HEAD` past one entry, check
 * that the slot's record still holds that entry's generation, then `SlotTable.start` (CAS `CLAIMED→RUNNING`): that CAS
 * decides every race. An entry whose item was canceled before it started (its word is `CANCEL`), or whose slot moved
 * on (a newer claim), fails it and is skipped. Main never waits for a thread: a full ring leaves the item in main's
 * backlog until there is room (`WorkQueueWriter.publish` says so).
 *
 * Parking (a thread with nothing to take): `PARK` 1, re-check, then `Atomics.waitAsync` on it, so the thread's event
 * loop still runs its timers and messages. Main, after it published work, wakes a parked thread by CAS `1→2` and
 * `Atomics.notify`. Only a parked thread costs main a notify.
 */

export const MAX_PRIORITY = 100;
/** Entries per level ring; items beyond wait in main's backlog. */
export const RING_ENTRIES = 1024;
export const RECORD_BYTES = 256;

const C = Object.freeze({
  MAIN_ARMED: 0,
  PARKED: 1,
  LEVELS: 4, // LEVEL_WORDS words: levels 0..127
  RING_AT: 8, // MAX_PRIORITY + 1 words
});
const PARK_BASE = C.RING_AT + MAX_PRIORITY + 1;
/** Words of the `LEVELS` bit map: one bit per priority level, 0..127. */
const LEVEL_WORDS = 4;

/** Park word states. */
export const Park = Object.freeze({ AWAKE: 0, PARKED: 1, WOKEN: 2 });

/** Ring layout, in Int32 words from the ring's start. */
const R = Object.freeze({ HEAD: 0, TAIL: 1, ENTRIES: 2 });
const RING_WORDS = R.ENTRIES + 2 * RING_ENTRIES;

/**
 * Record layout, by byte: `GENERATION`, `LENGTH`, `BODY_AT`, `PREDICTED_US` (Int32 words 0–3), the start stamp
 * (Float64 at byte 16: its own 8 bytes, clear of the words), then the inline body.
 */
const REC = Object.freeze({ GENERATION: 0, LENGTH: 1, BODY_AT: 2, PREDICTED_US: 3, STARTED_F64: 2 });
/** `PREDICTED_US` of an item whose run time main could not predict. */
const UNPREDICTED = -1;
const INLINE_AT = 24;
export const INLINE_BODY_BYTES = RECORD_BYTES - INLINE_AT;
/** `BODY_AT` of a body stored inline. */
const INLINE = -1;

function controlWords(maxThreads: number): number {
  return PARK_BASE + 2 * maxThreads;
}

/** What main shares with a thread at its start. */
export interface WorkQueueBuffers {
  readonly control: SharedArrayBuffer;
  readonly rings: SharedArrayBuffer;
  readonly records: SharedArrayBuffer;
  readonly overflow: SharedArrayBuffer;
}

/** One entry taken from the queue: the slot and generation of the item, whose record the taker reads. */
export interface TakenEntry {
  readonly slot: number;
  readonly generation: number;
}

const MAX_GROWABLE = 1 << 30;

function growable(initial: number, max = MAX_GROWABLE): SharedArrayBuffer {
  return new SharedArrayBuffer(initial, { maxByteLength: max });
}

/** Main's side: writes items, publishes them by priority, wakes parked threads, arms the results doorbell. */
export class WorkQueueWriter {
  readonly buffers: WorkQueueBuffers;
  readonly #control: Int32Array;
  readonly #maxThreads: number;
  readonly #rings: Int32Array;
  readonly #records: Uint8Array;
  readonly #recordWords: Int32Array;
  readonly #recordFloats: Float64Array;
  readonly #overflow: Uint8Array;
  /** Next free byte of the rings buffer (rings are laid out as levels come into use). */
  #ringsEnd = 0;
  /** Overflow arena: the region each slot owns, and regions given up, by size class (a power of two). */
  readonly #regions = new Map<number, { readonly at: number; readonly bytes: number }>();
  readonly #free = new Map<number, number[]>();
  #overflowEnd = 0;

  constructor(maxThreads: number, slots: number) {
    this.#maxThreads = maxThreads;
    const control = new SharedArrayBuffer(controlWords(maxThreads) * 4);
    const rings = growable(8 * RING_WORDS * 4);
    const records = growable(Math.max(1, slots) * RECORD_BYTES);
    const overflow = growable(64 * 1024);
    this.buffers = Object.freeze({ control, rings, records, overflow });
    this.#control = new Int32Array(control);
    this.#rings = new Int32Array(rings);
    this.#records = new Uint8Array(records);
    this.#recordWords = new Int32Array(records);
    this.#recordFloats = new Float64Array(records);
    this.#overflow = new Uint8Array(overflow);
    // Ring 0 of the rings buffer is never a level's (RING_AT 0 means "not in use").
    this.#ringsEnd = RING_WORDS * 4;
  }

  /**
   * Writes the item of `slot` at claim `generation` (its body: an item record's bytes), then publishes it at
   * `priority`. False when that level's ring is full: nothing is published (the caller keeps it and publishes again
   * once threads made room), though the record is written.
   */
  publish(slot: number, generation: number, priority: number, body: Uint8Array, predictedMs?: number): boolean {
    this.#write(slot, generation, body, predictedMs);
    return this.#enqueue(slot, generation, priority);
  }

  /**
   * Writes the item of `slot` at claim `generation` into its record, without publishing it (see `enqueue`), with how
   * long main predicts it runs (undefined: no prediction), which tells the thread before it whether its result may
   * wait for company.
   */
  write(slot: number, generation: number, body: Uint8Array, predictedMs?: number): void {
    this.#write(slot, generation, body, predictedMs);
  }

  /** Publishes an item whose record was written already; false when the level's ring is full. */
  enqueue(slot: number, generation: number, priority: number): boolean {
    return this.#enqueue(slot, generation, priority);
  }

  /** Publishes an item whose record was written already (one that waited in main's backlog). */
  republish(slot: number, generation: number, priority: number): boolean {
    return this.#enqueue(slot, generation, priority);
  }

  /** Entries of `priority`'s ring the threads have taken so far (its `HEAD`); 0 for a level never used. */
  taken(priority: number): number {
    const at = this.#control[C.RING_AT + priority]!;
    return at === 0 ? 0 : Atomics.load(this.#rings, at / 4 + R.HEAD);
  }

  /** The epoch ms a thread recorded as the start of the slot's current item (0 before it started). */
  startedAt(slot: number): number {
    if ((slot + 1) * RECORD_BYTES > this.#records.byteLength) return 0;
    return this.#recordFloats[(slot * RECORD_BYTES) / 8 + REC.STARTED_F64]!;
  }

  /** Clears the level bits of rings that are empty: a thread then does not look at them. */
  tidyLevels(): void {
    for (let p = 1; p <= MAX_PRIORITY; p++) {
      const at = Atomics.load(this.#control, C.RING_AT + p);
      if (at === 0) continue;
      const base = at / 4;
      if (Atomics.load(this.#rings, base + R.HEAD) === Atomics.load(this.#rings, base + R.TAIL)) {
        Atomics.and(this.#control, C.LEVELS + (p >> 5), ~(1 << (p & 31)));
      }
    }
  }

  /** Items published and not yet taken, at every level. */
  waiting(): number {
    let n = 0;
    for (let p = 1; p <= MAX_PRIORITY; p++) {
      const at = Atomics.load(this.#control, C.RING_AT + p);
      if (at === 0) continue;
      const base = at / 4;
      n += (Atomics.load(this.#rings, base + R.TAIL) - Atomics.load(this.#rings, base + R.HEAD)) | 0;
    }
    return n;
  }

  /** Threads parked now. */
  get parked(): number {
    return Atomics.load(this.#control, C.PARKED);
  }

  /** Wakes up to `count` parked threads; returns how many it woke. */
  wake(count: number): number {
    let woken = 0;
    for (let t = 0; t < this.#maxThreads && woken < count; t++) {
      if (Atomics.compareExchange(this.#control, PARK_BASE + t, Park.PARKED, Park.WOKEN) !== Park.PARKED) continue;
      Atomics.sub(this.#control, C.PARKED, 1);
      Atomics.notify(this.#control, PARK_BASE + t);
      woken++;
    }
    return woken;
  }

  /** Wakes thread `t` if it is parked (an item was pinned to it, or it was asked to stop). */
  wakeThread(t: number): void {
    if (Atomics.compareExchange(this.#control, PARK_BASE + t, Park.PARKED, Park.WOKEN) === Park.PARKED) Atomics.sub(this.#control, C.PARKED, 1);
    Atomics.notify(this.#control, PARK_BASE + t);
  }

  /** Wakes every parked thread (a stop, a control message). */
  wakeAll(): void {
    this.wake(this.#maxThreads);
    for (let t = 0; t < this.#maxThreads; t++) Atomics.notify(this.#control, PARK_BASE + t);
  }

  /** Whether thread `t` is parked, and how many items it has taken (for idle detection). */
  parkState(t: number): { readonly parked: boolean; readonly taken: number } {
    return { parked: Atomics.load(this.#control, PARK_BASE + t) === Park.PARKED, taken: Atomics.load(this.#control, PARK_BASE + this.#maxThreads + t) };
  }

  /** Arms the results doorbell: the next thread with a result tells main (once). */
  armDoorbell(): void {
    Atomics.store(this.#control, C.MAIN_ARMED, 1);
  }

  /** Takes the doorbell back (main will look at the results itself); true when it was still armed. */
  disarmDoorbell(): boolean {
    return Atomics.compareExchange(this.#control, C.MAIN_ARMED, 1, 0) === 1;
  }

  #write(slot: number, generation: number, body: Uint8Array, predictedMs: number | undefined): void {
    this.#ensureRecord(slot);
    const at = slot * RECORD_BYTES;
    const words = at / 4;
    this.#recordFloats[at / 8 + REC.STARTED_F64] = 0;
    this.#recordWords[words + REC.PREDICTED_US] =
      predictedMs !== undefined && predictedMs >= 0 && Number.isFinite(predictedMs) ? Math.min(0x7fffffff, Math.round(predictedMs * 1000)) : UNPREDICTED;
    if (body.length <= INLINE_BODY_BYTES) {
      this.#records.set(body, at + INLINE_AT);
      this.#recordWords[words + REC.BODY_AT] = INLINE;
    } else {
      const region = this.#region(slot, body.length);
      this.#overflow.set(body, region);
      this.#recordWords[words + REC.BODY_AT] = region;
    }
    this.#recordWords[words + REC.LENGTH] = body.length;
    // Last: a thread that reads this generation reads the body above.
    Atomics.store(this.#recordWords, words + REC.GENERATION, generation);
  }

  #enqueue(slot: number, generation: number, priority: number): boolean {
    const base = this.#ring(priority) / 4;
    const tail = Atomics.load(this.#rings, base + R.TAIL);
    if (((tail - Atomics.load(this.#rings, base + R.HEAD)) | 0) >= RING_ENTRIES) return false;
    const entry = base + R.ENTRIES + 2 * (tail & (RING_ENTRIES - 1));
    this.#rings[entry] = slot;
    this.#rings[entry + 1] = generation;
    Atomics.store(this.#rings, base + R.TAIL, (tail + 1) | 0);
    Atomics.or(this.#control, C.LEVELS + (priority >> 5), 1 << (priority & 31));
    return true;
  }

  /** Byte offset of `priority`'s ring in the rings buffer, laid out on first use. */
  #ring(priority: number): number {
    const known = this.#control[C.RING_AT + priority]!;
    if (known !== 0) return known;
    const at = this.#ringsEnd;
    const need = at + RING_WORDS * 4;
    const rings = this.buffers.rings;
    if (need > rings.byteLength) rings.grow(Math.min(rings.maxByteLength, Math.max(need, rings.byteLength * 2)));
    this.#ringsEnd = need;
    Atomics.store(this.#control, C.RING_AT + priority, at);
    return at;
  }

  #ensureRecord(slot: number): void {
    const need = (slot + 1) * RECORD_BYTES;
    const records = this.buffers.records;
    if (need > records.byteLength) records.grow(Math.min(records.maxByteLength, Math.max(need, records.byteLength * 2)));
  }

  /**
   * The overflow region of `slot` for a body of `bytes`: its own if big enough, else a region of the next power of
   * two (one given up earlier, or new at the end), the old one given up. A slot's region is rewritten only for the
   * slot's next claim, once no thread can still be reading the body of the one before.
   */
  #region(slot: number, bytes: number): number {
    const mine = this.#regions.get(slot);
    if (mine !== undefined && mine.bytes >= bytes) return mine.at;
    if (mine !== undefined) {
      let list = this.#free.get(mine.bytes);
      if (list === undefined) this.#free.set(mine.bytes, (list = []));
      list.push(mine.at);
    }
    const size = 2 ** Math.ceil(Math.log2(bytes));
    let at = this.#free.get(size)?.pop();
    if (at === undefined) {
      at = this.#overflowEnd;
      const need = at + size;
      const overflow = this.buffers.overflow;
      if (need > overflow.byteLength) overflow.grow(Math.min(overflow.maxByteLength, Math.max(need, overflow.byteLength * 2)));
      this.#overflowEnd = need;
    }
    this.#regions.set(slot, { at, bytes: size });
    return at;
  }
}

/** A thread's side: takes the best item, parks when there is none. */
export class WorkQueueReader {
  readonly #control: Int32Array;
  readonly #thread: number;
  readonly #maxThreads: number;
  readonly #rings: Int32Array;
  readonly #recordWords: Int32Array;
  readonly #recordFloats: Float64Array;
  readonly #records: Uint8Array;
  readonly #overflow: Uint8Array;

  constructor(buffers: WorkQueueBuffers, thread: number, maxThreads: number) {
    this.#control = new Int32Array(buffers.control);
    this.#thread = thread;
    this.#maxThreads = maxThreads;
    this.#rings = new Int32Array(buffers.rings);
    this.#recordWords = new Int32Array(buffers.records);
    this.#recordFloats = new Float64Array(buffers.records);
    this.#records = new Uint8Array(buffers.records);
    this.#overflow = new Uint8Array(buffers.overflow);
  }

  /** Whether some level holds an entry (it may be one a take will skip: canceled, or of an older claim). */
  get hasWork(): boolean {
    const c = this.#control;
    for (let p = this.#levelBelow(LEVEL_WORDS * 32); p >= 0; p = this.#levelBelow(p)) {
      const at = Atomics.load(c, C.RING_AT + p);
      if (at !== 0 && Atomics.load(this.#rings, at / 4 + R.HEAD) !== Atomics.load(this.#rings, at / 4 + R.TAIL)) return true;
    }
    return false;
  }

  /** The highest priority level below `below` whose bit is set in `LEVELS`, or -1 when there is none. */
  #levelBelow(below: number): number {
    const c = this.#control;
    for (let word = (below - 1) >> 5; word >= 0; word--) {
      let bits = Atomics.load(c, C.LEVELS + word);
      // In the word holding `below - 1`, only the bits up to it.
      const top = below - 1 - word * 32;
      if (top < 31) bits &= (1 << (top + 1)) - 1;
      if (bits !== 0) return word * 32 + 31 - Math.clz32(bits);
    }
    return -1;
  }

  /**
   * Takes the best entry whose item can still be started, and starts it: `start` is the slot table's CAS
   * (`CLAIMED→RUNNING` for that generation), which decides every race. Undefined when nothing can be taken.
   */
  take(start: (slot: number, generation: number) => boolean): TakenEntry | undefined {
    for (let p = this.#levelBelow(LEVEL_WORDS * 32); p >= 0; p = this.#levelBelow(p)) {
      const taken = this.#takeAt(p, start);
      if (taken !== undefined) {
        Atomics.add(this.#control, PARK_BASE + this.#maxThreads + this.#thread, 1);
        return taken;
      }
    }
    return undefined;
  }

  /** The body of the item of `slot` (valid until the item ends: main rewrites it only for the slot's next claim). */
  body(slot: number): Uint8Array {
    const at = slot * RECORD_BYTES;
    const words = at / 4;
    const length = this.#recordWords[words + REC.LENGTH]!;
    const where = this.#recordWords[words + REC.BODY_AT]!;
    if (where === INLINE) return this.#records.subarray(at + INLINE_AT, at + INLINE_AT + length);
    return this.#overflow.subarray(where, where + length);
  }

  /** How long main predicts the item of `slot` runs, ms; undefined when it could not say. */
  predictedMs(slot: number): number | undefined {
    const us = this.#recordWords[(slot * RECORD_BYTES) / 4 + REC.PREDICTED_US]!;
    return us === UNPREDICTED ? undefined : us / 1000;
  }

  /** Records when the item of `slot` started (epoch ms), for main's deadlines. */
  stamp(slot: number, epochMs: number): void {
    this.#recordFloats[(slot * RECORD_BYTES) / 8 + REC.STARTED_F64] = epochMs;
  }

  /**
   * Parks: says so, looks once more, and waits on its park word unless work came meanwhile. Resolves once woken (by
   * main, or by `unpark` from this thread); undefined at once when there is work after all.
   */
  park(): Promise<void> | undefined {
    const c = this.#control;
    const word = PARK_BASE + this.#thread;
    Atomics.store(c, word, Park.PARKED);
    Atomics.add(c, C.PARKED, 1);
    // Main publishes, then looks at the count; this thread counts itself, then looks at the rings: one of the two
    // sees the other, so no published item is left with every thread asleep.
    if (this.hasWork) {
      this.#awake();
      return undefined;
    }
    const waited = Atomics.waitAsync(c, word, Park.PARKED);
    if (!waited.async) {
      this.#awake();
      return undefined;
    }
    return waited.value.then(this.#awakeFn);
  }

  /** Ends this thread's own park from inside the thread (a control message came). */
  unpark(): void {
    const c = this.#control;
    const word = PARK_BASE + this.#thread;
    if (Atomics.compareExchange(c, word, Park.PARKED, Park.WOKEN) === Park.PARKED) Atomics.sub(c, C.PARKED, 1);
    Atomics.notify(c, word);
  }

  /** Tells main a result is ready when main armed the doorbell: true for the one thread that must ring it. */
  claimDoorbell(): boolean {
    return Atomics.load(this.#control, C.MAIN_ARMED) === 1 && Atomics.compareExchange(this.#control, C.MAIN_ARMED, 1, 0) === 1;
  }

  readonly #awakeFn = (): void => this.#awake();

  #awake(): void {
    const c = this.#control;
    const word = PARK_BASE + this.#thread;
    // Still parked: this thread takes itself off the count; woken: whoever woke it did.
    if (Atomics.compareExchange(c, word, Park.PARKED, Park.AWAKE) === Park.PARKED) Atomics.sub(c, C.PARKED, 1);
    else Atomics.store(c, word, Park.AWAKE);
  }

  #takeAt(priority: number, start: (slot: number, generation: number) => boolean): TakenEntry | undefined {
    const at = Atomics.load(this.#control, C.RING_AT + priority);
    if (at === 0) return undefined;
    const rings = this.#rings;
    const base = at / 4;
    for (;;) {
      const head = Atomics.load(rings, base + R.HEAD);
      if (head === Atomics.load(rings, base + R.TAIL)) return undefined;
      const entry = base + R.ENTRIES + 2 * (head & (RING_ENTRIES - 1));
      const slot = rings[entry]!;
      const generation = rings[entry + 1]!;
      // The entry is this thread's only if the head did not move meanwhile (then main cannot have reused it).
      if (Atomics.compareExchange(rings, base + R.HEAD, head, (head + 1) | 0) !== head) continue;
      if (Atomics.load(this.#recordWords, (slot * RECORD_BYTES) / 4 + REC.GENERATION) !== generation) continue;
      if (start(slot, generation)) return { slot, generation };
    }
  }
}
