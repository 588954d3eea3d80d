/**
 * The dispatcher: items go through shared memory, not a message per item per thread. Piscina manages the threads'
 * lifecycles (start, replacement after a crash, termination, resource limits); each thread runs one long-lived loop
 * task (`thread/thread-loop.ts`) that takes work from the shared work queue whenever it is free.
 *
 * - Dispatch: main writes the item once into its slot's record and publishes it at its priority
 *   (`protocol/work-queue.ts`); a parked thread is woken with `Atomics.notify`, a busy one takes it when it is free.
 *   No thread holds an item it has not started, so no unstarted item waits behind a busy thread while another is
 *   free, and the broker's order (priority, then FIFO) holds in the pool: the next free thread takes the best item.
 * - Results: each thread appends the outcome of an item to its own result ring as the item ends; main drains every
 *   ring in one pass when a thread rings the doorbell (only the first result after main armed it rings), so main
 *   wakes once per batch of results, however many threads produced them.
 * - State: every commit is written once into the shared change log (`protocol/change-log.ts`); a thread applies what
 *   its replica lacks before it starts an item. A replica a ring behind is reset from a full copy, by message.
 * - Messages remain for what is rare: a thread's start, a reset, a stop, the numbers of shared buffers a payload
 *   holds (`protocol/shared-registry.ts`), an item whose payload cannot be written as bytes (pinned to one thread),
 *   and a result its ring cannot take.
 *
 * Starts: threads take a level's entries in order, so the ring's head tells main which items left the queue
 * (`QueueLedger.sync`, on every drain); a `StartObserver` is told then, with the thread's own stamp of the start when
 * main's clock is the system clock. Deadlines count from there.
 *
 * Accounting: every dispatched item settles exactly once — with its thread's outcome, as `canceled` when it was
 * canceled before any thread started it (at once: the start CAS decides that race), or `lost` when its thread died
 * or was terminated while it ran (crash, resource limit, or an item that ignored cancel past the grace). An item
 * that finished on a thread that died before its outcome was written runs again, as if it had not started.
 */
import { MessageChannel } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { Piscina } from 'piscina';
import type { Backoff } from '../backoff.js';
import { systemClock, type Clock, type TimerHandle } from '../clock.js';
import { ModuleLoadError, ResourceLimitError, ThreadExitedError, TickpoolError, fromWire, toWire } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import { ThreadLogSink } from '../observability/thread-log-sink.js';
import { ByteReader, ByteWriter, UnencodableValue } from '../protocol/byte-codec.js';
import { ChangeLogWriter } from '../protocol/change-log.js';
import { assertNever, type ItemOutcome, type MainToThread, type ModuleLoadFailure, type ModuleRef, type ThreadInit, type ThreadToMain, type WorkItem } from '../protocol/messages.js';
import { readOutcome, writeItem } from '../protocol/records.js';
import { createResultRing } from '../protocol/result-ring.js';
import { MainSharedRegistry } from '../protocol/shared-registry.js';
import { ThreadBoard } from '../protocol/thread-board.js';
import { WorkQueueWriter } from '../protocol/work-queue.js';
import { SlotState, ThreadPhase } from '../slots/slot-layout.js';
import type { SlotTable } from '../slots/slot-table.js';
import type { ChangeFeed } from '../backend/state-backend.js';
import type { ChangeSet } from '../state/types.js';
import { planWrite, seal, sealedBytesOf } from '../state/sealed.js';
import { CostModel } from './cost-model.js';
import { threadModuleHooks } from './module-hooks.js';
import { CANCELED, outcomeOf, unsendableOutcome, type Outcome, type StartObserver } from './outcome.js';
import { Place, PendingItem } from './pending-item.js';
import { QueueLedger } from './queue-ledger.js';
import { ChannelState, ThreadChannel } from './thread-channel.js';

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
  /** How long a canceled item may keep running before its thread is terminated. */
  readonly cancelGraceMs: number;
  /** A thread above `minThreads` idle this long is stopped. */
  readonly idleTimeoutMs: number;
  readonly resourceLimits?: ResourceLimits | undefined;
  /** Size of the shared change log, bytes (a power of two); default `DEFAULT_CHANGE_LOG_BYTES`. */
  readonly changeLogBytes?: number;
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
  /** Items the thread held when it ended: the one it ran, and those pinned to it. */
  readonly heldItems: number;
  /** Of those, the ones it had not started (or had finished without sending their results): dispatched again. */
  readonly requeuedItems: number;
}

/**
 * How far a running item may overrun its prediction before the pool stops counting its thread as free soon (for
 * the pacing of a broker with round trips: see `threadsFreeWithin`), ms.
 */
export const OVERRUN_BUDGET_MS = 2;
/** Priority of a task run's item in the work queue: a default evaluation's. */
export const TASK_RUN_PRIORITY = 50;

type Channel = ThreadChannel<PendingItem>;

export interface ThreadPoolStats {
  readonly threads: number;
  /** Items dispatched and not settled: waiting in the queue, or running. */
  readonly inflight: number;
  /** Of those, waiting for a thread. */
  readonly queued: number;
  readonly dispatched: number;
  readonly settled: number;
  readonly threadExits: number;
  /** Times a thread woke main for its results (each costs main a turn of its event loop: fewer per item is cheaper). */
  readonly doorbells: number;
  /** Each live thread: `ready` once main has its ready message (a thread may park before main reads it). */
  readonly perThread: ReadonlyArray<{ readonly index: number; readonly ready: boolean; readonly parked: boolean; readonly appliedIndex: number }>;
}

export class ThreadPool {
  readonly #options: ThreadPoolOptions;
  readonly #piscina: Piscina;
  readonly #board: ThreadBoard;
  readonly #queue: WorkQueueWriter;
  readonly #ledger: QueueLedger;
  #doorbells = 0;
  readonly #log: ChangeLogWriter;
  readonly #shared: MainSharedRegistry;
  readonly #writer: ByteWriter;
  readonly #reader: ByteReader;
  readonly #costs = new CostModel();
  readonly #channels: (Channel | undefined)[] = [];
  /** The unsettled item of each slot, by slot number (a slot has one item in flight at a time). */
  readonly #bySlot: (PendingItem | undefined)[] = [];
  /** Every unsettled item (for a stop, a thread's death, the pacing reads). */
  readonly #pending = new Set<PendingItem>();
  /** Items seen to have started and not yet settled. */
  readonly #running = new Set<PendingItem>();
  /** Whether the thread's stamp of a start is on main's clock (the system clock), or main stamps it itself. */
  readonly #threadStamps: boolean;
  #seq = 0;
  #stopping = false;
  #stopped: Promise<void> | undefined;
  /** Set once the Piscina pool is being destroyed: no thread may outlive it. */
  #destroyed = false;
  #dispatched = 0;
  #settled = 0;
  /**
   * While the outcomes of a drain are settled (`#reporting`): they are told only once the pool's own bookkeeping
   * for the drain is done, so that the dispatches they cause find the pool consistent.
   */
  #reporting = false;
  readonly #reported: PendingItem[] = [];
  #threadExits = 0;
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
  #idleTimer: TimerHandle | undefined;
  readonly #onStarted = (pending: PendingItem): void => this.#started(pending);

  constructor(options: ThreadPoolOptions) {
    this.#options = options;
    this.#threadStamps = options.clock === systemClock;
    this.#board = ThreadBoard.create(options.maxThreads);
    this.#queue = new WorkQueueWriter(options.maxThreads, options.slots.capacity);
    this.#ledger = new QueueLedger(this.#queue);
    // The first result rings main; each drain arms the doorbell again when it is done.
    this.#queue.armDoorbell();
    this.#log = new ChangeLogWriter(options.changeLogBytes, sealedBytesOf);
    this.#shared = new MainSharedRegistry(
      (id, buffer) => this.#broadcast({ type: 'share', id, buffer }),
      (id) => this.#broadcast({ type: 'unshare', id }),
    );
    this.#writer = new ByteWriter(this.#shared);
    this.#reader = new ByteReader(this.#shared);
    this.#logs = new ThreadLogSink(options.logger);
    this.#piscina = new Piscina({
      filename: new URL('../thread/piscina-entry.cjs', import.meta.url).href,
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
   * a thread reported are handed out after the pool's bookkeeping for that drain, in the order they came; the rest
   * (a stopping pool, a dead thread, a cancel) in a microtask. A `settled` that throws is logged.
   */
  dispatchWith(item: WorkItem, observer: StartObserver | undefined, settled: (outcome: Outcome) => void): void {
    const cost = item.kind === 'eval' ? this.#costs.forEvaluation(item.evaluation.type) : this.#costs.forRun(item.handler);
    const priority = item.kind === 'eval' ? item.evaluation.priority : TASK_RUN_PRIORITY;
    const pending = new PendingItem(++this.#seq, item, settled, observer, cost, priority);
    this.#dispatched++;
    if (this.#stopping) {
      this.#settle(pending, { status: 'lost', error: new ThreadExitedError('Expected a running pool, but it is stopping') });
      return;
    }
    // A thread has nothing to do (fewer items out than ready threads): it starts this one now.
    const startsNow = this.#pending.size < this.#readyThreads();
    this.#bySlot[item.slot] = pending;
    this.#pending.add(pending);
    const w = this.#writer;
    w.reset();
    try {
      writeItem(w, pending.seq, item);
    } catch (error) {
      if (error instanceof UnencodableValue) {
        this.#pin(pending);
        return;
      }
      throw error;
    }
    this.#queue.write(item.slot, item.generation, w.bytes, pending.predictedMs);
    this.#ledger.add(pending);
    this.#wakeForWork();
    if (startsNow) this.#tellStart(pending, this.#options.clock.now());
  }

  /**
   * Asks the item in `slot` to stop (the thread reads the word), and terminates its thread if the item is still
   * running there after the grace period. The item's dispatch then settles as `canceled` or `lost`; at once when no
   * thread had started it (it holds nothing: no thread can start it any more), so that giving up unstarted work
   * never waits for the work in front of it.
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

  /**
   * When the item of `slot` at `generation` started, on the pool's clock (the thread's own stamp with the system
   * clock, else when the pool saw it leave the queue), or undefined when the pool has not seen it start.
   */
  startedAt(slot: number, generation: number): number | undefined {
    this.#sync();
    const pending = this.#bySlot[slot];
    if (pending === undefined || pending.item.generation !== generation) return undefined;
    return pending.startedAt;
  }

  /** Milliseconds every thread has spent running items, since the pool started (read from shared memory). */
  busyMs(): number {
    let sum = 0;
    for (let i = 0; i < this.#options.maxThreads; i++) sum += this.#board.busyMs(i);
    return sum;
  }

  /**
   * Predicted ms of the work the pool holds and no thread has started, per ready thread: about how long the threads
   * stay busy if nothing more comes. 0 with no ready thread. The answer is at most `upToMs` (a caller asking whether
   * the threads are busy need not know by how much); the sum is kept as items come and go, so it costs no walk.
   */
  workAheadMs(upToMs = Number.POSITIVE_INFINITY): number {
    this.#sync();
    let threads = 0;
    for (const channel of this.#channels) if (channel !== undefined && channel.isReady) threads++;
    return threads === 0 ? 0 : Math.min(upToMs, this.#ledger.unstartedMs / threads);
  }

  /**
   * How many threads could start another item within `horizonMs`: what a broker that leases for this process, with
   * other processes' threads beside these, asks before it takes more. A thread is free once the predicted rest of
   * its running item has run (and nothing waits in the queue ahead of it); one whose running item has overrun its
   * prediction by more than OVERRUN_BUDGET_MS is busy for an unknown time and does not count. A thread not running
   * yet (not started, idle-stopped, respawning) counts: it starts on demand.
   */
  threadsFreeWithin(horizonMs: number): number {
    this.#sync();
    let ready = 0;
    for (const channel of this.#channels) if (channel !== undefined && channel.isReady) ready++;
    const now = performance.now();
    let busySoonFree = 0;
    let busy = 0;
    for (const pending of this.#running) {
      busy++;
      const ranMs = Number.isNaN(pending.startedPerf) ? 0 : now - pending.startedPerf;
      if (ranMs > pending.predictedMs + OVERRUN_BUDGET_MS) continue;
      if (Math.max(0, pending.predictedMs - ranMs) < horizonMs) busySoonFree++;
    }
    const idle = Math.max(0, ready - busy);
    const free = Math.max(0, idle + busySoonFree - this.#ledger.unstarted);
    return free + Math.max(0, this.#options.maxThreads - ready);
  }

  /** Replica index each thread has applied (read from shared memory). */
  appliedIndex(threadIndex: number): number {
    return this.#board.appliedIndex(threadIndex);
  }

  stats(): ThreadPoolStats {
    this.#sync();
    const perThread = this.#channels
      .filter((c): c is Channel => c !== undefined && !c.ended)
      .map((c) => ({ index: c.index, ready: c.isReady, parked: this.#queue.parkState(c.index).parked, appliedIndex: this.appliedIndex(c.index) }));
    let pinnedWaiting = 0;
    for (const c of this.#channels) if (c !== undefined) for (const p of c.pinned) if (p.place === Place.PINNED) pinnedWaiting++;
    return {
      threads: perThread.length,
      inflight: this.#pending.size,
      queued: this.#ledger.unstarted + pinnedWaiting,
      dispatched: this.#dispatched,
      settled: this.#settled,
      threadExits: this.#threadExits,
      doorbells: this.#doorbells,
      perThread,
    };
  }

  /**
   * Stops every loop. Items no thread started settle as `lost`; items on threads are finished first, or lost with
   * their threads when `force` is set (threads are terminated).
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

  // ───────────────────────────── dispatch ─────────────────────────────

  /**
   * Parked threads take what was published (one per item); with none parked, a thread the pool may still start is.
   * The wake is made as the item is published: an idle dispatch's latency is main's work before the notify plus the
   * thread's wake-up, and the notify is the larger part (10–20 µs of main's time on a VM).
   */
  #wakeForWork(items = 1): void {
    if (this.#stopping) return;
    const woken = this.#queue.parked > 0 ? this.#queue.wake(items) : 0;
    // More published than parked threads took up: a thread the pool may still start takes each of the rest.
    for (let rest = items - woken; rest > 0; rest--) this.#maybeGrow();
  }

  /** Moves the ledger up to the rings' heads (telling starts), and wakes threads for what the backlog published. */
  #sync(): void {
    const moved = this.#ledger.sync(this.#onStarted);
    if (moved > 0) this.#wakeForWork(moved);
  }

  /**
   * An item whose payload cannot be written as bytes goes by message to one thread: a parked one if any, else the one
   * with the fewest such items. It runs there before anything from the queue.
   */
  #pin(pending: PendingItem): void {
    const open = this.#channels.filter(isOpen);
    if (open.length === 0) {
      // No thread is ready yet (the pool is booting or respawning): try again once one is.
      pending.place = Place.PINNED;
      pending.pinnedTo = -1;
      this.#unpinned.push(pending);
      return;
    }
    let target = open.find((c) => this.#queue.parkState(c.index).parked);
    if (target === undefined) target = open.reduce((a, b) => (b.pinned.size < a.pinned.size ? b : a));
    pending.place = Place.PINNED;
    pending.pinnedTo = target.index;
    target.pinned.add(pending);
    try {
      target.post({ type: 'pinned', item: { ...pending.item, seq: pending.seq } });
    } catch (cloneError) {
      target.pinned.delete(pending);
      this.#settle(pending, unsendableOutcome(pending.item, cloneError));
      return;
    }
    this.#queue.wakeThread(target.index);
  }

  /** Pinned items that found no ready thread. */
  readonly #unpinned: PendingItem[] = [];

  #repin(): void {
    if (this.#unpinned.length === 0 || !this.#channels.some(isOpen)) return;
    const waiting = this.#unpinned.splice(0);
    for (const pending of waiting) if (!pending.settled) this.#pin(pending);
  }

  /** The ledger saw the item leave the queue (or its outcome came first): it is running. */
  #started(pending: PendingItem): void {
    this.#running.add(pending);
    const stamp = this.#threadStamps ? this.#queue.startedAt(pending.item.slot) : 0;
    // The thread's stamp is epoch ms; on the system clock that is main's clock too.
    pending.startedPerf = stamp > 0 ? performance.now() - Math.max(0, Date.now() - stamp) : performance.now();
    this.#tellStart(pending, stamp > 0 ? stamp : this.#options.clock.now());
  }

  /** Tells the item's observer when it started, once per start. */
  #tellStart(pending: PendingItem, at: number): void {
    if (pending.startedAt !== undefined) return;
    pending.startedAt = at;
    pending.observer?.itemStarted(at);
  }

  // ───────────────────────────── results ─────────────────────────────

  /**
   * Reads every thread's result ring and settles what it finds; then arms the doorbell again, and looks once more
   * (a result appended just before the doorbell was armed rang nobody). Outcomes are told once the pass is over.
   */
  #drainResults(): void {
    this.#reporting = true;
    try {
      for (;;) {
        this.#sync();
        for (const channel of this.#channels) if (channel !== undefined) this.#drainChannel(channel);
        this.#queue.armDoorbell();
        if (!this.#channels.some((c) => c !== undefined && c.results.pending)) break;
        // Something came meanwhile: take the doorbell back and read on (when a thread took it first, its ring
        // message is on the way and reads the rest).
        if (!this.#queue.disarmDoorbell()) break;
      }
    } finally {
      this.#tellReported();
    }
  }

  readonly #visitResult = (ring: Uint8Array, at: number): void => {
    this.#reader.reset(ring, at);
    const { slot, generation, outcome } = readOutcome(this.#reader, seal, planWrite);
    this.#onOutcome(slot, generation, outcome);
  };

  #drainChannel(channel: Channel): void {
    if (channel.results.pending) channel.results.drain(this.#visitResult);
  }

  #onOutcome(slot: number, generation: number, outcome: ItemOutcome): void {
    const pending = this.#bySlot[slot];
    if (pending === undefined || pending.settled || pending.item.generation !== generation || pending.seq !== outcome.seq) return;
    if (pending.place !== Place.RUNNING) {
      // Pinned, or taken and done before a sync saw it leave the queue.
      if (pending.place === Place.QUEUED || pending.place === Place.BACKLOG) this.#ledger.settledUnstarted(pending);
      pending.place = Place.RUNNING;
      this.#started(pending);
    }
    pending.cost.observe(outcome.ms);
    this.#settle(pending, outcomeFrom(outcome));
  }

  #settle(pending: PendingItem, outcome: Outcome): void {
    if (pending.settled) return;
    pending.outcome = outcome;
    const { slot } = pending.item;
    if (this.#bySlot[slot] === pending) this.#bySlot[slot] = undefined;
    this.#pending.delete(pending);
    this.#running.delete(pending);
    if (pending.place === Place.QUEUED || pending.place === Place.BACKLOG) this.#ledger.settledUnstarted(pending);
    if (pending.pinnedTo >= 0) this.#channels[pending.pinnedTo]?.pinned.delete(pending);
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

  /** Hands out the outcomes a drain settled, once the pool's bookkeeping for it is done. */
  #tellReported(): void {
    this.#reporting = false;
    const reported = this.#reported;
    for (let i = 0; i < reported.length; i++) this.#tell(reported[i]!);
    // Emptied: it must not hold on to settled items.
    reported.length = 0;
  }

  // ───────────────────────────── the change log ─────────────────────────────

  #onCommit(change: ChangeSet): void {
    if (this.#log.append(change)) return;
    // A commit larger than the whole log: no thread can read it from there. Each is reset past it.
    for (const channel of this.#channels) if (channel !== undefined && !channel.ended) this.#reset(channel);
  }

  #reset(channel: Channel): void {
    channel.post({ type: 'reset', full: this.#options.state.full(), position: this.#log.position } satisfies MainToThread);
  }

  #broadcast(message: MainToThread): void {
    for (const channel of this.#channels) if (channel !== undefined && !channel.ended) channel.post(message);
    // A parked thread reads it when woken; it must have it before it decodes an item that needs it.
    if (message.type === 'share') this.#queue.wakeAll();
  }

  // ───────────────────────────── threads ─────────────────────────────

  #spawn(index: number): void {
    const { port1, port2 } = new MessageChannel();
    const log = this.#logs.open(index);
    const results = createResultRing();
    const channel: Channel = new ThreadChannel({ index, port: port1, log, board: this.#board, results });
    this.#channels[index] = channel;
    const init: ThreadInit = {
      threadIndex: index,
      maxThreads: this.#options.maxThreads,
      slotBuffer: this.#options.slots.buffer,
      boardBuffer: this.#board.buffer,
      queue: this.#queue.buffers,
      results,
      changeLog: this.#log.buffer,
      logPosition: this.#log.position,
      shared: this.#shared.live(),
      schedulers: this.#options.schedulers,
      handlers: this.#options.handlers,
      full: this.#options.state.full(),
      log: log.init,
      moduleHooks: this.#moduleHooks,
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
    if (typeof message === 'number') {
      this.#doorbells++;
      this.#drainResults();
      return;
    }
    switch (message.type) {
      case 'outcome':
        this.#reporting = true;
        try {
          this.#onOutcome(message.slot, message.generation, message.outcome);
          this.#sync();
        } finally {
          this.#tellReported();
        }
        return;
      case 'ready':
        if (message.loadErrors !== undefined) this.#onLoadErrors(channel, message.loadErrors);
        channel.markReady();
        this.#options.respawnBackoff.reset();
        this.#notifyReady();
        this.#repin();
        this.#armIdleCheck();
        return;
      case 'resync':
        this.#reset(channel);
        return;
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

  #onLoopEnd(channel: Channel, error: unknown): void {
    // What it appended before it ended is settled first: those items are not lost. Every ring is read and the
    // doorbell armed again: a thread that claimed the doorbell and died before it rang (or whose ring message went
    // with its port) must not leave the other threads' results unread.
    this.#drainResults();
    const was = channel.end();
    if (this.#channels[channel.index] === channel) this.#channels[channel.index] = undefined;
    const reason = channel.terminatedFor ?? this.#describeExit(channel, error);
    let heldItems = 0;
    let requeued = 0;
    this.#sync();
    for (const pending of [...this.#pending]) {
      const fate = this.#fateOf(pending, channel);
      if (fate === undefined) continue;
      heldItems++;
      if (fate === 'again' && !this.#stopping) {
        requeued++;
        this.#again(pending);
      } else if (fate === 'canceled') this.#settle(pending, CANCELED);
      else this.#settle(pending, { status: 'lost', error: reason });
    }
    if (heldItems > 0) this.#options.logger.warn({ thread: channel.index, items: heldItems, err: reason }, 'pool thread ended holding work');
    if (error !== undefined || heldItems > 0) {
      this.#threadExits++;
      // Ended by the pool's forced stop: ending it was the stop, no exit to report.
      if (was !== ChannelState.TERMINATING) this.#options.onThreadExit?.({ threadIndex: channel.index, reason, heldItems, requeuedItems: requeued });
    }
    // It never said ready (a thread asked to stop or terminated before it did only exists while the pool stops).
    const booted = was !== ChannelState.BOOTING;
    if (this.#starting && !booted && error !== undefined) {
      this.#bootFailure ??= channel.terminatedFor ?? this.#describeExit(channel, error);
      this.#notifyReady();
      return;
    }
    if (!this.#stopping && was !== ChannelState.STOPPING) this.#respawn(channel.index, booted);
    else if (!this.#stopping && this.#ledger.unstarted > 0) this.#maybeGrow();
  }

  /**
   * What becomes of an unsettled item when `dead` ended: it ran there (`lost`); it finished there and only its
   * result died with the thread, or it was pinned there and never started (`again`: it runs again); it was pinned
   * there and canceled before it started (`canceled`); or it is not the dead thread's (undefined).
   */
  #fateOf(pending: PendingItem, dead: Channel): 'lost' | 'again' | 'canceled' | undefined {
    const { slots } = this.#options;
    const { slot, generation } = pending.item;
    const current = slots.generation(slot) === generation;
    const state = slots.state(slot);
    const owner = slots.owner(slot);
    if (current && (state === SlotState.RUNNING || state === SlotState.CANCEL) && owner === dead.index + 1) {
      // It finished there and only its result died with the thread: it did nothing wrong, so it runs again.
      if (state === SlotState.RUNNING && slots.phase(slot) === ThreadPhase.FINISHED && slots.unstart(slot, generation)) return 'again';
      return 'lost';
    }
    if (pending.pinnedTo === dead.index) {
      if (current && state === SlotState.CLAIMED) return 'again';
      if (current && state === SlotState.CANCEL && owner <= 0) return 'canceled';
      return 'lost';
    }
    return undefined;
  }

  /** Dispatches an unsettled item again, as if new (it keeps its record and its seq). */
  #again(pending: PendingItem): void {
    this.#running.delete(pending);
    pending.startedPerf = Number.NaN;
    pending.startedAt = undefined;
    if (pending.pinnedTo >= 0) {
      this.#channels[pending.pinnedTo]?.pinned.delete(pending);
      pending.pinnedTo = -1;
      this.#pin(pending);
      return;
    }
    this.#ledger.add(pending);
    this.#wakeForWork();
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

  /** A thread more, when work waits and no thread is parked, up to `maxThreads`. */
  #maybeGrow(): void {
    if (this.#stopping || this.#ledger.unstarted === 0) return;
    const live = this.#channels.filter((c) => c !== undefined && !c.ended).length;
    if (live >= this.#options.maxThreads) return;
    for (let i = 0; i < this.#options.maxThreads; i++) {
      if (this.#channels[i] === undefined && !this.#respawning.has(i)) {
        this.#spawn(i);
        return;
      }
    }
  }

  #readyThreads(): number {
    let count = 0;
    for (const c of this.#channels) if (c !== undefined && c.isReady) count++;
    return count;
  }

  /** Threads that serve work now or will once ready: booting or ready, not asked to stop. */
  #serving(): number {
    let count = 0;
    for (const c of this.#channels) if (c !== undefined && (c.state === ChannelState.BOOTING || c.isReady)) count++;
    return count;
  }

  /**
   * Looks for idle threads every `idleTimeoutMs` while the pool is above `minThreads`: a thread found parked twice
   * in a row, having taken nothing in between, has been idle that long, and is stopped (one at a time, down to
   * `minThreads`). One timer for the pool, whatever the thread count.
   */
  #armIdleCheck(): void {
    if (this.#idleTimer !== undefined || this.#stopping || this.#serving() <= this.#options.minThreads) return;
    this.#idleTimer = this.#options.clock.setTimer(
      () => {
        this.#idleTimer = undefined;
        this.#idleCheck();
        this.#armIdleCheck();
      },
      this.#options.idleTimeoutMs,
      { unref: true },
    );
  }

  #idleCheck(): void {
    for (const channel of this.#channels) {
      if (channel === undefined || !channel.isReady) continue;
      const now = this.#queue.parkState(channel.index);
      const before = channel.idleSeen;
      channel.idleSeen = now;
      if (before === undefined || !before.parked || !now.parked || before.taken !== now.taken || channel.pinned.size > 0) continue;
      if (this.#serving() <= this.#options.minThreads) return;
      channel.stop();
      this.#queue.wakeThread(channel.index);
    }
  }

  #terminateAll(): void {
    for (const channel of this.#channels) channel?.terminateByStop(new ThreadExitedError('Expected a running pool, but it was stopped'));
  }

  async #stop(force: boolean): Promise<void> {
    this.#stopping = true;
    // A start() still waiting for its threads ends now (the engine sees the stop); it is only woken by events.
    this.#notifyReady();
    this.#unsubscribe();
    if (this.#idleTimer !== undefined) this.#options.clock.clearTimer(this.#idleTimer);
    this.#idleTimer = undefined;
    const { slots } = this.#options;
    this.#sync();
    const lost = (): Outcome => ({ status: 'lost', error: new ThreadExitedError('Expected a running pool, but it was stopped') });
    for (const pending of [...this.#ledger.unstartedItems(), ...this.#unpinned.splice(0)]) {
      // Make sure no thread starts it after all; one that a thread did start reports its outcome.
      const { slot, generation } = pending.item;
      if (slots.cancel(slot, generation) && slots.canceledBeforeStart(slot, generation)) this.#settle(pending, lost());
    }
    for (const channel of this.#channels) {
      if (channel === undefined) continue;
      for (const pending of [...channel.pinned]) {
        const { slot, generation } = pending.item;
        if (slots.state(slot) === SlotState.CLAIMED && slots.generation(slot) === generation && slots.cancel(slot, generation)) this.#settle(pending, lost());
      }
    }
    if (force) this.#terminateAll();
    else for (const channel of this.#channels) channel?.stop();
    this.#queue.wakeAll();
    await Promise.allSettled([...this.#loops]);
    this.#destroyed = true;
    await this.#piscina.destroy();
    this.#logs.close();
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

/** The outcome a thread reported, as the pool's callers see it. */
function outcomeFrom(outcome: ItemOutcome): Outcome {
  switch (outcome.status) {
    case 'ok':
      return outcomeOf('ok', outcome.value, outcome.waitedMs);
    case 'error':
      return outcomeOf('error', outcome.error, outcome.retryable ? 1 : 0, outcome.value);
    case 'canceled':
      return CANCELED;
  }
}
