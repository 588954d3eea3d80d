/**
 * The loop that serves the waiting dequeues: a kick starts one round of fetches (one per distinct set of types, for
 * as many dequeues as wait on it, in arrival order), kicks during a round make it go again, and a poll is the
 * backstop while dequeues wait. A fetch goes only when it could find something (`quiet`), when pacing does not hold
 * it back, and for threads free soon. One round runs at a time (`fetching`).
 */
import type { TimerHandle } from '../../clock.js';
import type { Listener } from '../listener.js';
import type { Fetcher } from './fetcher.js';
import { MAX_FETCH } from './fetcher.js';
import type { GiveBacks } from './give-backs.js';
import type { Held } from './leases.js';
import type { FetchPacing } from './pacing.js';
import type { BrokerParts } from './parts.js';
import type { Waiters } from './waiters.js';

export interface ServingParts extends Pick<BrokerParts, 'clock' | 'logger' | 'pacer' | 'switches'> {
  readonly listener: Listener;
  readonly pollMs: number;
  readonly waiters: Waiters;
  readonly pacing: FetchPacing;
  readonly fetcher: Fetcher;
  readonly giveBacks: GiveBacks;
}

export class Serving {
  readonly #parts: ServingParts;
  #fetching = false;
  #fetchAgain = false;
  #pollTimer: TimerHandle | undefined;
  /**
   * Counts what may have made an evaluation ready for this process: ready notifications, reconnects, polls, and its
   * own admissions, nacks, promotions and give-backs (see `lookAgain`).
   */
  #heard = 0;
  /** `#heard` when the last fetch for `#quietKey` began, if it found less than it asked for and stood as waiting. */
  #quietAt: number | undefined;
  #quietKey: string | undefined;
  /** A poll came: the next round of fetches first looks for leases of this process it never heard of. */
  #lookDue = false;

  constructor(parts: ServingParts) {
    this.#parts = parts;
  }

  /** A round of fetches is running. */
  get fetching(): boolean {
    return this.#fetching;
  }

  /** Something may be ready (a notification, an enqueue, a promotion, a poll): fetch for the waiting dequeues. */
  kick(): void {
    const { switches, waiters, pacing } = this.#parts;
    if (!switches.open || switches.closed || pacing.kickDue) return;
    if (this.#fetching) {
      this.#fetchAgain = true;
      return;
    }
    if (waiters.length === 0 || switches.paused || !switches.enabled) return;
    if (waiters.allQuiet((key) => this.#quiet(key))) return;
    if (pacing.worthWaitingForAcks() || pacing.fetchCanWait()) return;
    void this.#serveWaiters();
  }

  /** Something may have become ready for this process: its next fetch goes, whatever the last one found. */
  lookAgain(): void {
    this.#heard++;
    this.kick();
  }

  /** This process stopped standing as waiting: its next fetch goes, whatever the last one found. */
  unquiet(): void {
    this.#quietAt = undefined;
  }

  /**
   * Whether a fetch for `key` would find nothing: the last one found less than it asked for and stood as waiting, and
   * since it began nothing was heard that could have made an evaluation ready here. Every way an evaluation becomes
   * ready notifies (an idle enqueue names or offers to a standing process, everything else goes to everyone), so at
   * idle the dequeue after each finished evaluation costs no fetch. Not while the listener is away:
   * notifications are hints, and the poll (`#armPoll`) stays the backstop either way.
   */
  #quiet(key: string): boolean {
    return this.#quietAt === this.#heard && this.#quietKey === key && this.#parts.listener.connected;
  }

  /**
   * Whether a dequeue waits here that a thread could start now. Threads with work ahead would make the fetch wait
   * (`FetchPacing.fetchCanWait`), threads none of which is free soon would not fetch: a process that can start it
   * now gets it instead.
   */
  canStartNow(): boolean {
    const { waiters, switches, pacer } = this.#parts;
    return waiters.length > 0 && !switches.paused && switches.enabled && !switches.closed && !pacer.threadsBusy() && pacer.threadFreeSoon();
  }

  /** A held delivery goes to a dequeue waiting for its type that a thread can start now, or back, uncharged. */
  #place(held: Held): void {
    const { waiters, giveBacks } = this.#parts;
    const waiter = this.canStartNow() ? waiters.forQueue(held.queue) : undefined;
    if (waiter !== undefined) waiters.serve(waiter, held);
    else giveBacks.held(held);
  }

  async #serveWaiters(): Promise<void> {
    const { switches, waiters, pacing, fetcher, pacer, giveBacks } = this.#parts;
    this.#fetching = true;
    try {
      do {
        this.#fetchAgain = false;
        if (this.#lookDue && fetcher.out === 0) {
          this.#lookDue = false;
          await fetcher.lookForUnheard((held) => this.#place(held));
        }
        // One fetch per distinct set of types, for as many dequeues as wait on it, in arrival order.
        for (const key of waiters.keys()) {
          while (!switches.paused && switches.enabled && !switches.closed) {
            const waiting = waiters.withKey(key);
            if (waiting.length === 0 || this.#quiet(key)) break;
            // Only for threads free soon; meanwhile the dequeue a finished evaluation brings, or the recheck, looks again.
            if (!pacer.threadFreeSoon()) {
              pacing.recheckSoon();
              break;
            }
            const heardAt = this.#heard;
            const asked = Math.min(MAX_FETCH, waiting.length);
            const stands = !pacer.threadsBusy();
            const rows = await fetcher.fetch(waiting[0]!.types, asked, stands);
            if (rows.length < asked && stands) {
              this.#quietAt = heardAt;
              this.#quietKey = key;
            } else {
              this.#quietAt = undefined;
            }
            for (const row of rows) {
              const waiter = waiters.firstWithKey(key);
              if (waiter === undefined || switches.paused || !switches.enabled) {
                // Its dequeue went away while the fetch was out: back, uncharged, not left to its lease.
                giveBacks.held(row);
                continue;
              }
              waiters.serve(waiter, row);
            }
            if (rows.length < waiting.length) break;
          }
        }
      } while (this.#fetchAgain && !switches.closed && !pacing.worthWaitingForAcks() && !pacing.fetchCanWait());
    } catch (error) {
      this.#parts.logger.warn({ err: error }, 'dequeue fetch failed; retrying at the next poll');
    } finally {
      this.#fetching = false;
      this.#armPoll();
    }
  }

  /** Polls while dequeues wait and nothing was found: notifications are hints, this is the backstop. */
  #armPoll(): void {
    const { clock, switches, waiters, pollMs } = this.#parts;
    if (this.#pollTimer !== undefined || switches.closed || waiters.length === 0) return;
    this.#pollTimer = clock.setTimer(() => {
      this.#pollTimer = undefined;
      this.#lookDue = true;
      this.lookAgain();
      this.#armPoll();
    }, pollMs, { unref: true });
  }

  close(): void {
    if (this.#pollTimer !== undefined) this.#parts.clock.clearTimer(this.#pollTimer);
    this.#pollTimer = undefined;
  }
}
