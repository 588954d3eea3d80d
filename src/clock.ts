/**
 * Time, injected. Nothing else in `src/` reads `Date.now()` or calls `setTimeout`: every schedule, backoff,
 * deadline and timeout goes through a `Clock`, so tests drive time with a `ManualClock`.
 *
 * Rule shared by both clocks: a timer fires when `now >= due`.
 */

/** An armed timer. Opaque apart from its due time (epoch ms). */
export interface TimerHandle {
  readonly due: number;
}

export interface TimerOptions {
  readonly unref?: boolean;
}

export interface Clock {
  /** Current time in epoch milliseconds. */
  now(): number;
  /**
   * Calls `callback` once `now() >= now() + delayMs`. A negative delay counts as 0. With `unref`, the timer does
   * not keep the process alive by itself (for housekeeping deadlines of a library, not for what a caller awaits).
   */
  setTimer(callback: () => void, delayMs: number, options?: TimerOptions): TimerHandle;
  /** Disarms a timer; clearing one that has fired or was cleared is a no-op. */
  clearTimer(handle: TimerHandle): void;
}

interface SystemTimer extends TimerHandle {
  readonly timeout: NodeJS.Timeout;
}

/** The real clock: wall time and Node timers. The only place in `src/` that touches them. */
export const systemClock: Clock = Object.freeze({
  now: (): number => Date.now(),
  setTimer(callback: () => void, delayMs: number, options?: TimerOptions): TimerHandle {
    const delay = delayMs > 0 ? delayMs : 0;
    const unref = options?.unref === true;
    // Node caps timers at 2^31-1 ms and fires at once beyond it; a longer wait re-arms itself.
    const maxDelay = 2_147_483_647;
    const due = Date.now() + delay;
    const handle: { due: number; timeout: NodeJS.Timeout } = { due, timeout: undefined as unknown as NodeJS.Timeout };
    const arm = (ms: number): void => {
      handle.timeout = setTimeout(() => {
        const left = due - Date.now();
        if (left > 0) arm(Math.min(left, maxDelay));
        else callback();
      }, Math.min(ms, maxDelay));
      if (unref) handle.timeout.unref();
    };
    arm(delay);
    return handle;
  },
  clearTimer(handle: TimerHandle): void {
    clearTimeout((handle as SystemTimer).timeout);
  },
});

interface ManualTimer extends TimerHandle {
  readonly seq: number;
  readonly callback: () => void;
  cleared: boolean;
}

/**
 * A clock for tests: time moves only through `advance(ms)` and `set(ms)`, which fire every due timer
 * synchronously, in due order (ties in arming order), with `now()` equal to each timer's due time while it runs.
 * A timer armed from a callback for a time inside the window fires in the same call.
 */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  #timers: ManualTimer[] = [];

  constructor(startMs = 0) {
    if (!Number.isFinite(startMs)) throw new TypeError(`Expected a finite start time in ms, got ${String(startMs)}`);
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  setTimer(callback: () => void, delayMs: number): TimerHandle {
    const timer: ManualTimer = {
      due: this.#now + (delayMs > 0 ? delayMs : 0),
      seq: this.#seq++,
      callback,
      cleared: false,
    };
    this.#insert(timer);
    return timer;
  }

  clearTimer(handle: TimerHandle): void {
    const timer = handle as ManualTimer;
    if (timer.cleared) return;
    timer.cleared = true;
    const at = this.#timers.indexOf(timer);
    if (at >= 0) this.#timers.splice(at, 1);
  }

  /** Moves time forward by `ms` (≥ 0), firing due timers on the way. */
  advance(ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) throw new RangeError(`Expected advance(ms) with a finite ms >= 0, got ${String(ms)}`);
    this.#runUntil(this.#now + ms);
  }

  /** Sets the time (also backwards), firing every timer due at or before it. */
  set(ms: number): void {
    if (!Number.isFinite(ms)) throw new RangeError(`Expected set(ms) with a finite ms, got ${String(ms)}`);
    this.#runUntil(ms);
  }

  /** Number of armed timers (handy for asserting that nothing leaks). */
  get pendingTimers(): number {
    return this.#timers.length;
  }

  /** Due time of the earliest armed timer, if any. */
  nextTimerDue(): number | undefined {
    return this.#timers[0]?.due;
  }

  #runUntil(target: number): void {
    for (;;) {
      const next = this.#timers[0];
      if (next === undefined || next.due > target) break;
      this.#timers.shift();
      next.cleared = true;
      this.#now = Math.max(this.#now, next.due);
      next.callback();
    }
    this.#now = target;
  }

  #insert(timer: ManualTimer): void {
    // Sorted insert from the back: timers are mostly armed in due order, so this is O(1) in practice.
    let at = this.#timers.length;
    while (at > 0) {
      const before = this.#timers[at - 1]!;
      if (before.due < timer.due || (before.due === timer.due && before.seq < timer.seq)) break;
      at--;
    }
    this.#timers.splice(at, 0, timer);
  }
}

/**
 * Resolves after `ms` on `clock`, or as soon as `signal` aborts. Resolves `true` when aborted, `false` otherwise;
 * never rejects, so callers branch instead of catching.
 */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(true);
  return new Promise<boolean>((resolve) => {
    const onAbort = (): void => {
      clock.clearTimer(timer);
      resolve(true);
    };
    const timer = clock.setTimer(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(false);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
