/**
 * The end of a delivery this process holds (ack, nack, give-back, fail, remove), tried until it lands. From its
 * first try on, the lease is never extended (`Held.ending`): nobody works on it. When the database did not answer,
 * the end is tried again in the background (the caller has its rejection at once, and has let the delivery go)
 * until it lands, is refused (it ended otherwise: an earlier try landed, or the lease ran out and was reaped), or
 * the lease's own end comes, after which the reaper ends it. Any other failure ends it here at once, and the lease
 * runs out. So after an outage every delivery ends within a nack timeout of the database's return, and none is kept
 * alive by nobody.
 */
import { BackendUnavailableError } from '../../errors.js';
import type { Held } from './leases.js';
import type { BrokerParts } from './parts.js';

/**
 * Retry delays of an end (ack, nack, fail, remove) that the database did not answer: from the first to the last,
 * doubling. The last is the most an end waits after the database's return; each try is bounded by the lease's end.
 */
const END_RETRY_FIRST_MS = 50;
const END_RETRY_LAST_MS = 500;

type EndingParts = Pick<BrokerParts, 'clock' | 'leases' | 'unheard' | 'switches' | 'work'>;

export class Endings {
  readonly #parts: EndingParts;

  constructor(parts: EndingParts) {
    this.#parts = parts;
  }

  /** The end of `held` (when this process holds it): `first` is its first try, `again` makes another. */
  ending(held: Held | undefined, first: Promise<void>, again: () => Promise<void>): Promise<void> {
    if (held === undefined || held.ended) return first;
    held.ending = true;
    return first.catch((error: unknown) => {
      this.#endFailed(held, again, error, 1);
      throw error;
    });
  }

  #endFailed(held: Held, again: () => Promise<void>, error: unknown, attempt: number): void {
    const { clock, leases, unheard, switches, work } = this.#parts;
    if (held.ended) return;
    const left = held.leaseEnd - clock.now();
    if (!(error instanceof BackendUnavailableError) || switches.closed || left <= 0) {
      // Refused (it ended otherwise), or given up on: either way no look may take it again (`UnheardLeases`).
      unheard.abandoned(held.token);
      leases.delete(held);
      return;
    }
    const delay = Math.min(END_RETRY_LAST_MS, END_RETRY_FIRST_MS * 2 ** (attempt - 1), left);
    clock.setTimer(() => {
      if (held.ended || switches.closed) return;
      work.track(
        again().then(
          () => {
            if (!held.ended) leases.delete(held);
          },
          (retryError: unknown) => this.#endFailed(held, again, retryError, attempt + 1),
        ),
      );
    }, delay, { unref: true });
  }
}
