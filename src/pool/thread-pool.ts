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
import { performance } from 'node:perf_hooks';
import { systemClock } from '../clock.js';
import { ThreadExitedError, type TickpoolError } from '../errors.js';
import { ByteReader, ByteWriter, UnencodableValue } from '../protocol/byte-codec.js';
import { ChangeLogWriter } from '../protocol/change-log.js';
import { assertNever, type ItemOutcome, type MainToThread, type ModuleRef, type ThreadInit, type ThreadToMain, type WorkItem } from '../protocol/messages.js';
import { readOutcome, writeItem } from '../protocol/records.js';
import { MainSharedRegistry } from '../protocol/shared-registry.js';
import { ThreadBoard } from '../protocol/thread-board.js';
import { WorkQueueWriter } from '../protocol/work-queue.js';
import { SlotState } from '../slots/slot-layout.js';
import type { ChangeSet } from '../state/types.js';
import { planWrite, seal, sealedBytesOf } from '../state/sealed.js';
import { CostModel } from './cost-model.js';
import { threadModuleHooks } from './module-hooks.js';
import { CANCELED, outcomeOf, type Outcome, type StartObserver } from './outcome.js';
import { Place, PendingItem } from './pending-item.js';
import { threadsFreeWithin } from './free-threads.js';
import { fateOf } from './item-fate.js';
import { runningItems } from './running-items.js';
import { PinnedItems } from './pinned-items.js';
import { TASK_RUN_PRIORITY, type RunningItem, type ThreadPoolOptions, type ThreadPoolStats } from './pool-types.js';
import { QueueLedger } from './queue-ledger.js';
import { ChannelState, type ChannelStateValue } from './thread-channel.js';
import { ThreadSupervisor, type Channel } from './thread-supervisor.js';

// The types of `dispatch()`'s answer, for the modules that dispatch through the pool.
export type { Outcome, StartObserver };

export class ThreadPool {
  readonly #options: ThreadPoolOptions;
  readonly #board: ThreadBoard;
  readonly #queue: WorkQueueWriter;
  readonly #ledger: QueueLedger;
  #doorbells = 0;
  readonly #log: ChangeLogWriter;
  readonly #shared: MainSharedRegistry;
  readonly #writer: ByteWriter;
  readonly #reader: ByteReader;
  readonly #costs = new CostModel();
  readonly #threads: ThreadSupervisor;
  readonly #pinned: PinnedItems;
  /** The unsettled item of each slot, by slot number (a slot has one item in flight at a time). */
  readonly #bySlot: (PendingItem | undefined)[] = [];
  /** Every unsettled item (for a stop, a thread's death, the pacing reads). */
  readonly #pending = new Set<PendingItem>();
  /** Items seen to have started and not yet settled. */
  readonly #running = new Set<PendingItem>();
  /** Whether the thread's stamp of a start is on main's clock (the system clock), or main stamps it itself. */
  readonly #threadStamps: boolean;
  /** Monotonic ms, for how long items have run (`performance.now` unless the options give another). */
  readonly #monotonicNow: () => number;
  #seq = 0;
  #stopping = false;
  #stopped: Promise<void> | undefined;
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
  /** Slot → generation whose cancel grace timer is armed (one timer per canceled item). */
  readonly #graceArmed = new Map<number, number>();
  /** Module hooks each thread registers before importing user modules (main's TypeScript loader). */
  readonly #moduleHooks: readonly ModuleRef[] = threadModuleHooks();
  readonly #onStarted = (pending: PendingItem): void => this.#started(pending);

  constructor(options: ThreadPoolOptions) {
    this.#options = options;
    this.#threadStamps = options.clock === systemClock;
    this.#monotonicNow = options.monotonicNow ?? (() => performance.now());
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
    this.#threads = new ThreadSupervisor(
      options,
      {
        initFor: (index, results, log) => this.#threadInit(index, results, log),
        onMessage: (channel, message) => this.#onMessage(channel, message),
        onReady: () => this.#pinned.repin(),
        beforeEnd: () => this.#drainResults(),
        onEnd: (channel, reason, error, was) => this.#onThreadEnd(channel, reason, error, was),
        hasUnstarted: () => this.#ledger.unstarted > 0,
      },
      this.#board,
      this.#queue,
    );
    this.#pinned = new PinnedItems(() => this.#threads.channels, this.#queue, (pending, outcome) => this.#settle(pending, outcome));
    this.#unsubscribe = options.state.onChange((change) => this.#onCommit(change));
  }

  /** Starts `minThreads` loops and resolves once they are ready; rejects when one died before it was. */
  start(): Promise<void> {
    return this.#threads.start();
  }

  get threadCount(): number {
    return this.#threads.live;
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
    const startsNow = this.#pending.size < this.#threads.ready();
    this.#bySlot[item.slot] = pending;
    this.#pending.add(pending);
    const w = this.#writer;
    w.reset();
    try {
      writeItem(w, pending.seq, item);
    } catch (error) {
      if (error instanceof UnencodableValue) {
        this.#pinned.pin(pending);
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
      const channel = this.#threads.channels[owner - 1];
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
    const threads = this.#threads.ready();
    return threads === 0 ? 0 : Math.min(upToMs, this.#ledger.unstartedMs / threads);
  }

  /** How many threads could start another item within `horizonMs` (see `free-threads.ts`). */
  threadsFreeWithin(horizonMs: number): number {
    this.#sync();
    const counts = { ready: this.#threads.ready(), unstarted: this.#ledger.unstarted, maxThreads: this.#options.maxThreads };
    return threadsFreeWithin(this.#running, counts, horizonMs, this.#monotonicNow());
  }

  /** The items threads run now, one per busy thread. */
  running(): RunningItem[] {
    this.#sync();
    return runningItems(this.#running, this.#options.slots);
  }

  /** Replica index each thread has applied (read from shared memory). */
  appliedIndex(threadIndex: number): number {
    return this.#board.appliedIndex(threadIndex);
  }

  stats(): ThreadPoolStats {
    this.#sync();
    const perThread = this.#threads.channels
      .filter((c): c is Channel => c !== undefined && !c.ended)
      .map((c) => ({ index: c.index, ready: c.isReady, parked: this.#queue.parkState(c.index).parked, appliedIndex: this.appliedIndex(c.index) }));
    return {
      threads: perThread.length,
      inflight: this.#pending.size,
      queued: this.#ledger.unstarted + this.#pinned.heldUnstarted(),
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
      if (options.force === true) this.#threads.terminateAll();
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
    for (let rest = items - woken; rest > 0; rest--) this.#threads.maybeGrow();
  }

  /** Moves the ledger up to the rings' heads (telling starts), and wakes threads for what the backlog published. */
  #sync(): void {
    const moved = this.#ledger.sync(this.#onStarted);
    if (moved > 0) this.#wakeForWork(moved);
  }

  /** The ledger saw the item leave the queue (or its outcome came first): it is running. */
  #started(pending: PendingItem): void {
    this.#running.add(pending);
    const stamp = this.#threadStamps ? this.#queue.startedAt(pending.item.slot) : 0;
    // The thread's stamp is epoch ms; on the system clock that is main's clock too.
    const now = this.#monotonicNow();
    pending.startedPerf = stamp > 0 ? now - Math.max(0, Date.now() - stamp) : now;
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
        for (const channel of this.#threads.channels) if (channel !== undefined) this.#drainChannel(channel);
        this.#queue.armDoorbell();
        if (!this.#threads.channels.some((c) => c !== undefined && c.results.pending)) break;
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
    this.#pinned.unpin(pending);
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
    for (const channel of this.#threads.channels) if (channel !== undefined && !channel.ended) this.#reset(channel);
  }

  #reset(channel: Channel): void {
    channel.post({ type: 'reset', full: this.#options.state.full(), position: this.#log.position } satisfies MainToThread);
  }

  #broadcast(message: MainToThread): void {
    for (const channel of this.#threads.channels) if (channel !== undefined && !channel.ended) channel.post(message);
    // A parked thread reads it when woken; it must have it before it decodes an item that needs it.
    if (message.type === 'share') this.#queue.wakeAll();
  }

  // ───────────────────────────── threads ─────────────────────────────

  /** The pool's side of a thread's messages: results, and a replica that fell behind. */
  #onMessage(channel: Channel, message: Exclude<ThreadToMain, { type: 'ready' }>): void {
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
      case 'resync':
        this.#reset(channel);
        return;
      default:
        assertNever(message);
    }
  }

  /**
   * A thread's loop ended: each item it held settles (lost with it, or canceled) or runs again (see `fateOf`), and
   * an unexpected end is reported. What it appended before it ended was settled first (`beforeEnd`): those items
   * are not lost, and a thread that claimed the doorbell and died before it rang leaves no result unread.
   */
  #onThreadEnd(channel: Channel, reason: TickpoolError, error: unknown, was: ChannelStateValue): void {
    let heldItems = 0;
    let requeued = 0;
    this.#sync();
    for (const pending of [...this.#pending]) {
      const fate = fateOf(this.#options.slots, pending, channel.index);
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
  }

  /** Dispatches an unsettled item again, as if new (it keeps its record and its seq). */
  #again(pending: PendingItem): void {
    this.#running.delete(pending);
    pending.startedPerf = Number.NaN;
    pending.startedAt = undefined;
    if (pending.pinnedTo >= 0) {
      this.#pinned.unpin(pending);
      pending.pinnedTo = -1;
      this.#pinned.pin(pending);
      return;
    }
    this.#ledger.add(pending);
    this.#wakeForWork();
  }

  #threadInit(index: number, results: SharedArrayBuffer, log: ThreadInit['log']): ThreadInit {
    return {
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
      log,
      moduleHooks: this.#moduleHooks,
    };
  }

  async #stop(force: boolean): Promise<void> {
    this.#stopping = true;
    this.#threads.beginStop();
    this.#unsubscribe();
    const { slots } = this.#options;
    this.#sync();
    const lost = (): Outcome => ({ status: 'lost', error: new ThreadExitedError('Expected a running pool, but it was stopped') });
    for (const pending of [...this.#ledger.unstartedItems(), ...this.#pinned.takeWaiting()]) {
      // Make sure no thread starts it after all; one that a thread did start reports its outcome.
      const { slot, generation } = pending.item;
      if (slots.cancel(slot, generation) && slots.canceledBeforeStart(slot, generation)) this.#settle(pending, lost());
    }
    for (const channel of this.#threads.channels) {
      if (channel === undefined) continue;
      for (const pending of [...channel.pinned]) {
        const { slot, generation } = pending.item;
        if (slots.state(slot) === SlotState.CLAIMED && slots.generation(slot) === generation && slots.cancel(slot, generation)) this.#settle(pending, lost());
      }
    }
    await this.#threads.endAll(force);
  }
}

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
