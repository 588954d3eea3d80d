/**
 * When a fetch for the waiting dequeues holds back: for the acks in flight (whose workers come back for more), and
 * while the threads have work ahead. Every hold is bounded by a timer that kicks again, so a waiting dequeue is
 * never left without a fetch to come; `close()` clears them.
 */
import type { TimerHandle } from '../../clock.js';
import type { BrokerParts } from './parts.js';

/**
 * Longest a fetch waits for the acks in flight. An ack batch lands in a few ms even under load; one that takes
 * longer is waiting on something (a row lock a long transaction holds), and the dequeues waiting here must not
 * wait with it.
 */
const MAX_ACK_WAIT_MS = 50;
/** How often a fetch that waits for company looks again without being kicked, ms. */
const PACE_RECHECK_MS = 10;

export interface PacingCounts {
  /** Dequeues waiting here. */
  waiting(): number;
  /** Deliveries held here. */
  held(): number;
}

export class FetchPacing {
  readonly #parts: Pick<BrokerParts, 'clock' | 'pacer'>;
  readonly #counts: PacingCounts;
  readonly #kick: () => void;
  /** Armed while a fetch waits for company (`fetchCanWait`): when it fires, the fetch looks again. */
  #paceTimer: TimerHandle | undefined;
  /** How many acks the statement in flight carries that a fetch may still wait for (0 when none, or past the bound). */
  #acksInFlight = 0;
  /** A kick is due at the next check phase (`acksLanded`): kicks before it are folded into it. */
  #kickSoon = false;
  /** Armed while a fetch waits for the acks in flight; when it fires, fetches stop waiting for them. */
  #ackWait: TimerHandle | undefined;

  constructor(parts: Pick<BrokerParts, 'clock' | 'pacer'>, counts: PacingCounts, kick: () => void) {
    this.#parts = parts;
    this.#counts = counts;
    this.#kick = kick;
  }

  /** A kick is due at the next check phase: one now would be folded into it. */
  get kickDue(): boolean {
    return this.#kickSoon;
  }

  /**
   * While more deliveries are held here than dequeues wait, and the threads have work ahead of them, a fetch waits
   * for more dequeues to come (each finished evaluation brings one and kicks again; `PACE_RECHECK_MS` is the
   * backstop), so CPU-bound work is leased dozens at a time rather than one per evaluation finished.
   */
  fetchCanWait(): boolean {
    if (this.#counts.waiting() >= this.#counts.held() || !this.#parts.pacer.threadsBusy()) return false;
    this.recheckSoon();
    return true;
  }

  /** A fetch that pacing held back is looked at again after `PACE_RECHECK_MS` at the latest. */
  recheckSoon(): void {
    this.#paceTimer ??= this.#parts.clock.setTimer(() => {
      this.#paceTimer = undefined;
      this.#kick();
    }, PACE_RECHECK_MS, { unref: true });
  }

  /**
   * Under load, a fetch started while an ack batch is out takes only the few workers already back, and the ones
   * that batch frees wait for the next fetch: fetches and acks settle into small batches, each a statement and a
   * commit. When the acks in flight would free more workers than wait now, the fetch waits for them to land and
   * then serves both at once (`acksLanded` kicks it). With little in flight, as when idle, it never waits.
   * The wait lasts one ack statement, at most `MAX_ACK_WAIT_MS`, and it cannot go on: acks come only from work that
   * was delivered.
   */
  worthWaitingForAcks(): boolean {
    if (this.#acksInFlight <= this.#counts.waiting()) return false;
    this.#ackWait ??= this.#parts.clock.setTimer(() => {
      this.#ackWait = undefined;
      this.#acksInFlight = 0;
      this.#kick();
    }, MAX_ACK_WAIT_MS, { unref: true });
    return true;
  }

  /** An ack statement carrying `count` acks is on its way. */
  acksSent(count: number): void {
    this.#acksInFlight = count;
  }

  /**
   * An ack statement answered, before its acks are settled. The workers they free ask for their next evaluation
   * in this turn's promise jobs, so one fetch after those (kicks meanwhile are folded into it) serves them all,
   * with whatever waited for these acks to land.
   */
  acksLanded(): void {
    this.#acksInFlight = 0;
    if (this.#ackWait !== undefined) {
      this.#parts.clock.clearTimer(this.#ackWait);
      this.#ackWait = undefined;
    }
    if (this.#kickSoon) return;
    this.#kickSoon = true;
    setImmediate(() => {
      this.#kickSoon = false;
      this.#kick();
    });
  }

  close(): void {
    for (const timer of [this.#ackWait, this.#paceTimer]) if (timer !== undefined) this.#parts.clock.clearTimer(timer);
    this.#ackWait = undefined;
    this.#paceTimer = undefined;
  }
}
