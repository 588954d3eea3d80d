/**
 * What the PostgreSQL broker's collaborators are wired with: the shared services (database, statements, clock,
 * logger, events, leases, outcomes, pacer), the broker's switches, and the background work `close()` and `idle()`
 * wait for. The facade (`PgBroker`) owns one of each; every collaborator takes the few it needs (`Pick<BrokerParts,
 * …>`), and none holds the facade.
 */
import type { BrokerEvents } from '../../broker/broker-events.js';
import type { Clock } from '../../clock.js';
import type { TypedEmitter } from '../../events.js';
import type { Logger } from '../../observability/logger.js';
import type { Database } from '../database.js';
import type { SchemaNames } from '../names.js';
import type { RoundTripPacer } from '../round-trip-pacer.js';
import type { LeaseSettings } from './lease-settings.js';
import type { Leases } from './leases.js';
import type { OutcomeWatch } from './outcome-watch.js';
import type { BrokerQueries } from './queries.js';
import type { UnheardLeases } from './unheard-leases.js';

/**
 * The broker's switches. `open` and `closed` each go one way only (open at `open()`, closed at `close()`); `enabled`
 * and `paused` follow `setEnabled`, `pause` and `resume`.
 */
export class BrokerSwitches {
  enabled = true;
  paused = false;
  open = false;
  closed = false;
}

/** What this process started in the background (give-backs, timed-out nacks, retried ends): each is waited for. */
export class BackgroundWork {
  readonly #inFlight = new Set<Promise<unknown>>();

  get size(): number {
    return this.#inFlight.size;
  }

  track<T>(promise: Promise<T>): Promise<T> {
    this.#inFlight.add(promise);
    void promise.finally(() => this.#inFlight.delete(promise));
    return promise;
  }

  /** The work in flight now, to wait for (`Promise.allSettled`). */
  pending(): Promise<unknown>[] {
    return [...this.#inFlight];
  }
}

export interface BrokerParts {
  readonly db: Database;
  readonly names: SchemaNames;
  readonly queries: BrokerQueries;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly events: TypedEmitter<BrokerEvents>;
  /** This backend instance: the origin of what it enqueues and the holder of what it dequeues. */
  readonly nodeId: string;
  readonly lease: LeaseSettings;
  readonly leases: Leases;
  readonly outcomes: OutcomeWatch;
  readonly pacer: RoundTripPacer;
  /** What a look for unheard leases must not take. */
  readonly unheard: UnheardLeases;
  readonly switches: BrokerSwitches;
  readonly work: BackgroundWork;
  /**
   * Something may have become ready for this process (its own admission, nack, promotion or give-back, a
   * notification, a reconnect, a poll): its next fetch goes, whatever the last one found.
   */
  lookAgain(): void;
}
