/**
 * What the listener's notifications do in this process: `ready` makes it look (or, named while it cannot start the
 * evaluation now, pass the notification on to everyone), an offer hands its delivery to a waiting dequeue (or gives
 * it back), and an outcome tells the outcome watch. Notifications are hints: the poll stays the backstop, and an
 * offer missed while the listener was away goes back at the reconnect.
 */
import type { Evaluation } from '../../broker/evaluation.js';
import type { TimerHandle } from '../../clock.js';
import { decodeValue } from '../codec.js';
import type { Listener } from '../listener.js';
import type { Fetcher } from './fetcher.js';
import type { GiveBacks } from './give-backs.js';
import { Held } from './leases.js';
import type { BrokerParts } from './parts.js';
import type { Serving } from './serving.js';
import type { Waiters } from './waiters.js';

/**
 * How long a process with waiting dequeues leaves an enqueue's notification to the process it names before looking
 * itself, ms: the named one takes it in about a round trip, and if it died meanwhile, this is the delay.
 */
const NAMED_NOTIFY_LEAD_MS = 50;

export interface NotificationParts
  extends Pick<BrokerParts, 'db' | 'names' | 'queries' | 'clock' | 'logger' | 'nodeId' | 'lease' | 'leases' | 'outcomes' | 'unheard' | 'switches' | 'work' | 'lookAgain'> {
  readonly listener: Listener;
  /** The channel offers to this process come on. */
  readonly offerChannel: string;
  readonly waiters: Waiters;
  readonly serving: Serving;
  readonly fetcher: Fetcher;
  readonly giveBacks: GiveBacks;
}

export class Notifications {
  readonly #parts: NotificationParts;
  /** Armed while a notification named another process (`NAMED_NOTIFY_LEAD_MS`): when it fires, this one looks too. */
  #lookTimer: TimerHandle | undefined;
  /** The listener connected once already: a connect after that is a reconnect. */
  #listenedBefore = false;

  constructor(parts: NotificationParts) {
    this.#parts = parts;
  }

  /** Subscribes to the notifications it needs; called before the listener connects. */
  subscribe(): void {
    const { listener, names, nodeId, logger, outcomes } = this.#parts;
    listener.subscribe(names.channels.ready, { onNotify: (payload) => this.#onReady(payload), onConnect: () => this.#parts.lookAgain() });
    // Offers come on a channel of this process's own: no other process wakes for them.
    listener.subscribe(this.#parts.offerChannel, {
      onNotify: (payload) => {
        const offer = offerIn(payload);
        if (offer === undefined || offer.holder !== nodeId) logger.warn({ payload: payload.slice(0, 200) }, 'an offer that is not for this process; ignored');
        else this.#takeOffer(offer);
      },
      onConnect: () => {
        // None can be missed before the first connect: offers need a fetch of this process first.
        if (this.#listenedBefore) this.giveBackMissedOffers();
        this.#listenedBefore = true;
      },
    });
    // Outcomes of evaluations enqueued here come on a channel of this process's own.
    listener.subscribe(names.processChannel('outcome', nodeId), {
      onNotify: (payload) => {
        if (payload === nodeId) outcomes.hint();
        else if (payload.startsWith('{')) {
          const named = outcomesNamed(payload);
          if (named?.origin === nodeId) outcomes.hint(named.ids);
        }
      },
      onConnect: () => outcomes.hint(),
    });
  }

  /** Every delivery leased to this process that it does not hold goes back (offers it never heard). */
  giveBackMissedOffers(): Promise<unknown> {
    return this.#parts.giveBacks.missedOffers(() => this.#parts.fetcher.looking);
  }

  /**
   * A `ready` notification: empty for everyone, or naming the one process an idle enqueue chose among those waiting
   * for its type (`waiting_dequeues`). The named process looks at once, or passes it on to everyone when it no longer
   * waits or its threads have work ahead; any other process with waiting dequeues looks after
   * `NAMED_NOTIFY_LEAD_MS`, in case the named one died.
   */
  #onReady(payload: string): void {
    const { lookAgain } = this.#parts;
    if (payload === '') {
      lookAgain();
    } else if (payload === this.#parts.nodeId) {
      if (this.#parts.serving.canStartNow()) lookAgain();
      else this.#passOn();
    } else if (this.#parts.waiters.length > 0 && this.#lookTimer === undefined && !this.#parts.switches.closed) {
      this.#lookTimer = this.#parts.clock.setTimer(() => {
        this.#lookTimer = undefined;
        lookAgain();
      }, NAMED_NOTIFY_LEAD_MS, { unref: true });
    }
  }

  /**
   * The delivery an offer carries goes to a dequeue waiting for its type, as a fetched one would. Its lease began in
   * the enqueue's transaction, a notification's transit before it is heard: its end here counts from the hearing,
   * which the extension's margin (at least 20 ms before that end) covers. A process that cannot start it now gives
   * it back uncharged and passes the notification on.
   */
  #takeOffer(offer: Offer): void {
    const { leases, unheard, serving, waiters, logger, clock, lease } = this.#parts;
    // Taken already by a poll's look (its notification came late), or a second copy: nothing to do.
    if (leases.byToken(offer.token) !== undefined || !unheard.heard(offer.token)) return;
    const waiter = serving.canStartNow() ? waiters.forQueue(offer.queue) : undefined;
    if (waiter === undefined) {
      this.#declineOffer(offer);
      return;
    }
    let evaluation: Evaluation;
    try {
      evaluation = decodeValue(Buffer.from(offer.body, 'base64')) as Evaluation;
    } catch (error) {
      logger.warn({ err: error, evalId: offer.id }, 'an offer whose body does not decode; given back');
      this.#declineOffer(offer);
      return;
    }
    const held = new Held(offer.id, offer.token, evaluation, offer.queue, 1, clock.now() + lease.nackTimeoutMs);
    leases.add(held);
    waiters.serve(waiter, held);
  }

  /** An offer this process cannot start now: back to ready, uncharged, and everyone told; it stops standing. */
  #declineOffer(offer: Offer): void {
    this.#parts.serving.unquiet();
    this.#parts.work.track(
      this.#parts.giveBacks.inSql([offer], true).catch((error: unknown) =>
        this.#parts.logger.warn({ err: error, evalId: offer.id }, 'giving an offer back failed; its lease will end instead'),
      ),
    );
  }

  /**
   * This process was named but cannot start it now: the notification goes to everyone instead, and the process stops
   * standing as waiting, so that the enqueues after it name a process that can (it stands again at its next fetch
   * that finds too little with a thread free).
   */
  #passOn(): void {
    const { db, queries, names, nodeId, logger, work } = this.#parts;
    this.#parts.serving.unquiet();
    // Also while closing: a process that is leaving must not swallow what was meant for a waiting one.
    work.track(
      db
        .query(queries.passOn, [names.channels.ready, nodeId], 'a ready notification')
        .catch((error: unknown) => logger.warn({ err: error }, 'passing a ready notification on failed; the others look after their delay')),
    );
  }

  close(): void {
    if (this.#lookTimer !== undefined) this.#parts.clock.clearTimer(this.#lookTimer);
    this.#lookTimer = undefined;
  }
}

/** A delivery an idle enqueue leased to a waiting process, as its notification carries it (an offer). */
interface Offer {
  readonly holder: string;
  readonly id: string;
  readonly token: string;
  readonly queue: string;
  /** The evaluation's encoded body, base64. */
  readonly body: string;
}

/** The offer a ready notification carries, or undefined for one that does not parse as one. */
function offerIn(payload: string): Offer | undefined {
  try {
    const o = JSON.parse(payload) as { offer?: unknown; id?: unknown; token?: unknown; queue?: unknown; body?: unknown };
    if (typeof o.offer !== 'string' || typeof o.id !== 'string' || typeof o.token !== 'string' || typeof o.queue !== 'string' || typeof o.body !== 'string') return undefined;
    return { holder: o.offer, id: o.id, token: o.token, queue: o.queue, body: o.body };
  } catch {
    return undefined;
  }
}

/** An outcome notification that names its evaluations, or undefined for one that does not parse. */
function outcomesNamed(payload: string): { origin: unknown; ids: string[] } | undefined {
  try {
    const parsed = JSON.parse(payload) as { origin?: unknown; ids?: unknown };
    if (!Array.isArray(parsed.ids) || !parsed.ids.every((id) => typeof id === 'string')) return undefined;
    return { origin: parsed.origin, ids: parsed.ids as string[] };
  } catch {
    return undefined;
  }
}
