/**
 * The long-lived loop of one pool thread. Piscina owns the thread (creation, replacement after a crash,
 * termination, resource limits); this loop owns the work: it keeps the replica current from the change stream,
 * runs items one at a time (the work is CPU-bound: running two at once on one thread only interleaves them), and
 * streams results back.
 *
 * When results are sent. A message per result costs both threads (a postMessage here, a message event and a refill
 * on main), which is most of the cost of a tiny item; so results of items that complete back to back are coalesced.
 * But a result waiting in the outbox waits for whatever runs next, and a synchronous item blocks this thread's event
 * loop, so nothing can send it until that item ends: its ack is late, a crash of that item takes the finished
 * results with it (their items are counted lost and run again), and a canceled result held there lets main's cancel
 * grace timer terminate the thread under an innocent item. The next item's duration is unknown, so the outbox is
 * sent before starting the next item unless all of these hold:
 * - recent items were tiny (`#typicalMs`, a running estimate that jumps up at once on a long item and decays over a
 *   few dozen items), so the next one most likely is too;
 * - the oldest held result is younger than FLUSH_AFTER_MS;
 * - the item just finished was not canceled (a canceled result always goes at once: see the grace timer above).
 * A held outbox is also sent from the next macrotask (`setImmediate`), which runs as soon as an item awaits anything
 * real (I/O, a timer, `waitForIndex`); a run of tiny synchronous items never yields to it, so it costs one
 * `setImmediate` per run. What remains: a long synchronous item that follows a run of tiny ones holds at most
 * FLUSH_AFTER_MS worth of their results, since no estimate can see it coming.
 */
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { CanceledError, UserCodeError, toWire } from '../errors.js';
import type { Logger } from 'pino';
import type { ItemOutcome, MainToThread, ThreadInit, ThreadItem, ThreadToMain } from '../protocol/messages.js';
import { assertNever, isWorkMessage } from '../protocol/messages.js';
import { ThreadPhase } from '../slots/slot-layout.js';
import { SlotTable } from '../slots/slot-table.js';
import { Replica } from '../state/replica.js';
import type { ChangeSet } from '../state/types.js';
import { ThreadBoard } from '../protocol/thread-board.js';
import { decodeWork, encodeResults } from '../protocol/wire.js';
import { ThreadWorkContext, type ThreadServices } from './context.js';
import { IndexWaiter } from './index-waiter.js';
import { createThreadLogger } from './log-forwarder.js';
import { ModuleTable, registerModuleHooks, type UserFunction } from './modules.js';

/** Longest a finished result waits in the outbox while tiny items run after it. */
export const FLUSH_AFTER_MS = 1;
/**
 * Items whose typical duration is below this are "tiny": their results are coalesced. 50 µs is ~10× what sending a
 * message costs the two threads, so above it a message per result costs under a tenth of the work; below it the
 * messages would dominate (the no-op throughput benchmark runs items of a few µs).
 */
export const TINY_ITEM_MS = 0.05;
/** How fast `#typicalMs` comes down after a long item: by this share of the gap per item. */
export const TYPICAL_DECAY = 0.25;

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
  readonly #replica = new Replica();
  readonly #waiter: IndexWaiter;
  readonly #schedulers: ModuleTable;
  readonly #handlers: ModuleTable;
  readonly #logger: Logger;
  #queue: ThreadItem[] = [];
  #head = 0;
  #draining = false;
  #outbox: ItemOutcome[] = [];
  /** When the oldest result in the outbox was added (meaningful while the outbox is not empty). */
  #heldSince = 0;
  /** A `setImmediate` that sends a held outbox is armed. */
  #sendArmed = false;
  readonly #sendHeldFn = (): void => {
    this.#sendArmed = false;
    this.#flush();
  };
  /**
   * Running estimate of how long an item takes, in ms: set to an item's duration when it is longer, else moved
   * towards it by TYPICAL_DECAY. Starts at FLUSH_AFTER_MS (not tiny) so that a new thread's first results go at once.
   */
  #typicalMs = FLUSH_AFTER_MS;
  /** When the last item ended (one clock read per item serves busy time and the flush decision). */
  #lastItemEnd = 0;
  #awaitingReset = false;
  /** `idleSpinUs` in ms: how long to poll for work once out of it (0: never). */
  readonly #pollMs: number;
  /** The board's `POSTED` count for this thread as of the last pull while polling. */
  #seenPosted = 0;
  #stopRequested = false;
  #stopped: (() => void) | undefined;
  readonly #services: ThreadServices;
  readonly #applyChangeFn = (change: ChangeSet): void => this.#applyChange(change);

  constructor(port: MessagePort, init: ThreadInit, clock: LoopClock = performance) {
    this.#port = port;
    this.#init = init;
    this.#clock = clock;
    this.#slots = SlotTable.attach(init.slotBuffer);
    this.#board = ThreadBoard.attach(init.boardBuffer);
    this.#waiter = new IndexWaiter(() => this.#replica.appliedIndex);
    this.#schedulers = new ModuleTable(init.schedulers, 'scheduler', init.threadIndex);
    this.#handlers = new ModuleTable(init.handlers, 'handler', init.threadIndex);
    this.#logger = createThreadLogger(init.log);
    this.#pollMs = init.idleSpinUs / 1000;
    this.#replica.reset(init.full);
    this.#publishIndex();
    this.#services = {
      slots: this.#slots,
      threadIndex: init.threadIndex,
      snapshot: () => this.#replica.snapshot(),
      logger: this.#logger,
      waitForIndex: (index, limitMs, signal) => this.#waiter.wait(index, limitMs, signal),
    };
  }

  /** Runs until main says stop (or closes the port). */
  async run(): Promise<void> {
    await registerModuleHooks(this.#init.moduleHooks, this.#logger);
    const loadErrors = (await Promise.all([this.#schedulers.preload(), this.#handlers.preload()])).flat();
    const done = new Promise<void>((resolve) => (this.#stopped = resolve));
    this.#port.on('message', (message: MainToThread) => this.#onMessage(message));
    this.#port.once('close', () => this.#stopped?.());
    this.#post({ type: 'ready', threadIndex: this.#init.threadIndex, ...(loadErrors.length > 0 ? { loadErrors } : {}) });
    await done;
    this.#port.close();
  }

  #onMessage(message: MainToThread): void {
    if (isWorkMessage(message)) {
      if (decodeWork(message, this.#applyChangeFn, this.#queue) > 0 && !this.#draining) {
        this.#draining = true;
        void this.#drain();
      }
      return;
    }
    switch (message.type) {
      case 'reset':
        this.#replica.reset(message.full);
        this.#awaitingReset = false;
        this.#publishIndex();
        return;
      case 'stop':
        this.#stopRequested = true;
        this.#stopped?.();
        return;
      default:
        assertNever(message);
    }
  }

  #applyChange(change: ChangeSet): void {
    if (this.#awaitingReset) return;
    if (change.index <= this.#replica.appliedIndex) return;
    if (change.index !== this.#replica.appliedIndex + 1) {
      // A gap can only mean a lost message; ask for the whole state rather than run on a wrong view.
      this.#awaitingReset = true;
      this.#post({ type: 'resync', appliedIndex: this.#replica.appliedIndex });
      return;
    }
    this.#replica.apply(change);
    this.#publishIndex();
  }

  #publishIndex(): void {
    this.#board.publishAppliedIndex(this.#init.threadIndex, this.#replica.appliedIndex);
    this.#waiter.applied();
  }

  async #drain(): Promise<void> {
    this.#draining = true;
    try {
      while (this.#head < this.#queue.length) {
        const item = this.#queue[this.#head]!;
        this.#queue[this.#head++] = undefined as unknown as ThreadItem;
        const outcome = await this.#runItem(item);
        if (this.#outbox.length === 0) this.#heldSince = this.#lastItemEnd;
        this.#outbox.push(outcome);
        // Before answering, take what main has sent meanwhile: answering one item per message would lock main
        // and thread into a one-item ping-pong, paying a message per item on both sides.
        if (this.#head >= this.#queue.length) this.#pullPending();
        if (this.#head >= this.#queue.length || this.#sendBeforeNext(item, outcome)) this.#flush();
        else if (!this.#sendArmed) {
          this.#sendArmed = true;
          setImmediate(this.#sendHeldFn);
        }
      }
    } finally {
      this.#queue = [];
      this.#head = 0;
      this.#draining = false;
      this.#flush();
      if (this.#pollMs > 0) this.#pollForWork();
    }
  }

  /**
   * Out of work: before going back to the event loop to sleep, watch the board for up to `idleSpinUs` — one shared
   * read per turn, and the port only when the board moved — so that the next item starts without a wake-up. Ends
   * as soon as work (a drain started by what was pulled) or a stop arrives.
   */
  #pollForWork(): void {
    const index = this.#init.threadIndex;
    const until = this.#clock.now() + this.#pollMs;
    for (let turn = 1; !this.#draining && !this.#stopRequested; turn++) {
      const posted = this.#board.posted(index);
      if (posted !== this.#seenPosted) {
        this.#seenPosted = posted;
        this.#pullPending();
        continue;
      }
      // The clock costs more than the shared read: look at it every few dozen turns.
      if (turn % 32 === 0 && this.#clock.now() >= until) return;
    }
  }

  /** Whether the outbox must go before the next item starts (see the module comment). */
  #sendBeforeNext(item: ThreadItem, outcome: ItemOutcome): boolean {
    return (
      this.#typicalMs >= TINY_ITEM_MS ||
      this.#lastItemEnd - this.#heldSince >= FLUSH_AFTER_MS ||
      outcome.status === 'canceled' ||
      // Canceled while it ran, yet it ended otherwise (it finished, or threw something else): main's grace timer
      // is running for it all the same.
      this.#slots.isCanceled(item.slot, item.generation)
    );
  }

  async #runItem(item: ThreadItem): Promise<ItemOutcome> {
    const { slot, generation, seq } = item;
    // The start CAS is the arbiter when main sent the item to a second thread (it takes unstarted work back from a
    // busy thread for an idle one): exactly one thread starts it, every other one reports it not started.
    if (!this.#slots.start(slot, generation, this.#init.threadIndex + 1)) return { seq, status: 'not-started' };
    // Commits made while this batch ran (plans of the items before this one) are waiting on the port: apply them,
    // so this item plans against them instead of conflicting with them.
    if (item.kind === 'eval' && this.#board.committedIndex() > this.#replica.appliedIndex) this.#pullPending();
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
      value = await fn(input, ctx);
    } catch (error) {
      thrown = { error };
    }
    // Before the result can wait in the outbox: should this thread die first, main runs the item again.
    this.#slots.setPhase(slot, generation, ThreadPhase.FINISHED);
    ctx.close();
    // One clock read serves the outcome, busy time and the flush decision.
    const end = this.#clock.now();
    const ms = end - started;
    this.#lastItemEnd = end;
    this.#typicalMs = ms >= this.#typicalMs ? ms : this.#typicalMs + (ms - this.#typicalMs) * TYPICAL_DECAY;
    this.#board.addBusy(this.#init.threadIndex, ms);
    if (thrown !== undefined) return failureOutcome(seq, thrown.error, this.#slots.isCanceled(slot, generation), ms);
    if (item.kind === 'run') {
      const failed = returnedFailure(seq, value, ms);
      if (failed !== undefined) return failed;
    }
    return { seq, status: 'ok', value, waitedMs, ms };
  }

  #pullPending(): void {
    for (let message = receiveMessageOnPort(this.#port); message !== undefined; message = receiveMessageOnPort(this.#port)) {
      this.#onMessage(message.message as MainToThread);
    }
  }

  #flush(): void {
    if (this.#outbox.length === 0) return;
    const results = this.#outbox;
    this.#outbox = [];
    try {
      this.#port.postMessage(encodeResults(results) satisfies ThreadToMain);
    } catch {
      // Some result could not be cloned (a scheduler returned a function, say): send them one by one and turn
      // each one that fails into an error, so one bad value never costs the others their results.
      for (const result of results) {
        try {
          this.#port.postMessage(encodeResults([result]) satisfies ThreadToMain);
        } catch (error) {
          const ms = result.status === 'not-started' ? 0 : result.ms;
          const failure: ItemOutcome = { seq: result.seq, status: 'error', error: toWire(error), retryable: false, ms };
          this.#port.postMessage(encodeResults([failure]) satisfies ThreadToMain);
        }
      }
    }
  }

  #post(message: ThreadToMain): void {
    this.#port.postMessage(message);
  }
}

/**
 * The outcome of an item whose user code threw `error`. Reading what was thrown runs user code too (getters of
 * `retryable`, `code`, `message`, `stack`, `details`; a proxy's traps, `instanceof` included), and a throw from
 * there must not escape: it would end the thread's loop and cost the thread with every item it holds. Such a value
 * is reported as a `UserCodeError` saying so, not retryable.
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
