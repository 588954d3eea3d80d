/** A ManualClock that tells the test when a timer is armed: an event to wait for, instead of polling the clock. */
import { ManualClock, type TimerHandle } from '../../src/clock.js';

export class WatchedClock extends ManualClock {
  #watchers: Array<{ delayMs: number | undefined; resolve: () => void }> = [];

  override setTimer(callback: () => void, delayMs: number): TimerHandle {
    const handle = super.setTimer(callback, delayMs);
    const hit = this.#watchers.findIndex((w) => w.delayMs === undefined || w.delayMs === delayMs);
    if (hit >= 0) this.#watchers.splice(hit, 1)[0]!.resolve();
    return handle;
  }

  /** Resolves when the next timer of `delayMs` (of any delay, without it) is armed. */
  nextArmed(delayMs?: number): Promise<void> {
    return new Promise((resolve) => this.#watchers.push({ delayMs, resolve }));
  }
}
