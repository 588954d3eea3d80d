/**
 * Leasing from the database: a fetch leases the best ready evaluations for one set of types (`lease_ready`, as many
 * rows as dequeues wait), and a poll's look takes the deliveries leased to this process that it never heard of.
 * Every row either becomes a `Held` in `Leases` before it is returned, or is left to its lease. Fetches wait for a
 * look in flight, and a look goes only while no fetch is out (see `UnheardLeases`).
 */
import type { Evaluation } from '../../broker/evaluation.js';
import { decodeValue } from '../codec.js';
import { Held } from './leases.js';
import type { BrokerParts } from './parts.js';

/** Most rows one fetch asks for (and most acks one statement carries). */
export const MAX_FETCH = 256;

export interface FetcherOptions {
  readonly pollMs: number;
  /** The channel offers to this process come on. */
  readonly offerChannel: string;
  /** Breaks ties between types of equal priority (the broker's `random` option). */
  readonly random: () => number;
}

type FetchParts = Pick<BrokerParts, 'db' | 'queries' | 'clock' | 'logger' | 'nodeId' | 'lease' | 'leases' | 'pacer' | 'unheard'>;

export class Fetcher {
  readonly #parts: FetchParts;
  readonly #options: FetcherOptions;
  /** Settles when the look in flight is answered; fetches wait for it (see `UnheardLeases`). */
  #looking: Promise<void> | undefined;
  /** Fetches whose answer has not come. */
  #fetchesOut = 0;

  constructor(parts: FetchParts, options: FetcherOptions) {
    this.#parts = parts;
    this.#options = options;
  }

  /** The look in flight, if one is. */
  get looking(): Promise<void> | undefined {
    return this.#looking;
  }

  /** Fetches whose answer has not come. */
  get out(): number {
    return this.#fetchesOut;
  }

  /**
   * Leases up to `max` of the best ready evaluations across `types`. Finding fewer than asked for, a fetch that
   * `stands` records this process as waiting for these types (see `waiting_dequeues`).
   */
  async fetch(types: readonly string[], max: number, stands = !this.#parts.pacer.threadsBusy()): Promise<Held[]> {
    while (this.#looking !== undefined) await this.#looking;
    this.#fetchesOut++;
    try {
      return await this.#fetchRows(types, max, stands);
    } finally {
      this.#fetchesOut--;
    }
  }

  async #fetchRows(types: readonly string[], max: number, stands: boolean): Promise<Held[]> {
    const { db, queries, pacer, lease, leases } = this.#parts;
    const sentAt = pacer.start();
    const rows = await db.query<{ id: string; body: Buffer; queue: string; deliveries: number; token: string; priority: number; create_index: string; seq: string }>(
      queries.leaseReady,
      // Finding fewer than asked for records this process as waiting for these types until its next polls, unless
      // its threads have work ahead: an enqueue should name (or offer to) a process that can start the evaluation now.
      [types, max, lease.nackTimeoutMs, this.#parts.nodeId, stands ? 2 * this.#options.pollMs : 0, this.#options.offerChannel],
      'a dequeue',
    );
    pacer.answered(sentAt);
    // Best first: priority, then the turn within its type (FIFO), ties between types at random.
    const turn = new Map<string, number>();
    const tie = new Map<string, number>();
    const ranked = rows
      .sort((a, b) => a.queue.localeCompare(b.queue) || b.priority - a.priority || Number(a.create_index) - Number(b.create_index) || Number(a.seq) - Number(b.seq))
      .map((row) => {
        const rank = (turn.get(row.queue) ?? 0) + 1;
        turn.set(row.queue, rank);
        if (!tie.has(row.queue)) tie.set(row.queue, this.#options.random());
        return { row, rank };
      })
      .sort((a, b) => b.row.priority - a.row.priority || a.rank - b.rank || tie.get(a.row.queue)! - tie.get(b.row.queue)!);
    const held: Held[] = [];
    for (const { row } of ranked) {
      const evaluation = decodeValue(row.body) as Evaluation;
      const h = new Held(row.id, row.token, evaluation, row.queue, row.deliveries, sentAt + lease.nackTimeoutMs);
      leases.add(h);
      held.push(h);
    }
    return held;
  }

  /**
   * A poll's look for deliveries the database shows as leased to this process that it never heard of (see
   * `UnheardLeases`): each is taken as it is (token, lease and delivery count unchanged), held, and passed to
   * `place`, which hands it to a dequeue waiting for its type or gives it back.
   */
  async lookForUnheard(place: (held: Held) => void): Promise<void> {
    const { db, queries, clock, logger, leases, unheard } = this.#parts;
    const exclude = unheard.begin(leases.all().map((h) => h.token));
    const sentAt = clock.now();
    const look = db.query<{ id: string; body: Buffer; queue: string; deliveries: number; token: string; left_ms: number }>(
      queries.unheardLeases,
      [this.#parts.nodeId, exclude],
      'a look for unheard deliveries',
    );
    this.#looking = look.then(
      () => undefined,
      () => undefined,
    );
    let rows: Awaited<typeof look>;
    try {
      rows = await look;
    } catch (error) {
      logger.debug({ err: error }, 'look for unheard deliveries failed; again at the next poll');
      rows = [];
    } finally {
      this.#looking = undefined;
    }
    const fresh = unheard.end((token) => leases.byToken(token) !== undefined);
    for (const row of rows) {
      if (!fresh(row.token)) continue;
      let evaluation: Evaluation;
      try {
        evaluation = decodeValue(row.body) as Evaluation;
      } catch (error) {
        logger.warn({ err: error, evalId: row.id }, 'an unheard delivery whose body does not decode; its lease will end');
        continue;
      }
      const held = new Held(row.id, row.token, evaluation, row.queue, row.deliveries, sentAt + Number(row.left_ms));
      leases.add(held);
      logger.info({ evalId: row.id }, 'took a delivery leased to this process whose notification or answer never came');
      place(held);
    }
  }
}
