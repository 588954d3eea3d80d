/**
 * The dispatcher: one long-lived loop task per Piscina thread, fed through its own `MessagePort`.
 *
 * Why not one `piscina.run()` per evaluation: Piscina spends ~25 µs of main-thread CPU per task, more than the
 * rest of the engine spends on an evaluation. Here Piscina manages thread lifecycles (start, replacement after a
 * crash, termination on abort, resource limits) and items travel in batches:
 * - a thread with nothing in flight gets an item at once (no batching when idle: lowest latency);
 * - otherwise items queue and are flushed once per event-loop turn (`setImmediate`), split across threads by how
 *   much each has in flight, at most `batchSize` in flight per thread (what a crash can take with it);
 * - results stream back per thread, and each results message refills that thread.
 * Change sets of the state store ride in front of items in the same message, so a thread's replica is never
 * behind the state an item was dispatched against.
 *
 * Accounting: every dispatched item settles exactly once — with the thread's outcome, or with `lost` when its
 * thread died or was terminated (crash, resource limit, or a canceled item that ignored cancel past the grace)
 * after it had started the item. Items the dead thread had not started yet never ran: they are dispatched again,
 * so work queued behind a crashing or runaway item is neither failed with that item's reason nor redelivered.
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import type { Backoff } from '../backoff.js';
import type { Clock, TimerHandle } from '../clock.js';
import {
  InvalidEvaluationError,
  InvalidTaskError,
  ModuleLoadError,
  ResourceLimitError,
  ThreadExitedError,
  TickpoolError,
  fromWire,
  toWire,
  type WireError,
} from '../errors.js';
import type { Logger } from '../observability/logger.js';
import { ThreadLogSink, type ThreadLog } from '../observability/thread-log-sink.js';
import { SlotState } from '../slots/slot-layout.js';
import type { SlotTable } from '../slots/slot-table.js';
import type { StateStore } from '../state/state-store.js';
import type { ChangeSet } from '../state/types.js';
import type { EvalItem, ItemOutcome, MainToThread, ModuleLoadFailure, ModuleRef, RunItem, ThreadInit, ThreadToMain, WorkItem } from './messages.js';
import { assertNever, isResultMessage } from './messages.js';
import { threadModuleHooks } from './module-hooks.js';
import { ThreadBoard } from './thread-board.js';
import { encodeWork, forEachResult, type ResultMessage } from './wire.js';

export type Outcome =
  | { readonly status: 'ok'; readonly value: unknown; readonly waitedMs: number }
  | { readonly status: 'error'; readonly error: TickpoolError; readonly retryable: boolean }
  | { readonly status: 'canceled' }
  /** The thread died with the item on it. */
  | { readonly status: 'lost'; readonly error: TickpoolError };

/** An item to dispatch; its `seq` is overwritten by the pool (callers pass 0), which saves a copy per item. */
export type ItemRequest = EvalItem | RunItem;

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
  readonly state: StateStore;
  readonly schedulers: Readonly<Record<string, ModuleRef>>;
  readonly handlers: Readonly<Record<string, ModuleRef>>;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Most items in flight on one thread. */
  readonly batchSize: number;
  /** How long a canceled item may keep running before its thread is terminated. */
  readonly cancelGraceMs: number;
  /** A thread above `minThreads` idle this long is stopped. */
  readonly idleTimeoutMs: number;
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

interface Pending {
  readonly item: WorkItem;
  readonly resolve: (outcome: Outcome) => void;
}

interface Channel {
  readonly index: number;
  readonly port: MessagePort;
  readonly abort: AbortController;
  readonly inflight: Map<number, Pending>;
  changes: ChangeSet[];
  ready: boolean;
  /** It said ready once. */
  booted: boolean;
  dead: boolean;
  stopping: boolean;
  idleTimer: TimerHandle | undefined;
  /** Why main terminated it, when it did. */
  terminatedFor: TickpoolError | undefined;
  /** Its log channel: records written on the thread go out through the user's logger. */
  readonly log: ThreadLog;
}

export interface ThreadPoolStats {
  readonly threads: number;
  readonly inflight: number;
  readonly queued: number;
  readonly dispatched: number;
  readonly settled: number;
  readonly threadExits: number;
  readonly perThread: ReadonlyArray<{ readonly index: number; readonly inflight: number; readonly appliedIndex: number }>;
}

export class ThreadPool {
  readonly #options: ThreadPoolOptions;
  readonly #piscina: Piscina;
  readonly #board: ThreadBoard;
  readonly #channels: (Channel | undefined)[] = [];
  #queue: Pending[] = [];
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

  constructor(options: ThreadPoolOptions) {
    this.#options = options;
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
    return this.#channels.filter((c) => c !== undefined && !c.dead).length;
  }

  /** Sends an item to a thread; the promise settles exactly once, never rejects. */
  dispatch(request: ItemRequest): Promise<Outcome> {
    return new Promise<Outcome>((resolve) => {
      request.seq = ++this.#seq;
      const pending: Pending = { item: request, resolve };
      this.#dispatched++;
      if (this.#stopping) {
        this.#settle(pending, { status: 'lost', error: new ThreadExitedError('Expected a running pool, but it is stopping') });
        return;
      }
      if (!this.#coalescing && this.#queueHead === this.#queue.length) {
        const idle = this.#idleChannel();
        if (idle !== undefined) {
          this.#send(idle, [pending]);
          return;
        }
      }
      this.#queue.push(pending);
      this.#scheduleFlush();
    });
  }

  /**
   * Asks the item in `slot` to stop (the thread reads the word), and terminates its thread if the item is still
   * running there after the grace period. The item's dispatch then settles as `canceled` or `lost`.
   */
  cancel(slot: number, generation: number): boolean {
    const { slots, clock, cancelGraceMs } = this.#options;
    if (!slots.cancel(slot, generation)) {
      // The slot's owner may have set the word itself (the task scheduler cancels its runs' slots directly, then
      // asks the executor): the grace period still has to run, or an item that ignores cancel is never stopped.
      const alreadyCanceled = slots.state(slot) === SlotState.CANCEL && slots.generation(slot) === generation;
      if (!alreadyCanceled || this.#graceArmed.get(slot) === generation) return false;
    }
    this.#graceArmed.set(slot, generation);
    clock.setTimer(() => {
      if (this.#graceArmed.get(slot) === generation) this.#graceArmed.delete(slot);
      if (slots.generation(slot) !== generation || slots.state(slot) !== SlotState.CANCEL) return;
      const owner = slots.owner(slot);
      if (owner === 0) return; // never started: the thread will skip it
      const channel = this.#channels[owner - 1];
      if (channel === undefined || channel.dead) return;
      this.#options.logger.warn({ thread: channel.index, slot }, 'canceled work ignored cancel past the grace period; terminating its thread');
      channel.terminatedFor = new ThreadExitedError(`Thread ${channel.index} was terminated: an item ignored cancel for ${cancelGraceMs} ms`);
      channel.abort.abort();
    }, cancelGraceMs, { unref: true });
    return true;
  }

  /** Milliseconds every thread has spent running items, since the pool started (read from shared memory). */
  busyMs(): number {
    let sum = 0;
    for (let i = 0; i < this.#options.maxThreads; i++) sum += this.#board.busyMs(i);
    return sum;
  }

  /** Replica index each thread has applied (read from shared memory). */
  appliedIndex(threadIndex: number): number {
    return this.#board.appliedIndex(threadIndex);
  }

  stats(): ThreadPoolStats {
    const perThread = this.#channels
      .filter((c): c is Channel => c !== undefined && !c.dead)
      .map((c) => ({ index: c.index, inflight: c.inflight.size, appliedIndex: this.appliedIndex(c.index) }));
    return {
      threads: perThread.length,
      inflight: perThread.reduce((n, t) => n + t.inflight, 0),
      queued: this.#queue.length - this.#queueHead,
      dispatched: this.#dispatched,
      settled: this.#settled,
      threadExits: this.#threadExits,
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
    for (const channel of this.#channels) {
      if (channel === undefined || channel.dead) continue;
      channel.terminatedFor ??= new ThreadExitedError('Expected a running pool, but it was stopped');
      channel.abort.abort();
    }
  }

  async #stop(force: boolean): Promise<void> {
    this.#stopping = true;
    // A start() still waiting for its threads ends now (the engine sees the stop); it is only woken by events.
    this.#notifyReady();
    this.#unsubscribe();
    const lost = (): ThreadExitedError => new ThreadExitedError('Expected a running pool, but it was stopped');
    for (let i = this.#queueHead; i < this.#queue.length; i++) this.#settle(this.#queue[i]!, { status: 'lost', error: lost() });
    this.#queue = [];
    this.#queueHead = 0;
    if (force) this.#terminateAll();
    else for (const channel of this.#channels) if (channel !== undefined && !channel.dead) this.#stopChannel(channel);
    await Promise.allSettled([...this.#loops]);
    this.#destroyed = true;
    await this.#piscina.destroy();
    this.#logs.close();
  }

  #spawn(index: number): void {
    const { port1, port2 } = new MessageChannel();
    const channel: Channel = {
      index,
      port: port1,
      abort: new AbortController(),
      inflight: new Map(),
      changes: [],
      ready: false,
      booted: false,
      dead: false,
      stopping: false,
      idleTimer: undefined,
      terminatedFor: undefined,
      log: this.#logs.open(index),
    };
    this.#channels[index] = channel;
    const init: ThreadInit = {
      threadIndex: index,
      slotBuffer: this.#options.slots.buffer,
      boardBuffer: this.#board.buffer,
      schedulers: this.#options.schedulers,
      handlers: this.#options.handlers,
      full: this.#options.state.full(),
      log: channel.log.init,
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
    if (isResultMessage(message)) {
      this.#onResults(channel, message);
      return;
    }
    switch (message.type) {
      case 'ready':
        if (message.loadErrors !== undefined) this.#onLoadErrors(channel, message.loadErrors);
        channel.ready = true;
        channel.booted = true;
        this.#options.respawnBackoff.reset();
        this.#notifyReady();
        this.#flush();
        // A thread that grew the pool for a backlog may find it gone by the time it is ready: it must still be
        // able to go idle, or it would stay above `minThreads` for good.
        if (channel.inflight.size === 0) this.#armIdle(channel);
        return;
      case 'resync': {
        const full = this.#options.state.full();
        channel.changes = [];
        channel.port.postMessage({ type: 'reset', full } satisfies MainToThread);
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
    let count = 0;
    forEachResult(message, (seq, status, extra, number) => {
      count++;
      const pending = channel.inflight.get(seq);
      if (pending === undefined) return;
      channel.inflight.delete(seq);
      this.#settle(pending, toOutcome(status, extra, number));
    });
    if (channel.inflight.size === 0) this.#armIdle(channel);
    if (this.#queueHead < this.#queue.length) this.#flush();
    if (count > 1) {
      this.#coalescing = true;
      this.#scheduleFlush();
    }
  }

  #onLoopEnd(channel: Channel, error: unknown): void {
    channel.dead = true;
    channel.ready = false;
    if (channel.idleTimer !== undefined) this.#options.clock.clearTimer(channel.idleTimer);
    channel.port.close();
    channel.log.close();
    if (this.#channels[channel.index] === channel) this.#channels[channel.index] = undefined;
    const held = [...channel.inflight.values()];
    channel.inflight.clear();
    if (error !== undefined || held.length > 0) {
      this.#threadExits++;
      const reason = channel.terminatedFor ?? this.#describeExit(channel, error);
      if (held.length > 0) this.#options.logger.warn({ thread: channel.index, items: held.length, err: reason }, 'pool thread ended holding work');
      // Only an item the thread started can have ended it, or be half done. One still `CLAIMED` at its generation
      // never ran (the thread starts an item with a CAS from that word): it goes back to the front of the queue.
      const { slots } = this.#options;
      const requeue: Pending[] = [];
      for (const pending of held) {
        const { slot, generation } = pending.item;
        if (!this.#stopping && slots.state(slot) === SlotState.CLAIMED && slots.generation(slot) === generation) requeue.push(pending);
        else this.#settle(pending, { status: 'lost', error: reason });
      }
      if (requeue.length > 0) {
        this.#queue.splice(this.#queueHead, 0, ...requeue);
        this.#scheduleFlush();
      }
      this.#options.onThreadExit?.({ threadIndex: channel.index, reason, heldItems: held.length, requeuedItems: requeue.length });
    }
    if (this.#starting && !channel.booted && error !== undefined) {
      this.#bootFailure ??= channel.terminatedFor ?? this.#describeExit(channel, error);
      this.#notifyReady();
      return;
    }
    if (!this.#stopping && !channel.stopping) this.#respawn(channel);
    else if (!this.#stopping && this.#queueHead < this.#queue.length) this.#flush();
  }

  /**
   * Replaces a thread that ended. One that had served work is replaced at once (its death was the work's doing,
   * and the delivery limit bounds that); one that died before it was ever ready is replaced after the next
   * respawn backoff delay, which grows while boots keep failing and resets once a thread is ready.
   */
  #respawn(channel: Channel): void {
    const index = channel.index;
    if (channel.booted) {
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

  #settle(pending: Pending, outcome: Outcome): void {
    this.#settled++;
    pending.resolve(outcome);
  }

  #idleChannel(): Channel | undefined {
    for (const channel of this.#channels) {
      if (channel !== undefined && channel.ready && !channel.stopping && channel.inflight.size === 0) return channel;
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

  #flush(): void {
    const { batchSize } = this.#options;
    const open = this.#channels.filter((c): c is Channel => c !== undefined && c.ready && !c.stopping);
    const waiting = this.#queue.length - this.#queueHead;
    if (waiting > 0 && open.length > 0) {
      // Water-fill: each item goes to the thread with the fewest items in flight, counting what this flush already
      // gave it; then ONE message per thread. (Splitting the queue into shares recomputed after each send sent the
      // least-loaded thread halves of halves: 20, 10, 5, … items, a message each.)
      const load = open.map((c) => c.inflight.size);
      const give = open.map(() => 0);
      for (let n = 0; n < waiting; n++) {
        let best = -1;
        for (let i = 0; i < open.length; i++) if (load[i]! < batchSize && (best < 0 || load[i]! < load[best]!)) best = i;
        if (best < 0) break;
        load[best]!++;
        give[best]!++;
      }
      let at = this.#queueHead;
      for (let i = 0; i < open.length; i++) {
        if (give[i] === 0) continue;
        this.#send(open[i]!, this.#queue.slice(at, at + give[i]!));
        at += give[i]!;
      }
      this.#queueHead = at;
    }
    if (this.#queueHead === this.#queue.length) {
      this.#queue = [];
      this.#queueHead = 0;
    } else if (this.#queueHead > 4096) {
      this.#queue = this.#queue.slice(this.#queueHead);
      this.#queueHead = 0;
    }
    // Threads that got no items still need the commits, so a later waitForIndex on them does not stall.
    for (const c of open) if (c.changes.length > 0) this.#send(c, []);
    if (this.#queueHead < this.#queue.length) this.#maybeGrow();
  }

  #send(channel: Channel, batch: readonly Pending[]): void {
    if (channel.idleTimer !== undefined) {
      this.#options.clock.clearTimer(channel.idleTimer);
      channel.idleTimer = undefined;
    }
    // One pass registers each item in flight and collects what is sent.
    const items = new Array<WorkItem>(batch.length);
    for (let i = 0; i < batch.length; i++) {
      const p = batch[i]!;
      channel.inflight.set(p.item.seq, p);
      items[i] = p.item;
    }
    const changes = channel.changes;
    channel.changes = [];
    try {
      channel.port.postMessage(encodeWork(changes, items));
    } catch {
      // Something in the batch cannot be cloned; send the commits alone, then each item alone, failing only the
      // items that cannot cross.
      if (changes.length > 0) channel.port.postMessage(encodeWork(changes, []));
      for (const p of batch) {
        try {
          channel.port.postMessage(encodeWork([], [p.item]));
        } catch (cloneError) {
          channel.inflight.delete(p.item.seq);
          this.#settle(p, { status: 'error', error: uncloneableItemError(p.item, cloneError), retryable: false });
        }
      }
      if (channel.inflight.size === 0) this.#armIdle(channel);
    }
  }

  #maybeGrow(): void {
    const live = this.#channels.filter((c) => c !== undefined && !c.dead).length;
    if (live >= this.#options.maxThreads) return;
    for (let i = 0; i < this.#options.maxThreads; i++) {
      if (this.#channels[i] === undefined && !this.#respawning.has(i)) {
        this.#spawn(i);
        return;
      }
    }
  }

  /** Threads that serve work now or will once ready: neither dead nor asked to stop. */
  #serving(): number {
    let count = 0;
    for (const c of this.#channels) if (c !== undefined && !c.dead && !c.stopping) count++;
    return count;
  }

  /**
   * Stops `channel` after `idleTimeoutMs` without work, if the pool is still above `minThreads` then. The count is
   * taken again when the timer fires: threads that went idle together all armed their timers while the pool was
   * above the minimum, and each one that fires first brings it closer to it.
   */
  #armIdle(channel: Channel): void {
    if (channel.idleTimer !== undefined || channel.dead || channel.stopping) return;
    if (this.#serving() <= this.#options.minThreads) return;
    channel.idleTimer = this.#options.clock.setTimer(() => {
      channel.idleTimer = undefined;
      if (channel.dead || channel.stopping || channel.inflight.size > 0) return;
      if (this.#serving() <= this.#options.minThreads) return;
      this.#stopChannel(channel);
    }, this.#options.idleTimeoutMs, { unref: true });
  }

  #stopChannel(channel: Channel): void {
    channel.stopping = true;
    channel.port.postMessage({ type: 'stop' } satisfies MainToThread);
  }

  #onCommit(change: ChangeSet): void {
    this.#board.publishCommittedIndex(change.index);
    let any = false;
    for (const channel of this.#channels) {
      if (channel === undefined || channel.dead) continue;
      channel.changes.push(change);
      any = true;
    }
    if (any) this.#scheduleFlush();
  }

  #whenReady(count: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const check = (): boolean => {
        if (this.#channels.filter((c) => c?.ready === true).length >= count || this.#stopping || this.#bootFailure !== undefined) {
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

/**
 * The error of an item that cannot be sent to a thread: what cannot be cloned is the caller's, an evaluation's field
 * or a task's payload (the pool's own fields are numbers and strings), so it is reported as that input being invalid.
 */
function uncloneableItemError(item: WorkItem, cause: unknown): TickpoolError {
  const expected = 'a structured-cloneable value (no functions, symbols, or objects holding them), to be sent to a pool thread';
  const error =
    item.kind === 'eval'
      ? new InvalidEvaluationError(`evaluation ${JSON.stringify(item.evaluation.id)}`, expected, item.evaluation)
      : new InvalidTaskError(`payload of task ${JSON.stringify(item.run.taskId)}`, expected, item.payload);
  // The argument errors take no options; keep the clone error as `cause` as every other wrapped failure does.
  Object.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true });
  return error;
}

/** The common outcome (a scheduler that returned nothing without waiting), shared instead of allocated per item. */
const OK_EMPTY: Outcome = Object.freeze({ status: 'ok', value: undefined, waitedMs: 0 });

function toOutcome(status: ItemOutcome['status'], extra: unknown, number: number): Outcome {
  switch (status) {
    case 'ok':
      return extra === undefined && number === 0 ? OK_EMPTY : { status: 'ok', value: extra, waitedMs: number };
    case 'canceled':
      return { status: 'canceled' };
    case 'error':
      return { status: 'error', error: fromWire(extra as WireError), retryable: number === 1 };
  }
}
