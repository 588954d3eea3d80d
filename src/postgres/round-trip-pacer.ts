/**
 * When a fetch or an ack batch may wait for company. Each is a statement and a commit, and its cost to both sides
 * is mostly per statement, not per row. With short work, dequeues and acks pile up during each round trip and
 * travel dozens at a time on their own. With CPU-bound work they do not: a thread finishes one evaluation per
 * millisecond or so, and each one would cost a lease and an ack statement of its own, PostgreSQL's CPU per
 * evaluation growing several-fold while the cores it shares with the threads are the bottleneck.
 *
 * Waiting costs throughput only when a thread runs out of work meanwhile. So the broker waits only while the
 * threads have more unstarted work ahead of them (the pool's prediction, per thread) than `ROUND_TRIPS` of its
 * recent round trips, and at least `MIN_AHEAD_MS`: then the threads stay busy through the wait and through the
 * round trip after it. Idle, or with short work, nothing is ahead and nothing waits.
 *
 * A fetch also waits while no thread will be free within that same margin (the pool's `threadsFreeWithin`):
 * evaluations leased here wait for these threads while the other processes' threads may idle, and one leased behind
 * an item that runs far past its prediction (a long one among short ones of its type) would wait out that item. The
 * margin is kept narrow for this: a prediction that is wrong lets a fetch through only while the item's predicted
 * end is that near, not for as long as a wider horizon would.
 */
import type { Clock } from '../clock.js';

/**
 * Round trips of work the threads must have ahead of them before a statement waits for company: one for the wait's
 * end to be seen, one for the statement after it. A wider margin only makes short jobs wait less often for
 * company: 0.1 ms jobs ran 4–5% slower with 4 round trips and 5 ms, 1 ms and 10 ms jobs the same.
 */
const ROUND_TRIPS = 2;
/** The least work ahead, ms, that lets a statement wait: below it a round trip's jitter would starve a thread. */
export const MIN_AHEAD_MS = 2;
/** Weight of the newest round trip in the running estimate. */
const SMOOTHING = 0.2;

export class RoundTripPacer {
  readonly #clock: Clock;
  #workAheadMs: (() => number) | undefined = undefined;
  #threadsFree: ((withinMs: number) => number) | undefined = undefined;
  /** Running estimate of a statement's round trip, ms. */
  #roundTripMs = 1;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Where the threads' work ahead is read (the engine's pool); undefined: never wait. */
  set workAheadMs(read: (() => number) | undefined) {
    this.#workAheadMs = read;
  }

  /** Where the threads free soon are counted (the engine's pool); undefined: always some. */
  set threadsFree(read: ((withinMs: number) => number) | undefined) {
    this.#threadsFree = read;
  }

  /**
   * Whether a thread will be free within the margin to start what a fetch leases. Only a reading of none holds a
   * fetch back; one that throws or is not a count lets it go: pacing must never stop fetches for good.
   */
  threadFreeSoon(): boolean {
    const read = this.#threadsFree;
    if (read === undefined) return true;
    try {
      return read(this.#marginMs()) !== 0;
    } catch {
      return true;
    }
  }

  /** The running round-trip estimate, ms. */
  get roundTripMs(): number {
    return this.#roundTripMs;
  }

  /** A clock reading taken just before a statement went out. */
  start(): number {
    return this.#clock.now();
  }

  /** A statement started at `startedAt` (from `start`) answered. */
  answered(startedAt: number): void {
    const ms = this.#clock.now() - startedAt;
    if (ms >= 0 && Number.isFinite(ms)) this.#roundTripMs += (ms - this.#roundTripMs) * SMOOTHING;
  }

  /** Whether the threads have enough work ahead of them to ride out a wait and the round trip after it. */
  threadsBusy(): boolean {
    const read = this.#workAheadMs;
    if (read === undefined) return false;
    let ahead: number;
    try {
      ahead = read();
    } catch {
      return false;
    }
    return ahead > this.#marginMs();
  }

  /** `ROUND_TRIPS` of the recent round trips, and at least `MIN_AHEAD_MS`. */
  #marginMs(): number {
    return Math.max(MIN_AHEAD_MS, ROUND_TRIPS * this.#roundTripMs);
  }
}
