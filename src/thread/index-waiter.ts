/**
 * `waitForIndex` on a pool thread: resolves once the replica has applied `index`, or fails with `SyncLimitError`
 * after the limit (the seed's `raftSyncLimit`). Waiters are woken by `applied()`, which the thread calls after
 * each change set; they need the thread's event loop, which the long-lived thread loop keeps running (an idle
 * Piscina thread in `atomics: 'sync'` mode would not run one).
 *
 * A wait can also end by cancel. Main cancels by writing the slot word in shared memory, with no message and no
 * notify, so a waiter given a `canceled` check reads it every CANCEL_POLL_MS while it waits (the same cadence as an
 * awaited `ctx.signal`); a cancel then ends the wait within a few milliseconds, well inside any cancel grace, instead
 * of the wait running on until main terminates the thread under it.
 */
import { systemClock, type Clock, type TimerHandle } from '../clock.js';
import { SyncLimitError } from '../errors.js';

/** How often a waiter re-reads its cancel check. */
const CANCEL_POLL_MS = 2;

/** Returns the error to fail the wait with once the work was canceled, else `undefined`. */
export type CancelCheck = () => Error | undefined;

interface Waiter {
  readonly index: number;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
  timer: TimerHandle | undefined;
  poll: TimerHandle | undefined;
}

export class IndexWaiter {
  readonly #current: () => number;
  readonly #clock: Clock;
  #waiters: Waiter[] = [];

  constructor(current: () => number, clock: Clock = systemClock) {
    this.#current = current;
    this.#clock = clock;
  }

  /** Waiters not yet woken (for tests). */
  get pending(): number {
    return this.#waiters.length;
  }

  wait(index: number, limitMs: number, canceled?: CancelCheck): Promise<void> {
    if (this.#current() >= index) return Promise.resolve();
    const already = canceled?.();
    if (already !== undefined) return Promise.reject(already);
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { index, resolve, reject, timer: undefined, poll: undefined };
      waiter.timer = this.#clock.setTimer(() => {
        waiter.timer = undefined;
        this.#drop(waiter);
        reject(new SyncLimitError(index, this.#current(), limitMs));
      }, limitMs);
      if (canceled !== undefined) {
        const poll = (): void => {
          const error = canceled();
          if (error === undefined) {
            waiter.poll = this.#clock.setTimer(poll, CANCEL_POLL_MS);
            return;
          }
          waiter.poll = undefined;
          this.#drop(waiter);
          reject(error);
        };
        waiter.poll = this.#clock.setTimer(poll, CANCEL_POLL_MS);
      }
      this.#waiters.push(waiter);
    });
  }

  applied(): void {
    if (this.#waiters.length === 0) return;
    const now = this.#current();
    const keep: Waiter[] = [];
    for (const waiter of this.#waiters) {
      if (waiter.index <= now) {
        this.#disarm(waiter);
        waiter.resolve();
      } else keep.push(waiter);
    }
    this.#waiters = keep;
  }

  /** Removes a waiter that ended by its limit or its cancel. */
  #drop(waiter: Waiter): void {
    this.#disarm(waiter);
    this.#waiters = this.#waiters.filter((w) => w !== waiter);
  }

  #disarm(waiter: Waiter): void {
    if (waiter.timer !== undefined) this.#clock.clearTimer(waiter.timer);
    if (waiter.poll !== undefined) this.#clock.clearTimer(waiter.poll);
    waiter.timer = undefined;
    waiter.poll = undefined;
  }
}
