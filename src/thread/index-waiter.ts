/**
 * `waitForIndex` on a pool thread: resolves once the replica has applied `index`, or fails with `SyncLimitError`
 * after the limit (Nomad `worker.go` `raftSyncLimit`). Waiters are woken by `applied()`, which the thread calls after
 * each change set; they need the thread's event loop, which the long-lived thread loop keeps running (an idle
 * Piscina thread in `atomics: 'sync'` mode would not run one).
 *
 * A wait can also end by cancel, through the work's `AbortSignal` (`ctx.signal`, which reads the slot's cancel word
 * while someone listens): a cancel then ends the wait within a few milliseconds, well inside any cancel grace,
 * instead of the wait running on until main terminates the thread under it.
 */
import { systemClock, type Clock, type TimerHandle } from '../clock.js';
import { SyncLimitError } from '../errors.js';

interface Waiter {
  readonly index: number;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
  timer: TimerHandle | undefined;
  /** Removes the abort listener, if the wait has a signal. */
  unlisten: (() => void) | undefined;
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

  /** Rejects with the signal's reason once `signal` aborts (a canceled item). */
  wait(index: number, limitMs: number, signal?: AbortSignal): Promise<void> {
    if (this.#current() >= index) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { index, resolve, reject, timer: undefined, unlisten: undefined };
      waiter.timer = this.#clock.setTimer(() => {
        waiter.timer = undefined;
        this.#drop(waiter);
        reject(new SyncLimitError(index, this.#current(), limitMs));
      }, limitMs);
      if (signal !== undefined) {
        const onAbort = (): void => {
          this.#drop(waiter);
          reject(signal.reason as Error);
        };
        signal.addEventListener('abort', onAbort, { once: true });
        waiter.unlisten = () => signal.removeEventListener('abort', onAbort);
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
    waiter.unlisten?.();
    waiter.timer = undefined;
    waiter.unlisten = undefined;
  }
}
