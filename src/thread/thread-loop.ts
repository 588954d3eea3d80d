/**
 * The long-lived loop of one pool thread. Piscina owns the thread (creation, replacement after a crash,
 * termination, resource limits); this loop owns the work: it keeps the replica current from the change stream,
 * runs items one at a time (the work is CPU-bound: running two at once on one thread only interleaves them), and
 * streams results back — coalesced while items complete back to back, flushed as soon as the queue runs dry or a
 * millisecond has passed, so that a long item never holds the results of short ones.
 */
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { CanceledError, toWire } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { ItemOutcome, MainToThread, ThreadInit, ThreadToMain, WorkItem } from '../pool/messages.js';
import { assertNever, isWorkMessage } from '../pool/messages.js';
import { ThreadPhase } from '../slots/slot-layout.js';
import { SlotTable } from '../slots/slot-table.js';
import { Replica } from '../state/replica.js';
import type { ChangeSet } from '../state/types.js';
import { ThreadBoard } from '../pool/thread-board.js';
import { decodeWork, encodeResults } from '../pool/wire.js';
import { ThreadWorkContext, type ThreadServices } from './context.js';
import { IndexWaiter } from './index-waiter.js';
import { ModuleTable, type UserFunction } from './modules.js';

const FLUSH_AFTER_MS = 1;

export class ThreadLoop {
  readonly #port: MessagePort;
  readonly #init: ThreadInit;
  readonly #slots: SlotTable;
  readonly #board: ThreadBoard;
  readonly #replica = new Replica();
  readonly #waiter: IndexWaiter;
  readonly #schedulers: ModuleTable;
  readonly #handlers: ModuleTable;
  readonly #logger: Logger;
  #queue: WorkItem[] = [];
  #head = 0;
  #draining = false;
  #outbox: ItemOutcome[] = [];
  #lastFlush = 0;
  /** When the last item ended (one clock read per item serves busy time and the flush timer). */
  #lastItemEnd = 0;
  #awaitingReset = false;
  #stopped: (() => void) | undefined;
  readonly #services: ThreadServices;
  readonly #applyChangeFn = (change: ChangeSet): void => this.#applyChange(change);

  constructor(port: MessagePort, init: ThreadInit) {
    this.#port = port;
    this.#init = init;
    this.#slots = SlotTable.attach(init.slotBuffer);
    this.#board = ThreadBoard.attach(init.boardBuffer);
    this.#waiter = new IndexWaiter(() => this.#replica.appliedIndex);
    this.#schedulers = new ModuleTable(init.schedulers, 'scheduler');
    this.#handlers = new ModuleTable(init.handlers, 'handler');
    this.#logger = pino({ name: 'tickpool-thread', level: init.logLevel }).child({ thread: init.threadIndex });
    this.#replica.reset(init.full);
    this.#publishIndex();
    this.#services = {
      slots: this.#slots,
      threadIndex: init.threadIndex,
      snapshot: () => this.#replica.snapshot(),
      logger: this.#logger,
      waitForIndex: (index, limitMs) => this.#waiter.wait(index, limitMs),
    };
  }

  /** Runs until main says stop (or closes the port). */
  async run(): Promise<void> {
    await Promise.all([this.#schedulers.preload(), this.#handlers.preload()]);
    const done = new Promise<void>((resolve) => (this.#stopped = resolve));
    this.#port.on('message', (message: MainToThread) => this.#onMessage(message));
    this.#port.once('close', () => this.#stopped?.());
    this.#post({ type: 'ready', threadIndex: this.#init.threadIndex });
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
        this.#queue[this.#head++] = undefined as unknown as WorkItem;
        this.#outbox.push(await this.#runItem(item));
        // Before answering, take what main has sent meanwhile: answering one item per message would lock main
        // and thread into a one-item ping-pong, paying a message per item on both sides.
        if (this.#head >= this.#queue.length) this.#pullPending();
        if (this.#head >= this.#queue.length || this.#lastItemEnd - this.#lastFlush >= FLUSH_AFTER_MS) this.#flush();
      }
    } finally {
      this.#queue = [];
      this.#head = 0;
      this.#draining = false;
      this.#flush();
    }
  }

  async #runItem(item: WorkItem): Promise<ItemOutcome> {
    const { slot, generation, seq } = item;
    if (!this.#slots.start(slot, generation, this.#init.threadIndex + 1)) return { seq, status: 'canceled' };
    // Commits made while this batch ran (plans of the items before this one) are waiting on the port: apply them,
    // so this item plans against them instead of conflicting with them.
    if (item.kind === 'eval' && this.#board.committedIndex() > this.#replica.appliedIndex) this.#pullPending();
    const started = performance.now();
    const ctx = new ThreadWorkContext(this.#services, item);
    try {
      let fn: UserFunction;
      let input: unknown;
      let waitedMs = 0;
      if (item.kind === 'eval') {
        if (this.#replica.appliedIndex < item.minIndex) {
          this.#slots.setPhase(slot, generation, ThreadPhase.WAITING_FOR_INDEX);
          const waitStart = performance.now();
          await this.#waiter.wait(item.minIndex, item.syncLimitMs);
          waitedMs = performance.now() - waitStart;
        }
        this.#slots.setPhase(slot, generation, ThreadPhase.SCHEDULING);
        fn = this.#schedulers.loaded(item.evaluation.type) ?? (await this.#schedulers.load(item.evaluation.type));
        input = item.evaluation;
      } else {
        this.#slots.setPhase(slot, generation, ThreadPhase.RUNNING_TASK);
        fn = this.#handlers.loaded(item.handler) ?? (await this.#handlers.load(item.handler));
        input = { ...item.run, payload: item.payload };
      }
      const value = await fn(input, ctx);
      return { seq, status: 'ok', value, waitedMs };
    } catch (error) {
      if (error instanceof CanceledError && this.#slots.isCanceled(slot, generation)) return { seq, status: 'canceled' };
      return { seq, status: 'error', error: toWire(error), retryable: isRetryable(error) };
    } finally {
      ctx.close();
      this.#lastItemEnd = performance.now();
      this.#board.addBusy(this.#init.threadIndex, this.#lastItemEnd - started);
    }
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
    this.#lastFlush = performance.now();
    try {
      this.#port.postMessage(encodeResults(results) satisfies ThreadToMain);
    } catch {
      // Some result could not be cloned (a scheduler returned a function, say): send them one by one and turn
      // each one that fails into an error, so one bad value never costs the others their results.
      for (const result of results) {
        try {
          this.#port.postMessage(encodeResults([result]) satisfies ThreadToMain);
        } catch (error) {
          const failure: ItemOutcome = { seq: result.seq, status: 'error', error: toWire(error), retryable: false };
          this.#port.postMessage(encodeResults([failure]) satisfies ThreadToMain);
        }
      }
    }
  }

  #post(message: ThreadToMain): void {
    this.#port.postMessage(message);
  }
}

/** A thrown value marks itself retryable with a truthy `retryable` property (as RunResult does). */
function isRetryable(error: unknown): boolean {
  return error !== null && typeof error === 'object' && (error as { retryable?: unknown }).retryable === true;
}
