/**
 * Main's end of one pool thread: its port, its lifecycle, what it holds, and its idle timer. The pool decides what a
 * thread gets; the channel is how it gets there (every message through `post`, so a thread polling for work sees
 * the board move) and what the pool knows of the thread meanwhile.
 *
 * Lifecycle, one state field changed only by the guarded `#setState`:
 * - `booting`: spawned, its loop has not said ready; it is sent commits, no items.
 * - `ready`: serving. The only state in which the pool gives it items or arms its idle timer.
 * - `stopping`: asked to end (idle, or the pool stops): it finishes what it holds and is given nothing new.
 * - `terminating`: the pool's forced stop is taking it down; its end is the stop's doing, not a thread exit.
 * - `ended`: its loop is over (it finished, crashed, or was terminated); its port and log channel are closed.
 * A thread terminated for an item that ignored its cancel stays in its state until its loop ends: the reason is kept
 * in `terminatedFor` for the items it held.
 *
 * Load: `assigned` items (a subset of `held`, those it is expected to run, not those taken back for another
 * thread) with `loadMs` of predicted work, in the pool's placement (see placement.ts).
 */
import type { MessagePort } from 'node:worker_threads';
import type { Clock, TimerHandle } from '../clock.js';
import { InvalidStateError, type TickpoolError } from '../errors.js';
import type { ThreadLog } from '../observability/thread-log-sink.js';
import type { MainToThread, SequencedItem } from '../protocol/messages.js';
import type { ThreadBoard } from '../protocol/thread-board.js';
import { encodeWork } from '../protocol/wire.js';
import type { ChangeSet } from '../state/types.js';

export const ChannelState = Object.freeze({
  BOOTING: 'booting',
  READY: 'ready',
  STOPPING: 'stopping',
  TERMINATING: 'terminating',
  ENDED: 'ended',
} as const);
export type ChannelStateValue = (typeof ChannelState)[keyof typeof ChannelState];

/** Allowed state changes; anything else is a bug and throws. */
const transitions: Readonly<Record<ChannelStateValue, readonly ChannelStateValue[]>> = Object.freeze({
  booting: ['ready', 'stopping', 'terminating', 'ended'],
  ready: ['stopping', 'terminating', 'ended'],
  stopping: ['terminating', 'ended'],
  terminating: ['ended'],
  ended: [],
});

export interface ThreadChannelOptions<T extends SequencedItem> {
  readonly index: number;
  readonly port: MessagePort;
  /** The thread's log channel: records written on the thread go out through the user's logger. */
  readonly log: ThreadLog;
  /** Rung after every message when threads poll for work while idle; undefined when they do not. */
  readonly board: ThreadBoard | undefined;
  readonly clock: Clock;
  readonly idleTimeoutMs: number;
  /** Called when the idle timer fires: the pool decides whether the thread is still idle and not needed. */
  readonly onIdle: (channel: ThreadChannel<T>) => void;
}

const NO_CHANGES: readonly ChangeSet[] = Object.freeze([]);

export class ThreadChannel<T extends SequencedItem> {
  readonly index: number;
  /** Aborting it terminates the thread (Piscina aborts the loop task). */
  readonly abort = new AbortController();
  /** Every item sent to this thread that it has not reported on, by seq, in send order (the order it runs them). */
  readonly held = new Map<number, T>();
  readonly #port: MessagePort;
  readonly #log: ThreadLog;
  readonly #board: ThreadBoard | undefined;
  readonly #clock: Clock;
  readonly #idleTimeoutMs: number;
  readonly #onIdle: (channel: ThreadChannel<T>) => void;
  readonly #idleFired = (): void => {
    this.#idleTimer = undefined;
    this.#onIdle(this);
  };
  #state: ChannelStateValue = ChannelState.BOOTING;
  #assigned = 0;
  #loadMs = 0;
  /** Commits the thread has not been sent yet: they go in front of its next items. */
  #changes: ChangeSet[] = [];
  #idleTimer: TimerHandle | undefined;
  #terminatedFor: TickpoolError | undefined;

  constructor(options: ThreadChannelOptions<T>) {
    this.index = options.index;
    this.#port = options.port;
    this.#log = options.log;
    this.#board = options.board;
    this.#clock = options.clock;
    this.#idleTimeoutMs = options.idleTimeoutMs;
    this.#onIdle = options.onIdle;
  }

  get state(): ChannelStateValue {
    return this.#state;
  }

  /** Serving: the pool may give it items. */
  get isReady(): boolean {
    return this.#state === ChannelState.READY;
  }

  get ended(): boolean {
    return this.#state === ChannelState.ENDED;
  }

  /** Items assigned to it (the one it runs first among them). */
  get assigned(): number {
    return this.#assigned;
  }

  /** Predicted work of the items assigned to it, ms. */
  get loadMs(): number {
    return this.#loadMs;
  }

  /** Why main terminated it, when it did. */
  get terminatedFor(): TickpoolError | undefined {
    return this.#terminatedFor;
  }

  /** Its idle timer is armed. */
  get idleArmed(): boolean {
    return this.#idleTimer !== undefined;
  }

  get hasChanges(): boolean {
    return this.#changes.length > 0;
  }

  /** Its loop said ready. True when that made it serve (it was booting, not asked to stop meanwhile). */
  markReady(): boolean {
    if (this.#state !== ChannelState.BOOTING) return false;
    this.#setState(ChannelState.READY);
    return true;
  }

  /** Counts an item predicted at `predictedMs` in its load; true when nothing else was assigned (it starts at once). */
  assign(predictedMs: number): boolean {
    this.#loadMs += predictedMs;
    return this.#assigned++ === 0;
  }

  unassign(predictedMs: number): void {
    // Reset when empty, so that the float sum cannot drift over millions of items.
    this.#loadMs = --this.#assigned === 0 ? 0 : this.#loadMs - predictedMs;
  }

  addChange(change: ChangeSet): void {
    this.#changes.push(change);
  }

  /** The thread is sent the whole state instead (it asked for a resync): the commits before it are in there. */
  dropChanges(): void {
    this.#changes = [];
  }

  /** Every message to the thread goes through here: a thread polling for work sees the board move. */
  post(message: MainToThread): void {
    this.#port.postMessage(message);
    if (this.#board !== undefined) this.#board.ring(this.index);
  }

  /**
   * Sends `items` (none: the commits alone) in one message behind the commits the thread has not seen. Something in
   * it may not clone: then the commits go alone and each item alone, and `onUnsendable` is told of each item that
   * cannot cross. False when that happened.
   */
  sendWork(items: readonly T[], onUnsendable: (item: T, error: unknown) => void): boolean {
    // Commits alone are no work: a thread that is only told of them stays idle.
    if (items.length > 0) this.#clearIdle();
    const changes = this.#takeChanges();
    try {
      this.post(encodeWork(changes, items));
      return true;
    } catch {
      if (changes.length > 0) this.post(encodeWork(changes, []));
      for (const item of items) {
        try {
          this.post(encodeWork([], [item]));
        } catch (cloneError) {
          onUnsendable(item, cloneError);
        }
      }
      return false;
    }
  }

  /**
   * Arms the idle timer unless it is armed or the thread is not serving: `onIdle` is called after `idleTimeoutMs`
   * unless items are sent to it first.
   */
  armIdle(): void {
    if (this.#idleTimer !== undefined || this.#state !== ChannelState.READY) return;
    this.#idleTimer = this.#clock.setTimer(this.#idleFired, this.#idleTimeoutMs, { unref: true });
  }

  /** Asks the thread to end once it is done with what it holds. */
  stop(): void {
    if (this.#state !== ChannelState.BOOTING && this.#state !== ChannelState.READY) return;
    this.#setState(ChannelState.STOPPING);
    this.#clearIdle();
    this.post({ type: 'stop' } satisfies MainToThread);
  }

  /** Terminates the thread under an item that ignored its cancel: `reason` is what the items it held are lost to. */
  terminateFor(reason: TickpoolError): void {
    if (this.#state === ChannelState.ENDED) return;
    this.#terminatedFor = reason;
    this.abort.abort();
  }

  /** Terminates the thread because the pool stops without waiting: its end is no thread exit to report. */
  terminateByStop(reason: TickpoolError): void {
    if (this.#state === ChannelState.ENDED) return;
    this.#terminatedFor ??= reason;
    if (this.#state !== ChannelState.TERMINATING) this.#setState(ChannelState.TERMINATING);
    this.#clearIdle();
    this.abort.abort();
  }

  /** Its loop ended: closes the port and the log channel. Returns the state it ended in. */
  end(): ChannelStateValue {
    const was = this.#state;
    this.#setState(ChannelState.ENDED);
    this.#clearIdle();
    this.#port.close();
    this.#log.close();
    return was;
  }

  #takeChanges(): readonly ChangeSet[] {
    if (this.#changes.length === 0) return NO_CHANGES;
    const changes = this.#changes;
    this.#changes = [];
    return changes;
  }

  #clearIdle(): void {
    if (this.#idleTimer === undefined) return;
    this.#clock.clearTimer(this.#idleTimer);
    this.#idleTimer = undefined;
  }

  #setState(next: ChannelStateValue): void {
    if (!transitions[this.#state].includes(next)) {
      throw new InvalidStateError(`Expected a thread channel change allowed from ${this.#state}, got ${next}`);
    }
    this.#state = next;
  }
}
