/**
 * `waitForIndex` on a pool thread: resolves once the replica has applied `index`, or fails with `SyncLimitError`
 * after the limit (the seed's `raftSyncLimit`). Waiters are woken by `applied()`, which the thread calls after
 * each change set; they need the thread's event loop, which the long-lived thread loop keeps running (an idle
 * Piscina thread in `atomics: 'sync'` mode would not run one).
 */
import { systemClock, type TimerHandle } from '../clock.js';
import { SyncLimitError } from '../errors.js';

interface Waiter {
  readonly index: number;
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
  timer: TimerHandle | undefined;
}

export class IndexWaiter {
  readonly #current: () => number;
  #waiters: Waiter[] = [];

  constructor(current: () => number) {
    this.#current = current;
  }

  wait(index: number, limitMs: number): Promise<void> {
    if (this.#current() >= index) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { index, resolve, reject, timer: undefined };
      waiter.timer = systemClock.setTimer(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(new SyncLimitError(index, this.#current(), limitMs));
      }, limitMs);
      this.#waiters.push(waiter);
    });
  }

  applied(): void {
    if (this.#waiters.length === 0) return;
    const now = this.#current();
    const keep: Waiter[] = [];
    for (const waiter of this.#waiters) {
      if (waiter.index <= now) {
        if (waiter.timer !== undefined) systemClock.clearTimer(waiter.timer);
        waiter.resolve();
      } else keep.push(waiter);
    }
    this.#waiters = keep;
  }
}
