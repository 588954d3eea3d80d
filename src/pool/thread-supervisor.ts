/**
 * The pool's threads as a set: Piscina runs one long-lived loop task per thread, and this keeps the set at the size
 * the work needs. It spawns `minThreads` at start and one more when work waits that no thread will take (up to
 * `maxThreads`), stops a thread found idle for `idleTimeoutMs` (down to `minThreads`), replaces a thread that ended
 * unexpectedly (at once when it had served work; after the respawn backoff when it died before it was ever ready),
 * and takes them all down at stop. The items on a thread are the pool's: it is told of each message and of each end.
 *
 * Invariants: at most one channel per thread index; a channel leaves `channels` only when its loop has ended; after
 * `beginStop()` no thread is spawned; once the Piscina pool is destroyed, a thread it creates is taken down too.
 */
import { MessageChannel } from 'node:worker_threads';
import { Piscina } from 'piscina';
import type { TimerHandle } from '../clock.js';
import { ModuleLoadError, ResourceLimitError, ThreadExitedError, fromWire, toWire, type TickpoolError } from '../errors.js';
import type { ThreadLog } from '../observability/thread-log-sink.js';
import { ThreadLogSink } from '../observability/thread-log-sink.js';
import type { ModuleLoadFailure, ThreadInit, ThreadToMain } from '../protocol/messages.js';
import { createResultRing } from '../protocol/result-ring.js';
import type { ThreadBoard } from '../protocol/thread-board.js';
import type { WorkQueueWriter } from '../protocol/work-queue.js';
import type { PendingItem } from './pending-item.js';
import type { ThreadPoolOptions } from './pool-types.js';
import { ChannelState, ThreadChannel, type ChannelStateValue } from './thread-channel.js';

export type Channel = ThreadChannel<PendingItem>;

/** What the pool does for the supervisor: the threads' start messages, and the items' side of messages and ends. */
export interface SupervisedWork {
  /** The start message of thread `index`, with its result ring and log channel. */
  initFor(index: number, results: SharedArrayBuffer, log: ThreadLog['init']): ThreadInit;
  /** Every message of a thread but its `ready`. */
  onMessage(channel: Channel, message: Exclude<ThreadToMain, { type: 'ready' }>): void;
  /** A thread said ready: work that waited for one can go. */
  onReady(): void;
  /** Before a thread's end is handled: what it reported is read first. */
  beforeEnd(): void;
  /** A thread's loop ended (`was` is its state before): the items it held are the pool's to settle or run again. */
  onEnd(channel: Channel, reason: TickpoolError, error: unknown, was: ChannelStateValue): void;
  /** Whether items wait that no thread has started (a thread more would take them). */
  hasUnstarted(): boolean;
}

export class ThreadSupervisor {
  readonly #options: ThreadPoolOptions;
  readonly #work: SupervisedWork;
  readonly #board: ThreadBoard;
  readonly #queue: WorkQueueWriter;
  readonly #piscina: Piscina;
  readonly #logs: ThreadLogSink;
  readonly #channels: (Channel | undefined)[] = [];
  readonly #loops = new Set<Promise<void>>();
  #readyWaiters: Array<() => void> = [];
  #starting = false;
  #stopping = false;
  /** Set once the Piscina pool is being destroyed: no thread may outlive it. */
  #destroyed = false;
  /** Why a thread died before it was ever ready while `start()` waited. */
  #bootFailure: TickpoolError | undefined;
  /** Thread indexes waiting out the respawn backoff after a boot failure. */
  readonly #respawning = new Set<number>();
  #idleTimer: TimerHandle | undefined;

  constructor(options: ThreadPoolOptions, work: SupervisedWork, board: ThreadBoard, queue: WorkQueueWriter) {
    this.#options = options;
    this.#work = work;
    this.#board = board;
    this.#queue = queue;
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
  }

  /** Each thread index's channel, undefined where no thread runs. */
  get channels(): readonly (Channel | undefined)[] {
    return this.#channels;
  }

  /** Threads alive (booting, serving or stopping). */
  get live(): number {
    return this.#channels.filter((c) => c !== undefined && !c.ended).length;
  }

  /** Threads that said ready and take items. */
  ready(): number {
    let count = 0;
    for (const c of this.#channels) if (c !== undefined && c.isReady) count++;
    return count;
  }

  /** Starts `minThreads` loops and resolves once they are ready; rejects when one died before it was. */
  async start(): Promise<void> {
    this.#starting = true;
    for (let i = 0; i < this.#options.minThreads; i++) this.#spawn(i);
    await this.#whenReady(this.#options.minThreads);
    this.#starting = false;
    // A thread that died before it was ever ready (a heap too small for its code, a module that exits the thread
    // at import) would die the same way again: fail the start rather than wait for a thread that never comes.
    if (this.#bootFailure !== undefined) throw this.#bootFailure;
  }

  /** A thread more, when work waits and no thread is parked, up to `maxThreads`. */
  maybeGrow(): void {
    if (this.#stopping || !this.#work.hasUnstarted()) return;
    if (this.live >= this.#options.maxThreads) return;
    for (let i = 0; i < this.#options.maxThreads; i++) {
      if (this.#channels[i] === undefined && !this.#respawning.has(i)) {
        this.#spawn(i);
        return;
      }
    }
  }

  /** The pool stops: nothing is spawned any more, and a `start()` still waiting ends now. */
  beginStop(): void {
    this.#stopping = true;
    // It is only woken by events: the stop is one.
    this.#notifyReady();
    if (this.#idleTimer !== undefined) this.#options.clock.clearTimer(this.#idleTimer);
    this.#idleTimer = undefined;
  }

  /** Terminates every thread now; what they ran is lost with them. */
  terminateAll(): void {
    for (const channel of this.#channels) channel?.terminateByStop(new ThreadExitedError('Expected a running pool, but it was stopped'));
  }

  /** Ends every thread (after the item it runs, or at once when `force`) and resolves once Piscina is gone. */
  async endAll(force: boolean): Promise<void> {
    if (force) this.terminateAll();
    else for (const channel of this.#channels) channel?.stop();
    this.#queue.wakeAll();
    await Promise.allSettled([...this.#loops]);
    this.#destroyed = true;
    await this.#piscina.destroy();
    this.#logs.close();
  }

  #spawn(index: number): void {
    const { port1, port2 } = new MessageChannel();
    const log = this.#logs.open(index);
    const results = createResultRing();
    const channel: Channel = new ThreadChannel({ index, port: port1, log, board: this.#board, results });
    this.#channels[index] = channel;
    const init = this.#work.initFor(index, results, log.init);
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
    if (typeof message === 'number' || message.type !== 'ready') {
      this.#work.onMessage(channel, message);
      return;
    }
    if (message.loadErrors !== undefined) this.#onLoadErrors(channel, message.loadErrors);
    channel.markReady();
    this.#options.respawnBackoff.reset();
    this.#notifyReady();
    this.#work.onReady();
    this.#armIdleCheck();
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
    this.#work.beforeEnd();
    const was = channel.end();
    if (this.#channels[channel.index] === channel) this.#channels[channel.index] = undefined;
    const reason = channel.terminatedFor ?? this.#describeExit(channel, error);
    this.#work.onEnd(channel, reason, error, was);
    // It never said ready (a thread asked to stop or terminated before it did only exists while the pool stops).
    const booted = was !== ChannelState.BOOTING;
    if (this.#starting && !booted && error !== undefined) {
      this.#bootFailure ??= reason;
      this.#notifyReady();
      return;
    }
    if (!this.#stopping && was !== ChannelState.STOPPING) this.#respawn(channel.index, booted);
    else this.maybeGrow();
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

  #whenReady(count: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const check = (): boolean => {
        if (this.ready() >= count || this.#stopping || this.#bootFailure !== undefined) {
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
