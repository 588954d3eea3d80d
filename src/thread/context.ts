/**
 * The `ctx` handed to schedulers and task handlers on a pool thread. Cancellation is read from the slot word in
 * shared memory: no message is needed, so CPU-bound code that calls `throwIfCanceled()` in its loop stops within
 * microseconds of main asking. `signal` is for code that awaits: it is aborted when a read sees the cancel, and
 * by a light poll that runs only while someone holds the signal.
 */
import { systemClock, type TimerHandle } from '../clock.js';
import { CanceledError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import type { SlotTable } from '../slots/slot-table.js';
import type { Snapshot } from '../state/types.js';

/** How often an awaited `ctx.signal` re-reads the slot word. */
const SIGNAL_POLL_MS = 2;

export interface WorkContext {
  /** Read-only view of the state at or after the evaluation's index. */
  readonly snapshot: Snapshot;
  /** 1 for the first run of this item, 2 for the first retry or plan refresh, … */
  readonly attempt: number;
  /** True once main asked this work to stop. */
  readonly canceled: boolean;
  /** Throws a `CanceledError` when canceled; call it in long loops. */
  throwIfCanceled(): void;
  /** Aborted when the work is canceled. */
  readonly signal: AbortSignal;
  /** Says "still working": extends the evaluation's nack deadline instead of letting it be redelivered. */
  heartbeat(): void;
  readonly logger: Logger;
  /** Index of the pool thread running this work. */
  readonly threadIndex: number;
  /** Waits until this thread's replica reaches `index` (fails after `limitMs`). */
  waitForIndex(index: number, limitMs?: number): Promise<void>;
}

export interface ContextDeps {
  readonly slots: SlotTable;
  readonly slot: number;
  readonly generation: number;
  readonly attempt: number;
  readonly threadIndex: number;
  readonly snapshot: () => Snapshot;
  readonly logger: () => Logger;
  readonly waitForIndex: (index: number, limitMs: number) => Promise<void>;
  readonly defaultSyncLimitMs: number;
  readonly what: string;
}

export class ThreadWorkContext implements WorkContext {
  readonly #deps: ContextDeps;
  #snapshot: Snapshot | undefined;
  #logger: Logger | undefined;
  #controller: AbortController | undefined;
  #poll: TimerHandle | undefined;
  #closed = false;

  constructor(deps: ContextDeps) {
    this.#deps = deps;
  }

  get snapshot(): Snapshot {
    this.#snapshot ??= this.#deps.snapshot();
    return this.#snapshot;
  }

  get attempt(): number {
    return this.#deps.attempt;
  }

  get threadIndex(): number {
    return this.#deps.threadIndex;
  }

  get canceled(): boolean {
    const canceled = this.#deps.slots.isCanceled(this.#deps.slot, this.#deps.generation);
    if (canceled) this.#abort();
    return canceled;
  }

  throwIfCanceled(): void {
    if (this.canceled) throw new CanceledError(`${this.#deps.what} was canceled`);
  }

  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.canceled) return this.#controller.signal;
      if (!this.#closed) this.#schedulePoll();
    }
    return this.#controller.signal;
  }

  heartbeat(): void {
    this.#deps.slots.heartbeat(this.#deps.slot, this.#deps.generation);
  }

  get logger(): Logger {
    this.#logger ??= this.#deps.logger();
    return this.#logger;
  }

  waitForIndex(index: number, limitMs = this.#deps.defaultSyncLimitMs): Promise<void> {
    return this.#deps.waitForIndex(index, limitMs);
  }

  /** The item is over: stop polling. */
  close(): void {
    this.#closed = true;
    if (this.#poll !== undefined) systemClock.clearTimer(this.#poll);
    this.#poll = undefined;
  }

  #schedulePoll(): void {
    this.#poll = systemClock.setTimer(() => {
      this.#poll = undefined;
      if (this.#closed || this.canceled) return;
      this.#schedulePoll();
    }, SIGNAL_POLL_MS);
  }

  #abort(): void {
    if (this.#controller !== undefined && !this.#controller.signal.aborted) {
      this.#controller.abort(new CanceledError(`${this.#deps.what} was canceled`));
    }
  }
}
