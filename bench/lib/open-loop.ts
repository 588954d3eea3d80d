/**
 * An open-loop sender: job `i` is due at `start + i / rate`, whatever happened to the jobs before it, and `send`
 * gets its due time so that its latency is counted from there. A sender that falls behind (a busy main thread) then
 * shows up as latency instead of quietly lowering the load (no coordinated omission).
 */
import { nowUs } from './latency.js';

/** Sends `count` jobs at `ratePerSec`, calling `send(index, dueUs)`; resolves once `allDone` does. */
export function openLoop(count: number, ratePerSec: number, send: (index: number, dueUs: number) => void, allDone: Promise<void>): Promise<void> {
  const startUs = nowUs() + 2_000;
  const intervalUs = 1e6 / ratePerSec;
  let next = 0;
  const pump = (): void => {
    const now = nowUs();
    while (next < count && startUs + next * intervalUs <= now) {
      send(next, startUs + next * intervalUs);
      next++;
    }
    if (next >= count) return;
    // A timer wakes a millisecond late or more: close to the next due time, the sender checks every event-loop turn
    // instead (which still lets the engine's and Piscina's message events run between checks).
    const waitMs = (startUs + next * intervalUs - nowUs()) / 1000;
    if (waitMs > 2) setTimeout(pump, waitMs - 1.5);
    else setImmediate(pump);
  };
  setImmediate(pump);
  return allDone;
}

/** A promise and the function that resolves it once `count` calls of `done` have been made. */
export function countdown(count: number): { readonly allDone: Promise<void>; readonly done: () => void } {
  let left = count;
  let finish!: () => void;
  const allDone = new Promise<void>((resolve) => (finish = resolve));
  return {
    allDone,
    done: () => {
      if (--left === 0) finish();
    },
  };
}
