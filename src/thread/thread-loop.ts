/**
 * The long-lived loop of one pool thread. Piscina owns the thread (creation, replacement after a crash, termination,
 * resource limits); this loop owns the work: it takes the best item from the shared work queue whenever it is free
 * (an item main had to send by message, `pinned`, first), keeps its replica current from the shared change log up to
 * what the item needs, runs the item, and appends its outcome to its result ring before it takes the next one. So a
 * thread never holds work it has not started, and a result never waits behind another item.
 *
 * Out of work, it parks on its park word (`Atomics.waitAsync`, so its event loop keeps running what user code left
 * behind: timers, I/O). Busy, it goes back to its event loop once every YIELD_MS, for the same reason; messages from
 * main (a reset, a stop, a shared buffer, a pinned item) are taken between items whenever the board says one was
 * posted.
 *
 * Results: the outcome goes into the ring; when main armed the doorbell, the one thread that claims it posts a
 * number to main. A result the ring cannot take goes by message. Each ring costs main a wake-up (tens of µs of CPU,
 * more than the rest of an evaluation), so outcomes of short items wait for company: the doorbell goes once the thread
 * is about to run out of work, to start an item main predicts (`WorkQueueWriter.write`) would keep the oldest waiting
 * outcome past RING_HOLD_MS, or to wait for anything (a promise, an index), and at once for a canceled outcome.
 */
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { CanceledError, UserCodeError, toWire } from '../errors.js';
import type { Logger } from 'pino';
import { ByteReader, ByteWriter, UnknownSharedBuffer } from '../protocol/byte-codec.js';
import { ChangeLogReader } from '../protocol/change-log.js';
import { DOORBELL, assertNever, type ItemOutcome, type MainToThread, type ThreadInit, type ThreadItem, type ThreadToMain } from '../protocol/messages.js';
import { readItem, writeOutcome } from '../protocol/records.js';
import { ResultRingWriter } from '../protocol/result-ring.js';
import { ThreadSharedRegistry } from '../protocol/shared-registry.js';
import { ThreadBoard } from '../protocol/thread-board.js';
import { WorkQueueReader } from '../protocol/work-queue.js';
import { ThreadPhase } from '../slots/slot-layout.js';
import { SlotTable } from '../slots/slot-table.js';
import { Replica } from '../state/replica.js';
import { seal } from '../state/sealed.js';
import type { ChangeSet } from '../state/types.js';
import { ThreadWorkContext, type ThreadServices } from './context.js';
import { IndexWaiter } from './index-waiter.js';
import { createThreadLogger } from './log-forwarder.js';
import { ModuleTable, registerModuleHooks, type UserFunction } from './modules.js';

/** Longest the loop runs items back to back before it lets its event loop run once. */
export const YIELD_MS = 1;
/**
 * Longest an outcome waits for company before the doorbell goes, ms, as far as main's predictions of the items run
 * meanwhile hold. Long items are unaffected (each one rings); items of 0.2 ms share a wake-up of main by five.
 */
export const RING_HOLD_MS = 1;
/** How long a wait for an index sleeps on the change log before it looks again anyway (a reset may have come). */
const LOG_WAIT_MS = 50;

/** Where the loop reads time (ms, any origin): `performance`, or a test's clock. */
export interface LoopClock {
  now(): number;
}

export class ThreadLoop {
  readonly #port: MessagePort;
  readonly #init: ThreadInit;
  readonly #clock: LoopClock;
  readonly #slots: SlotTable;
  readonly #board: ThreadBoard;
  readonly #queue: WorkQueueReader;
  readonly #results: ResultRingWriter;
  readonly #log: ChangeLogReader;
  readonly #shared = new ThreadSharedRegistry();
  readonly #reader: ByteReader;
  readonly #writer: ByteWriter;
  readonly #replica = new Replica();
  readonly #waiter: IndexWaiter;
  readonly #schedulers: ModuleTable;
  readonly #handlers: ModuleTable;
  readonly #logger: Logger;
  readonly #services: ThreadServices;
  readonly #index: number;
  /** Items main sent by message: run before anything from the queue. */
  readonly #pinned: ThreadItem[] = [];
  #stopRequested = false;
  #awaitingReset = false;
  /** The board's `POSTED` count for this thread as of the last look at the port. */
  #seenPosted = 0;
  #lastYield = 0;
  /** A wait for an index is following the change log. */
  #following = false;
  /** Outcomes were appended since the doorbell was last rung. */
  #unrung = false;
  /** When the oldest outcome not rung for was appended (the loop's clock); -Infinity: ring at the next look. */
  #unrungSince = 0;
  /** Rings for outcomes held while the item after them awaits (unset while nothing is held). */
  #ringTimer: ReturnType<typeof setTimeout> | undefined = undefined;
  readonly #ringFn = (): void => this.#ring();
  /** The item `#next` returned last came by message (it has no record in the queue). */
  #nextWasPinned = false;
  readonly #applyFn = (change: ChangeSet): void => this.#apply(change);
  readonly #startFn = (slot: number, generation: number): boolean => this.#slots.start(slot, generation, this.#index + 1);

  constructor(port: MessagePort, init: ThreadInit, clock: LoopClock = performance) {
    this.#port = port;
    this.#init = init;
    this.#clock = clock;
    this.#index = init.threadIndex;
    this.#slots = SlotTable.attach(init.slotBuffer);
    this.#board = ThreadBoard.attach(init.boardBuffer);
    this.#queue = new WorkQueueReader(init.queue, init.threadIndex, init.maxThreads);
    this.#results = new ResultRingWriter(init.results);
    this.#log = new ChangeLogReader(init.changeLog, init.logPosition, seal);
    for (const [id, buffer] of init.shared) this.#shared.share(id, buffer);
    this.#reader = new ByteReader(this.#shared);
    this.#writer = new ByteWriter(this.#shared);
    this.#waiter = new IndexWaiter(() => this.#replica.appliedIndex);
    this.#schedulers = new ModuleTable(init.schedulers, 'scheduler', init.threadIndex);
    this.#handlers = new ModuleTable(init.handlers, 'handler', init.threadIndex);
    this.#logger = createThreadLogger(init.log);
    this.#replica.reset(init.full);
    this.#publishIndex();
    this.#services = {
      slots: this.#slots,
      threadIndex: init.threadIndex,
      snapshot: () => this.#replica.snapshot(),
      logger: this.#logger,
      waitForIndex: (index, limitMs, signal) => this.#waitForIndex(index, limitMs, signal),
    };
  }

  /** Runs until main says stop (or closes the port). */
  async run(): Promise<void> {
    await registerModuleHooks(this.#init.moduleHooks, this.#logger);
    const loadErrors = (await Promise.all([this.#schedulers.preload(), this.#handlers.preload()])).flat();
    this.#port.on('message', (message: MainToThread) => {
      this.#onMessage(message);
      // A message may be work (pinned) or a stop: a parked loop must look.
      this.#queue.unpark();
    });
    this.#port.once('close', () => {
      this.#stopRequested = true;
      this.#queue.unpark();
    });
    this.#post({ type: 'ready', threadIndex: this.#index, ...(loadErrors.length > 0 ? { loadErrors } : {}) });
    await this.#loop();
    this.#port.close();
  }

  async #loop(): Promise<void> {
    this.#lastYield = this.#clock.now();
    for (;;) {
      this.#pullMessages();
      if (this.#stopRequested) {
        this.#ring();
        return;
      }
      const item = this.#next();
      // The doorbell for the outcome before goes once the next item has been taken: main, reading the outcome,
      // then sees that item leave the queue too, and counts its deadline from about when it really started.
      if (item === undefined || this.#ringDue(item)) this.#ring();
      if (item !== undefined) {
        await this.#serve(item);
        if (this.#clock.now() - this.#lastYield >= YIELD_MS) await this.#yield();
        continue;
      }
      const parked = this.#queue.park();
      if (parked !== undefined) await parked;
      this.#lastYield = this.#clock.now();
    }
  }

  /**
   * Whether the outcomes not rung for must go before `item` runs: main may need to refill the queue (nothing more
   * is waiting in it), `item` has no prediction (one main sent by message, or a kind never measured), or its predicted
   * run would keep the oldest outcome waiting past RING_HOLD_MS.
   */
  #ringDue(item: ThreadItem): boolean {
    if (!this.#unrung) return false;
    if (!this.#queue.hasWork) return true;
    const predicted = this.#nextWasPinned ? undefined : this.#queue.predictedMs(item.slot);
    return predicted === undefined || this.#clock.now() - this.#unrungSince + predicted >= RING_HOLD_MS;
  }

  /** Outcomes held so far go before this thread waits for anything (its item's promise, an index): no company comes. */
  #ringBeforeWaiting(): void {
    if (this.#unrung && this.#ringTimer === undefined) this.#ringTimer = setTimeout(this.#ringFn, RING_HOLD_MS).unref();
  }

  /** Rings main's doorbell for the outcomes appended since the last ring, when main armed it. */
  #ring(): void {
    if (this.#ringTimer !== undefined) {
      clearTimeout(this.#ringTimer);
      this.#ringTimer = undefined;
    }
    if (!this.#unrung) return;
    this.#unrung = false;
    if (this.#queue.claimDoorbell()) this.#port.postMessage(DOORBELL satisfies ThreadToMain);
  }

  /** The next item to run, started (its slot is RUNNING, owned by this thread): a pinned one, or the queue's best. */
  #next(): ThreadItem | undefined {
    this.#nextWasPinned = true;
    while (this.#pinned.length > 0) {
      const item = this.#pinned.shift()!;
      if (this.#slots.start(item.slot, item.generation, this.#index + 1)) return item;
    }
    this.#nextWasPinned = false;
    const entry = this.#queue.take(this.#startFn);
    if (entry === undefined) return undefined;
    return this.#decode(entry.slot, entry.generation);
  }

  /**
   * Reads an item taken from the queue. Its record may name a shared buffer whose number is still on its way (main
   * posted it before it published the item): the port is read until it is there.
   */
  #decode(slot: number, generation: number): ThreadItem {
    for (;;) {
      try {
        this.#reader.reset(this.#queue.body(slot), 0);
        return readItem(this.#reader, slot, generation);
      } catch (error) {
        if (!(error instanceof UnknownSharedBuffer) || !this.#pullMessages(true)) throw error;
      }
    }
  }

  #yield(): Promise<void> {
    return new Promise<void>((resolve) =>
      setImmediate(() => {
        this.#lastYield = this.#clock.now();
        resolve();
      }),
    );
  }

  /** Takes what main posted (when the board says it posted something, or `force`); true when it took anything. */
  #pullMessages(force = false): boolean {
    const posted = this.#board.posted(this.#index);
    if (!force && posted === this.#seenPosted) return false;
    this.#seenPosted = posted;
    let took = false;
    for (let m = receiveMessageOnPort(this.#port); m !== undefined; m = receiveMessageOnPort(this.#port)) {
      this.#onMessage(m.message as MainToThread);
      took = true;
    }
    return took;
  }

  #onMessage(message: MainToThread): void {
    switch (message.type) {
      case 'reset':
        this.#replica.reset(message.full);
        this.#log.reset(message.position);
        this.#awaitingReset = false;
        this.#publishIndex();
        return;
      case 'stop':
        this.#stopRequested = true;
        return;
      case 'share':
        this.#shared.share(message.id, message.buffer);
        return;
      case 'unshare':
        this.#shared.forget(message.id);
        return;
      case 'pinned':
        this.#pinned.push(message.item);
        return;
      default:
        assertNever(message);
    }
  }

  /** Applies what the change log has that the replica lacks; a replica a ring behind asks main for a reset. */
  #catchUp(): void {
    if (this.#awaitingReset || !this.#log.behind) return;
    if (this.#log.catchUp(this.#applyFn) === 'lapped') this.#needReset();
    this.#publishIndex();
  }

  #apply(change: ChangeSet): void {
    if (this.#awaitingReset || change.index <= this.#replica.appliedIndex) return;
    // A feed that jumped (a shared store's replica was reloaded) leaves a gap: only a full state closes it.
    if (change.index !== this.#replica.appliedIndex + 1) {
      this.#needReset();
      return;
    }
    this.#replica.apply(change);
  }

  #needReset(): void {
    if (this.#awaitingReset) return;
    this.#awaitingReset = true;
    this.#post({ type: 'resync', appliedIndex: this.#replica.appliedIndex });
  }

  #publishIndex(): void {
    this.#board.publishAppliedIndex(this.#index, this.#replica.appliedIndex);
    this.#waiter.applied();
  }

  /**
   * `waitForIndex` on this thread: resolves once the replica reaches `index`. While someone waits, the loop follows
   * the change log (woken by main's notify when a commit lands, or every LOG_WAIT_MS for a reset).
   */
  #waitForIndex(index: number, limitMs: number, signal: AbortSignal): Promise<void> {
    this.#catchUp();
    const waiting = this.#waiter.wait(index, limitMs, signal);
    if (this.#waiter.pending > 0 && !this.#following) void this.#follow();
    return waiting;
  }

  async #follow(): Promise<void> {
    this.#following = true;
    try {
      while (this.#waiter.pending > 0 && !this.#stopRequested) {
        await this.#log.changed(LOG_WAIT_MS);
        this.#pullMessages(true);
        this.#catchUp();
      }
    } finally {
      this.#following = false;
    }
  }

  async #serve(item: ThreadItem): Promise<void> {
    const outcome = await this.#runItem(item);
    this.#send(item, outcome);
  }

  async #runItem(item: ThreadItem): Promise<ItemOutcome> {
    const { slot, generation, seq } = item;
    this.#queue.stamp(slot, Date.now());
    // Commits made while earlier items ran are in the log: apply them, so this item plans against them.
    this.#catchUp();
    const started = this.#clock.now();
    const ctx = new ThreadWorkContext(this.#services, item);
    let value: unknown;
    let waitedMs = 0;
    let thrown: { readonly error: unknown } | undefined;
    try {
      let fn: UserFunction;
      let input: unknown;
      if (item.kind === 'eval') {
        if (this.#replica.appliedIndex < item.minIndex) {
          this.#slots.setPhase(slot, generation, ThreadPhase.WAITING_FOR_INDEX);
          const waitStart = this.#clock.now();
          this.#ringBeforeWaiting();
          // Through the context, so that a cancel ends the wait (it reads the slot word while waiting).
          await ctx.waitForIndex(item.minIndex, item.syncLimitMs);
          waitedMs = this.#clock.now() - waitStart;
        }
        this.#slots.setPhase(slot, generation, ThreadPhase.SCHEDULING);
        fn = this.#schedulers.loaded(item.evaluation.type) ?? (await this.#schedulers.load(item.evaluation.type));
        input = item.evaluation;
      } else {
        this.#slots.setPhase(slot, generation, ThreadPhase.RUNNING_TASK);
        fn = this.#handlers.loaded(item.handler) ?? (await this.#handlers.load(item.handler));
        // Not `{ ...item.run, payload }`: V8 takes a slow path for a spread followed by more properties.
        const run: Record<string, unknown> = Object.assign({}, item.run as unknown as Record<string, unknown>);
        run['payload'] = item.payload;
        input = run;
      }
      const answer = fn(input, ctx);
      // (`instanceof`, not a look at `then`: reading the user's value here must not run a getter of theirs.)
      if (answer instanceof Promise) this.#ringBeforeWaiting();
      value = await answer;
    } catch (error) {
      thrown = { error };
    }
    // Before the result is sent: should this thread die first, main runs the item again rather than count it lost.
    this.#slots.setPhase(slot, generation, ThreadPhase.FINISHED);
    ctx.close();
    const ms = this.#clock.now() - started;
    this.#board.addBusy(this.#index, ms);
    if (thrown !== undefined) return failureOutcome(seq, thrown.error, this.#slots.isCanceled(slot, generation), ms);
    if (item.kind === 'run') {
      const failed = returnedFailure(seq, value, ms);
      if (failed !== undefined) return failed;
    }
    return { seq, status: 'ok', value, waitedMs, ms };
  }

  /** Appends the outcome to the result ring (or sends it by message when the ring cannot take it); `#ring` tells main. */
  #send(item: ThreadItem, outcome: ItemOutcome): void {
    const { slot, generation } = item;
    if (this.#appendOutcome(slot, generation, outcome)) {
      if (!this.#unrung) this.#unrungSince = this.#clock.now();
      this.#unrung = true;
      // Main ends a canceled delivery's hold on its evaluation at once (the README's promise).
      if (outcome.status === 'canceled') this.#unrungSince = -Infinity;
    } else {
      this.#postOutcome(slot, generation, outcome);
    }
  }

  #appendOutcome(slot: number, generation: number, outcome: ItemOutcome): boolean {
    const w = this.#writer;
    w.reset();
    try {
      writeOutcome(w, slot, generation, outcome);
    } catch {
      // The bytes cannot carry it (or reading it threw): the message path says what becomes of it.
      return false;
    }
    return this.#results.append(w.bytes);
  }

  /**
   * An outcome by message. One whose value cannot be cloned either (a scheduler returned a function, say) becomes an
   * error of its own: one bad value never costs the item its result.
   */
  #postOutcome(slot: number, generation: number, outcome: ItemOutcome): void {
    try {
      this.#post({ type: 'outcome', slot, generation, outcome });
    } catch (error) {
      const failure: ItemOutcome = { seq: outcome.seq, status: 'error', error: toWire(error), retryable: false, ms: outcome.ms };
      this.#post({ type: 'outcome', slot, generation, outcome: failure });
    }
  }

  #post(message: ThreadToMain): void {
    this.#port.postMessage(message);
  }
}

/**
 * The outcome of an item whose user code threw `error`. Reading what was thrown runs user code too (getters of
 * `retryable`, `code`, `message`, `stack`, `details`; a proxy's traps, `instanceof` included), and a throw from
 * there must not escape: it would end the thread's loop and cost the thread with the item it runs. Such a value is
 * reported as a `UserCodeError` saying so, not retryable.
 */
function failureOutcome(seq: number, error: unknown, canceled: boolean, ms: number): ItemOutcome {
  try {
    if (canceled && error instanceof CanceledError) return { seq, status: 'canceled', ms };
    return { seq, status: 'error', error: toWire(error), retryable: isRetryable(error), ms };
  } catch (inspectError) {
    const message = `Expected user code to throw a readable value, but reading what it threw threw: ${safeText(inspectError)}`;
    return { seq, status: 'error', error: toWire(new UserCodeError(message)), retryable: false, ms };
  }
}

/**
 * A task handler that returned a `RunResult` failure (`{ error, retryable?, value? }` with an `Error` as `error`): it
 * is sent as a thrown error is (its wire form, so main sees a `RemoteError` with the handler's own code), with its
 * value beside it. Undefined for any other value. Reading the returned object runs user code (getters, proxies):
 * a throw from there is reported as a `UserCodeError`, as for a thrown value.
 */
function returnedFailure(seq: number, value: unknown, ms: number): ItemOutcome | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  try {
    const { error, retryable, value: kept } = value as { error?: unknown; retryable?: unknown; value?: unknown };
    if (!(error instanceof Error)) return undefined;
    return { seq, status: 'error', error: toWire(error), retryable: retryable === true, ms, ...(kept === undefined ? {} : { value: kept }) };
  } catch (inspectError) {
    const message = `Expected a task handler to return a readable value, but reading what it returned threw: ${safeText(inspectError)}`;
    return { seq, status: 'error', error: toWire(new UserCodeError(message)), retryable: false, ms };
  }
}

/** A thrown value marks itself retryable with a `retryable` property that is `true` (as RunResult does). */
function isRetryable(error: unknown): boolean {
  return error !== null && typeof error === 'object' && (error as { retryable?: unknown }).retryable === true;
}

/** Text for a value that may be just as hostile as the first one. */
function safeText(value: unknown): string {
  try {
    const message = value instanceof Error ? value.message : undefined;
    if (typeof message === 'string') return message;
  } catch {
    // fall through
  }
  return '(an unreadable value)';
}

