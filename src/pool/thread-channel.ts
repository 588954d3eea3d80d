/**
 * Main's end of one pool thread: its port, its lifecycle, its result ring, and the items main pinned to it. The work
 * itself goes through the shared work queue, not through here; every message goes through `post`, which also bumps
 * the thread's `POSTED` word on the board, so that a thread busy with items sees it between two of them.
 *
 * Lifecycle, one state field changed only by the guarded `#setState`:
 * - `booting`: spawned, its loop has not said ready; it takes no items yet.
 * - `ready`: serving.
 * - `stopping`: asked to end (idle, or the pool stops): it ends after the item it runs.
 * - `terminating`: the pool's forced stop is taking it down; its end is the stop's doing, not a thread exit.
 * - `ended`: its loop is over (it finished, crashed, or was terminated); its port and log channel are closed.
 * A thread terminated for an item that ignored its cancel stays in its state until its loop ends: the reason is kept
 * in `terminatedFor` for the item it ran.
 */
import type { MessagePort } from 'node:worker_threads';
import { InvalidStateError, type TickpoolError } from '../errors.js';
import type { ThreadLog } from '../observability/thread-log-sink.js';
import type { MainToThread } from '../protocol/messages.js';
import { ResultRingReader } from '../protocol/result-ring.js';
import type { ThreadBoard } from '../protocol/thread-board.js';

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

export interface ThreadChannelOptions {
  readonly index: number;
  readonly port: MessagePort;
  /** The thread's log channel: records written on the thread go out through the user's logger. */
  readonly log: ThreadLog;
  readonly board: ThreadBoard;
  /** The thread's result ring (created by the pool, shared with the thread at its start). */
  readonly results: SharedArrayBuffer;
}

export class ThreadChannel<T> {
  readonly index: number;
  /** Aborting it terminates the thread (Piscina aborts the loop task). */
  readonly abort = new AbortController();
  /** What the thread appended and main has not read yet. */
  readonly results: ResultRingReader;
  /** Items sent to this thread by message (their payload could not go as bytes), until they settle. */
  readonly pinned = new Set<T>();
  readonly #port: MessagePort;
  readonly #log: ThreadLog;
  readonly #board: ThreadBoard;
  #state: ChannelStateValue = ChannelState.BOOTING;
  #terminatedFor: TickpoolError | undefined;
  /** The thread's count of items taken when the pool last looked for idle threads, and whether it was parked. */
  idleSeen: { readonly taken: number; readonly parked: boolean } | undefined;

  constructor(options: ThreadChannelOptions) {
    this.index = options.index;
    this.#port = options.port;
    this.#log = options.log;
    this.#board = options.board;
    this.results = new ResultRingReader(options.results);
  }

  get state(): ChannelStateValue {
    return this.#state;
  }

  /** Serving: it takes items. */
  get isReady(): boolean {
    return this.#state === ChannelState.READY;
  }

  get ended(): boolean {
    return this.#state === ChannelState.ENDED;
  }

  /** Why main terminated it, when it did. */
  get terminatedFor(): TickpoolError | undefined {
    return this.#terminatedFor;
  }

  /** Its loop said ready. True when that made it serve (it was booting, not asked to stop meanwhile). */
  markReady(): boolean {
    if (this.#state !== ChannelState.BOOTING) return false;
    this.#setState(ChannelState.READY);
    return true;
  }

  /** Every message to the thread goes through here: a busy thread sees the board move and takes it. */
  post(message: MainToThread): void {
    this.#port.postMessage(message);
    this.#board.ring(this.index);
  }

  /** Asks the thread to end once the item it runs (if any) is over. */
  stop(): void {
    if (this.#state !== ChannelState.BOOTING && this.#state !== ChannelState.READY) return;
    this.#setState(ChannelState.STOPPING);
    this.post({ type: 'stop' } satisfies MainToThread);
  }

  /** Terminates the thread under an item that ignored its cancel: `reason` is what the item it ran is lost to. */
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
    this.abort.abort();
  }

  /** Its loop ended: closes the port and the log channel. Returns the state it ended in. */
  end(): ChannelStateValue {
    const was = this.#state;
    this.#setState(ChannelState.ENDED);
    this.#port.close();
    this.#log.close();
    return was;
  }

  #setState(next: ChannelStateValue): void {
    if (!transitions[this.#state].includes(next)) {
      throw new InvalidStateError(`Expected a thread channel change allowed from ${this.#state}, got ${next}`);
    }
    this.#state = next;
  }
}
