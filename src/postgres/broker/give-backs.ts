/**
 * Deliveries this process goes back on without their dequeue's say: fetched for a dequeue that went away, offered
 * when it cannot start them, held at disable or close, or offered while the listener was away. They go back
 * uncharged, and everyone is told when any went back (a quiet process fetches only once it hears of something).
 * While a give-back is out, its tokens are ones a look for unheard leases must not take (`UnheardLeases`).
 */
import type { Evaluation } from '../../broker/evaluation.js';
import type { Held } from './leases.js';
import type { BrokerParts } from './parts.js';

type GiveBackParts = Pick<BrokerParts, 'db' | 'names' | 'queries' | 'logger' | 'nodeId' | 'leases' | 'unheard' | 'work'>;

export class GiveBacks {
  readonly #parts: GiveBackParts;

  constructor(parts: GiveBackParts) {
    this.#parts = parts;
  }

  /**
   * Gives `deliveries` back, uncharged, and tells everyone when any went back; with `unstand`, this process also
   * stops standing as waiting, in the same statement.
   */
  inSql(deliveries: readonly { readonly id: string; readonly token: string }[], unstand = false): Promise<unknown> {
    const { db, names, queries, nodeId, unheard } = this.#parts;
    const tokens = deliveries.map((d) => d.token);
    unheard.givingBack(tokens);
    return db.query(
      unstand ? queries.giveBackAndUnstand : queries.giveBack,
      [deliveries.map((d) => d.id), tokens, names.channels.ready, ...(unstand ? [nodeId] : [])],
      'a give-back',
    ).finally(() => unheard.gaveBack(tokens));
  }

  /** A held delivery no dequeue here takes: back in the background, not left to its lease. */
  held(held: Held): void {
    this.#parts.leases.delete(held);
    this.#parts.work.track(
      this.inSql([held]).catch((error: unknown) => this.#parts.logger.warn({ err: error, evalId: held.id }, 'give-back failed; its lease will end instead')),
    );
  }

  /** Gives back every delivery this process holds, uncharged; answers with their evaluations. */
  async all(): Promise<Evaluation[]> {
    const leases = this.#parts.leases;
    const held = leases.all();
    for (const h of held) leases.delete(h);
    if (held.length === 0) return [];
    await this.inSql(held);
    return held.map((h) => h.evaluation);
  }

  /**
   * After a reconnect of the listener: offers sent while it was away were leased to this process and never heard, so
   * they would wait out their leases. Every delivery of this holder whose token it does not hold goes back, uncharged.
   * (An offer heard between the reconnect and this statement's snapshot can go back too; its lease is then lost here
   * at its first extension, as any lease taken over elsewhere is.) It goes after `looking`, the look in flight: what
   * that look takes is held by then, and stays.
   */
  missedOffers(looking: () => Promise<void> | undefined): Promise<unknown> {
    const { db, names, queries, logger, nodeId, leases, work } = this.#parts;
    return work.track(
      Promise.resolve(looking())
        .then(() => db.query(queries.giveBackMissed, [nodeId, leases.all().map((h) => h.token), names.channels.ready], 'a give-back of missed offers'))
        .catch((error: unknown) => logger.warn({ err: error }, 'giving back missed offers failed; their leases will end instead')),
    );
  }
}
