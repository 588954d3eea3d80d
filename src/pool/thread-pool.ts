/**
 * The dispatcher: one long-lived loop task per Piscina thread, fed through its own `MessagePort`.
 *
 * Why not one `piscina.run()` per evaluation: Piscina spends more main-thread CPU per task than the rest of the
 * engine spends on an evaluation. Here Piscina manages thread lifecycles (start, replacement after a
 * crash, termination on abort, resource limits) and items travel in batches. What a thread may hold is bounded by
 * *predicted work*, not by a count alone (`CostModel`: learned per evaluation type and task handler):
 * - a thread with nothing assigned gets an item at once (no batching when idle: lowest latency);
 * - otherwise items wait in ONE queue on main, shared by every thread, and are handed out once per event-loop turn
 *   (`setImmediate`) to the thread with the least predicted work, as long as what it then holds stays within
 *   HOLD_BUDGET_MS (and `batchSize` items): the water-fill of `placement.ts`. No-op items still travel dozens to a
 *   message; an item of a millisecond has at most one more queued behind it, and items of several milliseconds go
 *   one at a time;
 * - a thread whose running item has overrun its prediction by more than the budget gives its unstarted items back
 *   to the queue, and an idle thread takes unstarted items from a busy one when the queue is empty. Taking back is
 *   safe without asking the thread: the item is sent to the second thread as well, and the slot word's start CAS
 *   (`CLAIMED→RUNNING`, done by the thread) lets exactly one of them run it; the other reports it not started.
 * So no unstarted item waits behind a busy thread while another thread is free.
 * Results stream back per thread, and each results message refills that thread. Change sets of the state store ride
 * in front of items in the same message, so a thread's replica is never behind the state an item was sent against.
 *
 * Starts: a thread starts an item as soon as it has nothing before it. Main sees that moment (within a message's
 * latency) when it sends to a thread with nothing assigned, and when a thread's results arrive (the next item it
 * holds starts then); a `StartObserver` is told, so that deadlines count from the start of the work.
 *
 * Each thread is a `ThreadChannel` (its port, lifecycle, held items, idle timer); each dispatched item a
 * `PendingItem`, which settles with an `Outcome` (outcome.ts).
 *
 * Accounting: every dispatched item settles exactly once — with the outcome of the thread that ran it, as `canceled`
 * when it was canceled before any thread started it, or `lost` when the thread that started it died or was
 * terminated (crash, resource limit, or a canceled item that ignored cancel past the grace). Items a dead thread had
 * not started never ran: they are dispatched again, so work queued behind a crashing or runaway item is neither
 * failed with that item's reason nor redelivered.
 */
import { MessageChannel } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { Piscina } from 'piscina';
import type { Backoff } from '../backoff.js';
import type { Clock } from '../clock.js';
import { ModuleLoadError, ResourceLimitError, ThreadExitedError, TickpoolError, fromWire, toWire } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import { ThreadLogSink } from '../observability/thread-log-sink.js';
import { SlotState, ThreadPhase } from '../slots/slot-layout.js';
import type { SlotTable } from '../slots/slot-table.js';
import type { ChangeFeed } from '../backend/state-backend.js';
import type { ChangeSet } from '../state/types.js';
import { CostModel } from './cost-model.js';
import type { MainToThread, ModuleLoadFailure, ModuleRef, ResultMessage, ThreadInit, ThreadToMain, WorkItem } from '../protocol/messages.js';
import { assertNever, isResultMessage } from '../protocol/messages.js';
import { threadModuleHooks } from './module-hooks.js';
import { CANCELED, outcomeOf, unsendableOutcome, type Outcome, type StartObserver } from './outcome.js';
import { PendingItem } from './pending-item.js';
import { busiestThread, overran, placeQueued, takeBackCount, type PlacementLimits, type ThreadLoad } from './placement.js';
import { ChannelState, ThreadChannel } from './thread-channel.js';
import { ThreadBoard } from '../protocol/thread-board.js';
import { forEachResult } from '../protocol/wire.js';

// The types of `dispatch()`'s answer, for the modules that dispatch through the pool.
export type { Outcome, StartObserver };

export interface ResourceLimits {
  readonly maxOldGenerationSizeMb?: number;
  readonly maxYoungGenerationSizeMb?: number;
  readonly codeRangeSizeMb?: number;
  readonly stackSizeMb?: number;
}

export interface ThreadPoolOptions {
  readonly minThreads: number;
  readonly maxThreads: number;
  readonly slots: SlotTable;
  /** The state's change stream: this process's replica, which seeds and feeds the threads' replicas. */
  readonly state: ChangeFeed;
  readonly schedulers: Readonly<Record<string, ModuleRef>>;
  readonly handlers: Readonly<Record<string, ModuleRef>>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Most items in flight on one thread (what a crash can take with it), whatever their predicted cost. */
  readonly batchSize: number;
  /** Predicted work one thread may hold, ms. Default HOLD_BUDGET_MS; a test of the thread loop may lift it. */
  readonly holdBudgetMs?: number;
  /** How long a canceled item may keep running before its thread is terminated. */
  readonly cancelGraceMs: number;
  /** A thread above `minThreads` idle this long is stopped. */
  readonly idleTimeoutMs: number;
  /** How long an idle thread polls for more work before it sleeps, µs; main bumps its `POSTED` on every post then. */
  readonly idleSpinUs?: number;
  readonly resourceLimits?: ResourceLimits | undefined;
  /**
   * Spaces the replacements of a thread that keeps dying before it is ready (a module that now fails to import,
   * limits too small to boot): without it the pool would spawn threads in a loop as fast as they die.
   */
  readonly respawnBackoff: Backoff;
  /** Told when a thread ended unexpectedly (crash, resource limit, termination) and how many items it held. */
  readonly onThreadExit?: (exit: ThreadExit) => void;
  /**
   * Told when a thread started after `start()` could not load a registered module (during `start()`, the first
   * such failure rejects it instead).
   */
  readonly onModuleError?: (threadIndex: number, error: ModuleLoadError) => void;
}

export interface ThreadExit {
  readonly threadIndex: number;
  readonly reason: TickpoolError;
  /** Items the thread held when it ended. */
  readonly heldItems: number;
  /** Of those, the ones it had not started: they are dispatched again instead of settling as lost. */
  readonly requeuedItems: number;
}

/**
 * Predicted work that may wait on a thread behind the item it runs before the next item waits on main instead, ms.
 * It is also how far a running item may overrun its prediction before the items behind it are taken back. A
 * results message and a refill cost the two threads tens of µs: with one item of a millisecond queued behind the
 * one running, a thread never waits for its refill, while a 10 ms item never waits behind another one, and an item
 * behind an outlier waits at most its prediction plus this budget before another thread can take it.
 */
export const HOLD_BUDGET_MS = 2;

type Channel = ThreadChannel<PendingItem>;

export interface ThreadPoolStats {
  readonly threads: number;
  readonly inflight: number;
  readonly queued: number;
  readonly dispatched: number;
  readonly settled: number;
  readonly threadExits: number;
  /** Unstarted items sent to a second thread because the first was busy or overran (see the module comment). */
  readonly takenBack: number;
  readonly perThread: ReadonlyArray<{ readonly index: number; readonly inflight: number; readonly appliedIndex: number }>;
}

export class ThreadPool {
  readonly #options: ThreadPoolOptions;
  readonly #limits: PlacementLimits;
  /** Threads poll the board while idle (`idleSpinUs` > 0). */
  readonly #polling: boolean;
  readonly #piscina: Piscina;
  readonly #board: ThreadBoard;
  readonly #costs = new CostModel();
  readonly #channels: (Channel | undefined)[] = [];
  /**
   * The unsettled item of each slot, by slot number (a slot has one item in flight at a time): how a cancel finds
   * the dispatch it settles.
   */
  readonly #bySlot: (PendingItem | undefined)[] = [];
  #queue: PendingItem[] = [];
  #queueHead = 0;
  #seq = 0;
  #flushScheduled = false;
  /**
   * Set while the work caused by a results message is being dispatched (until the end of the event-loop turn):
   * those items are coalesced into batches instead of each going out alone to whichever thread just freed up,
   * which would settle into a one-item ping-pong under load.
   */
  #coalescing = false;
  #stopping = false;
  #stopped: Promise<void> | undefined;
  /** Set once the Piscina pool is being destroyed: no thread may outlive it. */
  #destroyed = false;
  #dispatched = 0;
  #settled = 0;
  /**
   * While a results message is processed (`#reporting`): the items it settled, told only once the pool's own
   * bookkeeping is done, so that the dispatches they cause find the pool consistent (as a promise's continuation
   * would, without a promise per item).
   */
  #reporting = false;
  readonly #reported: PendingItem[] = [];
  #threadExits = 0;
  #takenBack = 0;
  readonly #unsubscribe: () => void;
  readonly #loops = new Set<Promise<void>>();
  #readyWaiters: Array<() => void> = [];
  #starting = false;
  /** Why a thread died before it was ever ready while `start()` waited. */
  #bootFailure: TickpoolError | undefined;
  /** Thread indexes waiting out the respawn backoff after a boot failure. */
  readonly #respawning = new Set<number>();
  /** Slot → generation whose cancel grace timer is armed (one timer per canceled item). */
  readonly #graceArmed = new Map<number, number>();
  /** Module hooks each thread registers before importing user modules (main's TypeScript loader). */
  readonly #moduleHooks: readonly ModuleRef[] = threadModuleHooks();
  readonly #logs: ThreadLogSink;
  /** An item's predicted ms for the placement, or undefined when it needs no place (see `#flush`). */
  readonly #placementCost = (pending: PendingItem): number | undefined =>
    pending.settled || (pending.holder !== undefined && !pending.unstarted(this.#options.slots)) ? undefined : pending.cost.ms;
  readonly #failUnsendable = (pending: PendingItem, cloneError: unknown): void => this.#settle(pending, unsendableOutcome(pending.item, cloneError));
  readonly #onIdle = (channel: Channel): void => {
    if (!channel.isReady || channel.held.size > 0) return;
    if (this.#serving() <= this.#options.minThreads) return;
    channel.stop();
  };

  constructor(options: ThreadPoolOptions) {
    this.#options = options;
    this.#limits = Object.freeze({ budgetMs: options.holdBudgetMs ?? HOLD_BUDGET_MS, batchSize: options.batchSize });
    this.#polling = (options.idleSpinUs ?? 0) > 0;
    this.#board = ThreadBoard.create(options.maxThreads);
    this.#board.publishCommittedIndex(options.state.index);
    this.#logs = new ThreadLogSink(options.logger);
    this.#piscina = new Piscina({
      filename: new URL('../thread/entry.js', import.meta.url).href,
      minThreads: options.minThreads,
      maxThreads: options.maxThreads,
      // Each thread runs exactly one long-lived loop task; the loop keeps its event loop alive, so Piscina's
      // atomics wait between tasks never applies to a thread that is serving work.
      concurrentTasksPerWorker: 1,
      atomics: 'disabled',
      idleTimeout: 1000,
      ...(options.resourceLimits === undefined ? {} : { resourceLimits: { ...options.resourceLimits } }),
    });
    // An error event from Piscina with no listener would throw; thread deaths are handled per loop task.
    this.#piscina.on('error', (error: unknown) => options.logger.warn({ err: error }, 'pool thread error'));
    // Piscina replaces a thread whose task was aborted. When that thread's exit arrives after destroy() returned,
    // the replacement is born into a pool nobody owns any more: take it down as well.
    this.#piscina.on('workerCreate', () => {
      if (this.#destroyed) void this.#piscina.destroy();
    });
    this.#unsubscribe = options.state.onChange((change) => this.#onCommit(change));
  }

  /** Starts `minThreads` loops and resolves once they are ready. */
  async start(): Promise<void> {
    this.#starting = true;
    for (let i = 0; i < this.#options.minThreads; i++) this.#spawn(i);
    await this.#whenReady(this.#options.minThreads);
    this.#starting = false;
    // A thread that died before it was ever ready (a heap too small for its code, a module that exits the thread
    // at import) would die the same way again: fail the start rather than wait for a thread that never comes.
    if (this.#bootFailure !== undefined) throw this.#bootFailure;
  }

  get threadCount(): number {
    return this.#channels.filter((c) => c !== undefined && !c.ended).length;
  }

  /**
   * Sends an item to a thread; the promise settles exactly once, never rejects. `observer` is told when the item
   * is seen to start.
   */
  dispatch(item: WorkItem, observer?: StartObserver): Promise<Outcome> {
    return new Promise<Outcome>((resolve) => this.dispatchWith(item, observer, resolve));
  }

  /**
   * `dispatch` without a promise: `settled` is called exactly once with the outcome, never inside this call. Outcomes
   * a thread reported are handed out after the pool's bookkeeping for that message, in the order they came; the rest
   * (a stopping pool, a dead thread, a cancel) in a microtask. A `settled` that throws is logged.
   */
  dispatchWith(item: WorkItem, observer: StartObserver | undefined, settled: (outcome: Outcome) => void): void {
    const cost = item.kind === 'eval' ? this.#costs.forEvaluation(item.evaluation.type) : this.#costs.forRun(item.handler);
    const pending = new PendingItem(++this.#seq, item, settled, observer, cost);
    this.#bySlot[item.slot] = pending;
    this.#dispatched++;
    if (this.#stopping) {
      this.#settle(pending, { status: 'lost', error: new ThreadExitedError('Expected a running pool, but it is stopping') });
      return;
    }
    if (!this.#coalescing && this.#queueHead === this.#queue.length) {
      const idle = this.#idleChannel();
      if (idle !== undefined) {
        // The post first: what the start stamp costs comes after the thread has the item.
        this.#assign(idle, pending);
        this.#send(idle, [pending]);
        if (!pending.settled) this.#markStarted(pending);
        return;
      }
    }
    pending.queued = true;
    this.#queue.push(pending);
    this.#scheduleFlush();
  }

  /**
   * Asks the item in `slot` to stop (the thread reads the word), and terminates its thread if the item is still
   * running there after the grace period. The item's dispatch then settles as `canceled` or `lost`; at once when no
   * thread had started it (it holds nothing: wherever it waits, main's queue or a busy thread's hands, no thread can
   * start it any more), so that giving up unstarted work never waits for the work in front of it.
   */
  cancel(slot: number, generation: number): boolean {
    const { slots, clock, cancelGraceMs } = this.#options;
    const won = slots.cancel(slot, generation);
    // The slot's owner may have set the word itself (the task scheduler cancels its runs' slots directly, then asks
    // the executor): the item must still settle, or the grace period still has to run for one that ignores cancel.
    if (!won && !(slots.state(slot) === SlotState.CANCEL && slots.generation(slot) === generation)) return false;
    if (slots.canceledBeforeStart(slot, generation)) {
      const pending = this.#bySlot[slot];
      if (pending === undefined || pending.settled || pending.item.generation !== generation) return won;
      this.#settle(pending, CANCELED);
      return true;
    }
    if (!won && this.#graceArmed.get(slot) === generation) return false;
    this.#graceArmed.set(slot, generation);
    clock.setTimer(() => {
      if (this.#graceArmed.get(slot) === generation) this.#graceArmed.delete(slot);
      if (slots.generation(slot) !== generation || slots.state(slot) !== SlotState.CANCEL) return;
      const owner = slots.owner(slot);
      if (owner <= 0) return; // never started: settled when it was canceled
      const channel = this.#channels[owner - 1];
      if (channel === undefined || channel.ended) return;
      this.#options.logger.warn({ thread: channel.index, slot }, 'canceled work ignored cancel past the grace period; terminating its thread');
      channel.terminateFor(new ThreadExitedError(`Thread ${channel.index} was terminated: an item ignored cancel for ${cancelGraceMs} ms`));
    }, cancelGraceMs, { unref: true });
    return true;
  }

  /** Milliseconds every thread has spent running items, since the pool started (read from shared memory). */
  busyMs(): number {
    let sum = 0;
    for (let i = 0; i < this.#options.maxThreads; i++) sum += this.#board.busyMs(i);
    return sum;
  }

  /**
   * Predicted ms of the work the pool holds and no thread has started (waiting on main or queued behind a running
   * item), per ready thread: about how long the threads stay busy if nothing more comes. 0 with no ready thread.
   * Counting stops once it reaches `upToMs` (the answer is then at least that): main's queue may hold many items,
   * and a caller asking whether the threads are busy need not visit them all.
   */
  workAheadMs(upToMs = Number.POSITIVE_INFINITY): number {
    let ms = 0;
    let threads = 0;
    for (const channel of this.#channels) {
      if (channel === undefined || !channel.isReady) continue;
      threads++;
      if (channel.assigned > 1) ms += channel.loadMs - (this.#firstAssigned(channel)?.predictedMs ?? 0);
    }
    if (threads === 0) return 0;
    const enough = upToMs * threads;
    for (let i = this.#queueHead; i < this.#queue.length && ms < enough; i++) {
      const predicted = this.#placementCost(this.#queue[i]!);
      if (predicted !== undefined) ms += predicted;
    }
    return ms / threads;
  }

  /**
   * How many threads could start another item within `horizonMs`: what a broker that leases for this process, with
   * other processes' threads beside these, asks before it takes more, so that what it leases does not wait here
   * behind work while a thread elsewhere idles. A thread is free once the predicted rest of its running item and the
   * items assigned behind it have run. One whose running item has overrun its prediction by more than the budget is
   * busy for an unknown time (a long item among short ones of its kind): it does not count. A thread not running
   * yet (not started, idle-stopped, respawning) counts: it starts on demand.
   */
  threadsFreeWithin(horizonMs: number): number {
    const now = performance.now();
    let free = 0;
    let ready = 0;
    for (const channel of this.#channels) {
      if (channel === undefined || !channel.isReady) continue;
      ready++;
      const running = this.#firstAssigned(channel);
      if (running === undefined) {
        free++;
        continue;
      }
      const runningForMs = Number.isNaN(running.startedPerf) ? 0 : now - running.startedPerf;
      if (runningForMs > running.predictedMs + this.#limits.budgetMs) continue;
      if (Math.max(0, running.predictedMs - runningForMs) + channel.loadMs - running.predictedMs < horizonMs) free++;
    }
    return free + Math.max(0, this.#options.maxThreads - ready);
  }

  /** Replica index each thread has applied (read from shared memory). */
  appliedIndex(threadIndex: number): number {
    return this.#board.appliedIndex(threadIndex);
  }

  stats(): ThreadPoolStats {
    const perThread = this.#channels
      .filter((c): c is Channel => c !== undefined && !c.ended)
      .map((c) => ({ index: c.index, inflight: c.held.size, appliedIndex: this.appliedIndex(c.index) }));
    let queued = 0;
    for (let i = this.#queueHead; i < this.#queue.length; i++) if (!this.#queue[i]!.settled) queued++;
    return {
      threads: perThread.length,
      inflight: perThread.reduce((n, t) => n + t.inflight, 0),
      queued,
      dispatched: this.#dispatched,
      settled: this.#settled,
      threadExits: this.#threadExits,
      takenBack: this.#takenBack,
      perThread,
    };
  }

  /**
   * Stops every loop. Queued items and items still on threads settle as `lost` when `force` is set (threads are
   * terminated); otherwise loops finish what they hold first.
   */
  stop(options: { force?: boolean } = {}): Promise<void> {
    if (this.#stopped !== undefined) {
      // Already stopping: a forced call still takes down threads that have not let go.
      if (options.force === true) this.#terminateAll();
      return this.#stopped;
    }
    this.#stopped = this.#stop(options.force === true);
    return this.#stopped;
  }

  #terminateAll(): void {
    for (const channel of this.#channels) channel?.terminateByStop(new ThreadExitedError('Expected a running pool, but it was stopped'));
  }

  async #stop(force: boolean): Promise<void> {
    this.#stopping = true;
    // A start() still waiting for its threads ends now (the engine sees the stop); it is only woken by events.
    this.#notifyReady();
    this.#unsubscribe();
    const { slots } = this.#options;
    for (let i = this.#queueHead; i < this.#queue.length; i++) {
      const pending = this.#queue[i]!;
      if (pending.settled) continue;
      // One taken back from a busy thread is still in that thread's hands: make sure it never starts there.
      if (pending.unstarted(slots)) slots.cancel(pending.item.slot, pending.item.generation);
      else if (pending.holder !== undefined) continue; // a thread started it after all: it reports the outcome
      this.#settle(pending, { status: 'lost', error: new ThreadExitedError('Expected a running pool, but it was stopped') });
    }
    this.#queue = [];
    this.#queueHead = 0;
    if (force) this.#terminateAll();
    else for (const channel of this.#channels) channel?.stop();
    await Promise.allSettled([...this.#loops]);
    this.#destroyed = true;
    await this.#piscina.destroy();
    this.#logs.close();
  }

  #spawn(index: number): void {
    const { port1, port2 } = new MessageChannel();
    const log = this.#logs.open(index);
    const channel: Channel = new ThreadChannel({
      index,
      port: port1,
      log,
      board: this.#polling ? this.#board : undefined,
      clock: this.#options.clock,
      idleTimeoutMs: this.#options.idleTimeoutMs,
      onIdle: this.#onIdle,
    });
    this.#channels[index] = channel;
    const init: ThreadInit = {
      threadIndex: index,
      slotBuffer: this.#options.slots.buffer,
      boardBuffer: this.#board.buffer,
      schedulers: this.#options.schedulers,
      handlers: this.#options.handlers,
      full: this.#options.state.full(),
      log: log.init,
      moduleHooks: this.#moduleHooks,
      idleSpinUs: this.#options.idleSpinUs ?? 0,
    };
    port1.on('message', (message: ThreadToMain) => this.#onMessage(channel, message));
    const loop = this.#piscina
      .run({ port: port2, init }, { transferList: [port2, init.log.port], signal: channel.abort.signal })
      .then(
        () => this.#onLoopEnd(channel, undefined),
        (error: unknown) => this.#onLoopEnd(channel, error),
      );
    this.#loops.add(loop);
    void loop.finally(() => this.#loops.delete(loop));
  }

  #onMessage(channel: Channel, message: ThreadToMain): void {
    if (isResultMessage(message)) {
      this.#onResults(channel, message);
      return;
    }
    switch (message.type) {
      case 'ready':
        if (message.loadErrors !== undefined) this.#onLoadErrors(channel, message.loadErrors);
        channel.markReady();
        this.#options.respawnBackoff.reset();
        this.#notifyReady();
        this.#flush();
        // A thread that grew the pool for a backlog may find it gone by the time it is ready: it must still be
        // able to go idle, or it would stay above `minThreads` for good.
        if (channel.held.size === 0) this.#armIdle(channel);
        return;
      case 'resync': {
        const full = this.#options.state.full();
        channel.dropChanges();
        channel.post({ type: 'reset', full } satisfies MainToThread);
        return;
      }
      default:
        assertNever(message);
    }
  }

  /**
   * A thread could not load some registered module: during `start()` that fails the start (the deployment is broken:
   * every evaluation of that type would be nacked until it lands in `_failed`); later (a replaced or added thread) it
   * is reported. The thread serves all the same: its other modules work, and the broken one fails each item with
   * the same error.
   */
  #onLoadErrors(channel: Channel, failures: readonly ModuleLoadFailure[]): void {
    for (const f of failures) {
      const module = { kind: f.kind, name: f.name, url: f.url, exportName: f.exportName, threadIndex: channel.index };
      const error = new ModuleLoadError(module, fromWire(f.error));
      if (this.#starting) {
        this.#bootFailure ??= error;
        continue;
      }
      this.#options.logger.error({ thread: channel.index, err: error }, 'a pool thread could not load a registered module');
      this.#options.onModuleError?.(channel.index, error);
    }
  }

  #onResults(channel: Channel, message: ResultMessage): void {
    this.#reporting = true;
    try {
      this.#settleResults(channel, message);
    } finally {
      this.#tellReported();
    }
  }

  #settleResults(channel: Channel, message: ResultMessage): void {
    let count = 0;
    forEachResult(message, (seq, status, extra, number, ms, value) => {
      count++;
      const pending = channel.held.get(seq);
      if (pending === undefined) return;
      if (status !== 'not-started') {
        pending.cost.observe(ms);
        this.#settle(pending, outcomeOf(status, extra, number, value));
        return;
      }
      channel.held.delete(seq);
      pending.removeHolder(channel);
      if (pending.assigned === channel) this.#unassign(pending);
      // Nobody else has it, so nobody started it: it was canceled before it could start.
      if (pending.holder === undefined && !pending.queued) this.#settle(pending, CANCELED);
    });
    // The thread sent these results before starting what it holds next: that item is starting now.
    const next = this.#firstAssigned(channel);
    if (next !== undefined) this.#markStarted(next);
    if (channel.held.size === 0) this.#armIdle(channel);
    if (this.#queueHead < this.#queue.length) this.#flush();
    // Idle with nothing queued: the work these results release (the workers' next dispatches) arrives after this
    // turn, so taking items from a busy thread waits for the next flush, where that new work goes first.
    else if (channel.assigned === 0) this.#scheduleFlush();
    if (count > 1) {
      this.#coalescing = true;
      this.#scheduleFlush();
    }
  }

  #onLoopEnd(channel: Channel, error: unknown): void {
    const was = channel.end();
    if (this.#channels[channel.index] === channel) this.#channels[channel.index] = undefined;
    const held = [...channel.held.values()];
    channel.held.clear();
    let heldItems = 0;
    let requeued = 0;
    if (held.length > 0) {
      const requeue: PendingItem[] = [];
      const reason = channel.terminatedFor ?? this.#describeExit(channel, error);
      for (const pending of held) {
        pending.removeHolder(channel);
        if (pending.assigned === channel) this.#unassign(pending);
        const fate = this.#fateOf(pending, channel);
        if (fate === 'elsewhere') continue;
        heldItems++;
        if (fate === 'unstarted' && !this.#stopping) {
          requeued++;
          pending.startedPerf = Number.NaN;
          if (!pending.queued) requeue.push(pending);
        } else if (fate === 'canceled') this.#settle(pending, CANCELED);
        else this.#settle(pending, { status: 'lost', error: reason });
      }
      if (heldItems > 0) this.#options.logger.warn({ thread: channel.index, items: heldItems, err: reason }, 'pool thread ended holding work');
      if (requeue.length > 0) {
        for (const pending of requeue) pending.queued = true;
        this.#queue.splice(this.#queueHead, 0, ...requeue);
        this.#scheduleFlush();
      }
    }
    if (error !== undefined || heldItems > 0) {
      this.#threadExits++;
      const reason = channel.terminatedFor ?? this.#describeExit(channel, error);
      // Ended by the pool's forced stop: ending it was the stop, no exit to report.
      if (was !== ChannelState.TERMINATING) {
        this.#options.onThreadExit?.({ threadIndex: channel.index, reason, heldItems, requeuedItems: requeued });
      }
    }
    // It never said ready (a thread asked to stop or terminated before it did only exists while the pool stops).
    const booted = was !== ChannelState.BOOTING;
    if (this.#starting && !booted && error !== undefined) {
      this.#bootFailure ??= channel.terminatedFor ?? this.#describeExit(channel, error);
      this.#notifyReady();
      return;
    }
    if (!this.#stopping && was !== ChannelState.STOPPING) this.#respawn(channel.index, booted);
    else if (!this.#stopping && this.#queueHead < this.#queue.length) this.#flush();
  }

  /**
   * What becomes of an unsettled item a dead thread held: it ran there (`lost`), never started anywhere and is
   * with no other thread (`unstarted`: dispatch it again), was canceled before any start (`canceled`), or another
   * thread that was sent it too runs it or will (`elsewhere`).
   */
  #fateOf(pending: PendingItem, dead: Channel): 'lost' | 'unstarted' | 'canceled' | 'elsewhere' {
    const { slots } = this.#options;
    const { slot, generation } = pending.item;
    const current = slots.generation(slot) === generation;
    const state = slots.state(slot);
    const owner = slots.owner(slot);
    if (current && (state === SlotState.RUNNING || state === SlotState.CANCEL) && owner === dead.index + 1) {
      // It finished there and only its result died with the thread (it waited in the outbox behind the item that
      // ended the thread): it did nothing wrong, so it runs again as if it had never started.
      if (state === SlotState.RUNNING && slots.phase(slot) === ThreadPhase.FINISHED && slots.unstart(slot, generation)) {
        return pending.holder !== undefined || pending.queued ? 'elsewhere' : 'unstarted';
      }
      return 'lost';
    }
    if (pending.holder !== undefined || pending.queued) return 'elsewhere';
    if (current && state === SlotState.CLAIMED) return 'unstarted';
    if (current && state === SlotState.CANCEL && owner <= 0) return 'canceled';
    return 'lost';
  }

  /**
   * Replaces a thread that ended. One that had served work is replaced at once (its death was the work's doing,
   * and the delivery limit bounds that); one that died before it was ever ready is replaced after the next
   * respawn backoff delay, which grows while boots keep failing and resets once a thread is ready.
   */
  #respawn(index: number, booted: boolean): void {
    if (booted) {
      this.#spawn(index);
      return;
    }
    const delay = this.#options.respawnBackoff.nextDelay();
    this.#options.logger.warn({ thread: index, retryInMs: delay }, 'pool thread died before it was ready; replacing it after a backoff');
    this.#respawning.add(index);
    this.#options.clock.setTimer(
      () => {
        this.#respawning.delete(index);
        if (!this.#stopping && this.#channels[index] === undefined) this.#spawn(index);
      },
      delay,
      { unref: true },
    );
  }

  #describeExit(channel: Channel, error: unknown): TickpoolError {
    const code = (error as { code?: unknown } | undefined)?.code;
    if (code === 'ERR_WORKER_OUT_OF_MEMORY') {
      const limits = JSON.stringify(this.#options.resourceLimits ?? {});
      return new ResourceLimitError(`Thread ${channel.index} exceeded its resource limits ${limits} and was stopped`, {
        cause: error,
        details: { resourceLimits: this.#options.resourceLimits },
      });
    }
    const message = error instanceof Error ? error.message : 'ended unexpectedly';
    return new ThreadExitedError(`Thread ${channel.index} exited: ${message}`, { cause: error, details: { wire: toWire(error) } });
  }

  #settle(pending: PendingItem, outcome: Outcome): void {
    if (pending.settled) return;
    pending.outcome = outcome;
    const seq = pending.seq;
    if (this.#bySlot[pending.item.slot] === pending) this.#bySlot[pending.item.slot] = undefined;
    if (pending.holder !== undefined) {
      pending.holder.held.delete(seq);
      if (pending.moreHolders !== undefined) for (const channel of pending.moreHolders) channel.held.delete(seq);
    }
    if (pending.assigned !== undefined) this.#unassign(pending);
    this.#settled++;
    if (this.#reporting) this.#reported.push(pending);
    else queueMicrotask(() => this.#tell(pending));
  }

  /** Hands a settled item's outcome to its dispatcher. */
  #tell(pending: PendingItem): void {
    try {
      pending.resolve(pending.outcome!);
    } catch (error) {
      this.#options.logger.error({ err: error, seq: pending.seq }, 'a dispatch callback threw');
    }
  }

  /**
   * Hands out the outcomes a results message settled, once the pool's bookkeeping for it is done. What they cause
   * to settle meanwhile is told in a microtask, as outside a results message.
   */
  #tellReported(): void {
    this.#reporting = false;
    const reported = this.#reported;
    for (let i = 0; i < reported.length; i++) this.#tell(reported[i]!);
    // Emptied: it must not hold on to settled items.
    reported.length = 0;
  }

  /** Counts `pending` in `channel`'s load; true when nothing else was assigned to it (the item starts at once). */
  #assign(channel: Channel, pending: PendingItem): boolean {
    pending.queued = false;
    pending.assigned = channel;
    pending.predictedMs = pending.cost.ms;
    return channel.assign(pending.predictedMs);
  }

  #unassign(pending: PendingItem): void {
    const channel = pending.assigned!;
    pending.assigned = undefined;
    channel.unassign(pending.predictedMs);
  }

  #markStarted(pending: PendingItem): void {
    if (!Number.isNaN(pending.startedPerf)) return;
    pending.startedPerf = performance.now();
    pending.observer?.itemStarted(this.#options.clock.now());
  }

  /** The first item assigned to `channel` in its order: the one it runs now (or starts next). */
  #firstAssigned(channel: Channel): PendingItem | undefined {
    if (channel.assigned === 0) return undefined;
    for (const pending of channel.held.values()) if (pending.assigned === channel) return pending;
    return undefined;
  }

  /**
   * Takes the unstarted items assigned to `from` (all but its first, which it runs) back from it, at most `limit`,
   * oldest first. They stay in its hands too: whichever thread starts one first runs it.
   */
  #takeBack(from: Channel, limit: number): PendingItem[] {
    const taken: PendingItem[] = [];
    const running = this.#firstAssigned(from);
    for (const pending of from.held.values()) {
      if (taken.length >= limit) break;
      if (pending === running || pending.assigned !== from || !pending.unstarted(this.#options.slots)) continue;
      this.#unassign(pending);
      pending.startedPerf = Number.NaN;
      taken.push(pending);
    }
    this.#takenBack += taken.length;
    return taken;
  }

  #idleChannel(): Channel | undefined {
    for (const channel of this.#channels) {
      if (channel !== undefined && channel.isReady && channel.assigned === 0) return channel;
    }
    return undefined;
  }

  #scheduleFlush(): void {
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => {
      this.#flushScheduled = false;
      this.#coalescing = false;
      this.#flush();
    });
  }

  /**
   * Hands out what waits in main's queue, ONE message per thread: the placement (placement.ts) decides which
   * items go where from the threads' predicted loads; here the pool reads what that needs (the clock, which
   * items are still unstarted) and carries the decision out.
   */
  #flush(): void {
    const open = this.#channels.filter(isOpen);
    if (open.length === 0) return;
    const now = performance.now();
    // Only worth knowing where another thread could take the items: a second thread, or one the pool may start.
    const alone = open.length === 1 && this.#options.maxThreads === 1;
    const loads: ThreadLoad[] = [];
    // Items stuck behind an overrunning item go back to the front of the queue: they are older than what waits there.
    let stuck: PendingItem[] | undefined;
    for (const c of open) {
      const running = this.#firstAssigned(c);
      const runningMs = running?.predictedMs ?? 0;
      const overrun = !alone && running !== undefined && overran(c.assigned, runningMs, now - running.startedPerf, this.#limits.budgetMs);
      if (overrun) (stuck ??= []).push(...this.#takeBack(c, Number.POSITIVE_INFINITY));
      loads.push({ assigned: c.assigned, loadMs: c.loadMs, runningMs, overrun });
    }
    if (stuck !== undefined && stuck.length > 0) {
      for (const pending of stuck) pending.queued = true;
      this.#queue.splice(this.#queueHead, 0, ...stuck);
    }
    // Passed over: taken back from a thread that has since started it (or canceled before any start), whose holder
    // reports it. Placed or passed over, every item up to `next` has left the queue.
    const { given, next } = placeQueued(this.#queue, this.#queueHead, this.#placementCost, loads, this.#limits);
    for (let i = this.#queueHead; i < next; i++) this.#queue[i]!.queued = false;
    this.#queueHead = next;
    /** Items that start as soon as their message arrives (first on a thread with nothing assigned). */
    const startsNow: PendingItem[] = [];
    for (let i = 0; i < open.length; i++) for (const pending of given[i]!) if (this.#assign(open[i]!, pending)) startsNow.push(pending);
    // The queue is empty: an idle thread takes unstarted items from a busy one rather than wait beside it.
    if (this.#queueHead === this.#queue.length) {
      for (let i = 0; i < open.length; i++) {
        const idle = open[i]!;
        if (idle.assigned !== 0) continue;
        const busiest = busiestThread(open, i);
        if (busiest < 0) break;
        for (const pending of this.#takeBack(open[busiest]!, takeBackCount(open[busiest]!.assigned))) {
          if (this.#assign(idle, pending)) startsNow.push(pending);
          given[i]!.push(pending);
        }
      }
    }
    for (let i = 0; i < open.length; i++) if (given[i]!.length > 0) this.#send(open[i]!, given[i]!);
    for (const pending of startsNow) if (!pending.settled) this.#markStarted(pending);
    if (this.#queueHead === this.#queue.length) {
      this.#queue = [];
      this.#queueHead = 0;
    } else if (this.#queueHead > 4096) {
      this.#queue = this.#queue.slice(this.#queueHead);
      this.#queueHead = 0;
    }
    // Threads that got no items still need the commits, so a later waitForIndex on them does not stall.
    for (const c of open) if (c.hasChanges) this.#send(c, []);
    if (this.#queueHead < this.#queue.length) this.#maybeGrow();
  }

  #send(channel: Channel, batch: readonly PendingItem[]): void {
    for (let i = 0; i < batch.length; i++) {
      const p = batch[i]!;
      channel.held.set(p.seq, p);
      p.addHolder(channel);
    }
    // Only the items that cannot be cloned fail; the others went one by one.
    if (!channel.sendWork(batch, this.#failUnsendable) && channel.held.size === 0) this.#armIdle(channel);
  }

  #maybeGrow(): void {
    const live = this.#channels.filter((c) => c !== undefined && !c.ended).length;
    if (live >= this.#options.maxThreads) return;
    for (let i = 0; i < this.#options.maxThreads; i++) {
      if (this.#channels[i] === undefined && !this.#respawning.has(i)) {
        this.#spawn(i);
        return;
      }
    }
  }

  /** Threads that serve work now or will once ready: booting or ready, not asked to stop. */
  #serving(): number {
    let count = 0;
    for (const c of this.#channels) if (c !== undefined && (c.state === ChannelState.BOOTING || c.isReady)) count++;
    return count;
  }

  /**
   * Stops `channel` after `idleTimeoutMs` without work, if the pool is still above `minThreads` then. The count is
   * taken again when the timer fires (`#onIdle`): threads that went idle together all armed their timers while the
   * pool was above the minimum, and each one that fires first brings it closer to it.
   */
  #armIdle(channel: Channel): void {
    if (channel.idleArmed || !channel.isReady || this.#serving() <= this.#options.minThreads) return;
    channel.armIdle();
  }

  #onCommit(change: ChangeSet): void {
    this.#board.publishCommittedIndex(change.index);
    let any = false;
    for (const channel of this.#channels) {
      if (channel === undefined || channel.ended) continue;
      channel.addChange(change);
      any = true;
    }
    if (any) this.#scheduleFlush();
  }

  #whenReady(count: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const check = (): boolean => {
        if (this.#channels.filter(isOpen).length >= count || this.#stopping || this.#bootFailure !== undefined) {
          resolve();
          return true;
        }
        return false;
      };
      const waiter = (): void => {
        if (!check()) this.#readyWaiters.push(waiter);
      };
      if (!check()) this.#readyWaiters.push(waiter);
    });
  }

  #notifyReady(): void {
    const waiters = this.#readyWaiters;
    this.#readyWaiters = [];
    for (const w of waiters) w();
  }
}

const isOpen = (c: Channel | undefined): c is Channel => c !== undefined && c.isReady;
