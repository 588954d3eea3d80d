/**
 * The `ctx` handed to schedulers and task handlers on a pool thread. Cancellation is read from the slot word in
 * shared memory: no message is needed, so CPU-bound code that calls `throwIfCanceled()` in its loop stops within
 * microseconds of main asking. `signal` is for code that awaits: it is aborted when a read sees the cancel, and
 * by a light poll that runs only while someone holds the signal.
 *
 * One context is made per item on the hot path, so it holds only the item's facts and a reference to the
 * thread's shared services; everything else (snapshot, logger, signal) is made on first use.
 */
import { systemClock, type TimerHandle } from '../clock.js';
import { CanceledError } from '../errors.js';
import type { Logger } from 'pino';
import type { WorkItem } from '../protocol/messages.js';
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
  /** Waits until this thread's replica reaches `index` (fails after `limitMs`, or with `CanceledError` on cancel). */
  waitForIndex(index: number, limitMs?: number): Promise<void>;
}

/** What every context on one thread shares. */
export interface ThreadServices {
  readonly slots: SlotTable;
  readonly threadIndex: number;
  snapshot(): Snapshot;
  readonly logger: Logger;
  waitForIndex(index: number, limitMs: number, signal: AbortSignal): Promise<void>;
}

export class ThreadWorkContext implements WorkContext {
  readonly #services: ThreadServices;
  readonly #item: WorkItem;
  #snapshot: Snapshot | undefined;
  #logger: Logger | undefined;
  #controller: AbortController | undefined;
  #poll: TimerHandle | undefined;
  #closed = false;

  constructor(services: ThreadServices, item: WorkItem) {
    this.#services = services;
    this.#item = item;
  }

  get snapshot(): Snapshot {
    this.#snapshot ??= this.#services.snapshot();
    return this.#snapshot;
  }

  get attempt(): number {
    return this.#item.attempt;
  }

  get threadIndex(): number {
    return this.#services.threadIndex;
  }

  get canceled(): boolean {
    const canceled = this.#services.slots.isCanceled(this.#item.slot, this.#item.generation);
    if (canceled) this.#abort();
    return canceled;
  }

  throwIfCanceled(): void {
    if (this.canceled) throw this.#canceledError();
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
    this.#services.slots.heartbeat(this.#item.slot, this.#item.generation);
  }

  get logger(): Logger {
    if (this.#logger === undefined) {
      const item = this.#item;
      this.#logger = this.#services.logger.child(
        item.kind === 'eval' ? { evalId: item.evaluation.id } : { taskId: item.run.taskId, runId: item.run.runId },
      );
    }
    return this.#logger;
  }

  waitForIndex(index: number, limitMs?: number): Promise<void> {
    const item = this.#item;
    // The work's signal ends the wait on cancel. Once the item is over the signal stops polling, so a wait its code
    // left behind runs to its limit as before, rather than rejecting where nobody may be listening.
    return this.#services.waitForIndex(index, limitMs ?? (item.kind === 'eval' ? item.syncLimitMs : 5000), this.signal);
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

  #canceledError(): CanceledError {
    const item = this.#item;
    const what = item.kind === 'eval' ? `Evaluation ${JSON.stringify(item.evaluation.id)}` : `Run ${JSON.stringify(item.run.runId)}`;
    return new CanceledError(`${what} was canceled`);
  }

  #abort(): void {
    if (this.#controller !== undefined && !this.#controller.signal.aborted) this.#controller.abort(this.#canceledError());
  }
}
