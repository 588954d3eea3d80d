/**
 * Every process reaps (no leader): leases that ran out are ended as nack timeouts (redelivered, or `_failed` at the
 * delivery limit), delays that are over admit their evaluations, and settled evaluations past their retention and the
 * log behind its retention are deleted. Rows another process is working on are skipped (SKIP LOCKED), never waited for; each pass takes bounded
 * batches. A pass runs when the earliest lease end or delay in the whole schema comes due (each pass asks the
 * database for it), and at least every `pollMs`.
 */
import type { Clock, TimerHandle } from '../../clock.js';
import type { Logger } from '../../observability/logger.js';
import type { Database } from '../database.js';
import type { SchemaNames } from '../names.js';
import type { LeaseSettings } from './lease-settings.js';
import { brokerQueries, REAP_BATCH, type BrokerQueries } from './queries.js';

export interface ReaperEvents {
  /** A lease ran out and was ended by this pass; `holder` is the process that held it. */
  readonly reaped: (token: string, holder: string | null) => void;
  /** Something became ready. */
  readonly ready: () => void;
}

/** Settled evaluations (acked, removed, superseded) are kept this long for outcome look-ups, ms. */
export const OUTCOME_RETENTION_MS = 3_600_000;
/**
 * Change sets the log keeps behind the counter. A replica further behind than this reloads the whole state instead
 * of replaying (`PgState.catchUpWith`); a cut-off commit is looked up by its plan id long before it is compacted.
 */
export const LOG_RETENTION = 100_000;
/** How often a process deletes what is past retention, ms. */
const CLEANUP_EVERY_MS = 60_000;
/** Fewest ms between two passes, whatever is due: the lease ends of busy processes move all the time. */
const MIN_GAP_MS = 5;
/** Tries of one batch that keeps losing races for job slots before the pass gives up until the next poll. */
const SLOT_RACE_TRIES = 3;

type ReapRow = { id: string; holder: string | null; token: string | null; kind: string };

/**
 * True for the unique index "one evaluation per job holds the slot" refusing a batch. A delayed evaluation that comes
 * due takes its job's slot when the reaper sees no holder, under the job's lock; but the fast path of `enqueue`
 * admits a holder without that lock, so its insert can be uncommitted (unseen) while the reaper decides. The
 * reaper's update then waits on that index entry and is refused once the insert commits: a race the reaper lost,
 * not a failure. The batch rolled back as one statement; run again, it sees the holder and the evaluation waits
 * behind it (pending).
 */
function lostSlotRace(error: unknown): boolean {
  const e = error as { code?: unknown; constraint?: unknown } | null;
  return typeof e === 'object' && e !== null && e.code === '23505' && e.constraint === 'evals_one_per_job';
}

export class Reaper {
  readonly #db: Database;
  readonly #queries: BrokerQueries;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #pollMs: number;
  readonly #settings: LeaseSettings;
  readonly #nodeId: string;
  readonly #events: ReaperEvents;
  #timer: TimerHandle | undefined;
  #running: Promise<void> | undefined;
  #closed = false;
  #lastCleanup = 0;

  constructor(db: Database, names: SchemaNames, clock: Clock, logger: Logger, pollMs: number, settings: LeaseSettings, nodeId: string, events: ReaperEvents) {
    this.#db = db;
    this.#queries = brokerQueries(names.S);
    this.#clock = clock;
    this.#logger = logger;
    this.#pollMs = pollMs;
    this.#settings = settings;
    this.#nodeId = nodeId;
    this.#events = events;
  }

  start(): void {
    this.#lastCleanup = this.#clock.now();
    this.#arm(0);
  }

  /** Runs a pass now (after the one in progress); resolves when it is done. */
  runNow(): Promise<void> {
    if (this.#running !== undefined) return this.#running.then(() => this.runNow());
    if (this.#timer !== undefined) this.#clock.clearTimer(this.#timer);
    this.#timer = undefined;
    this.#running = this.#pass().finally(() => (this.#running = undefined));
    return this.#running;
  }

  #arm(delayMs: number): void {
    if (this.#closed) return;
    if (this.#timer !== undefined) this.#clock.clearTimer(this.#timer);
    this.#timer = this.#clock.setTimer(() => {
      this.#timer = undefined;
      void this.runNow();
    }, Math.max(MIN_GAP_MS, delayMs), { unref: true });
  }

  async #pass(): Promise<void> {
    if (this.#closed) return;
    let next = this.#pollMs;
    try {
      let full: boolean;
      do {
        const rows = await this.#reapBatch();
        let ready = false;
        for (const row of rows) {
          if (row.kind === 'lease' && row.token !== null) this.#events.reaped(row.token, row.holder);
          ready = true;
        }
        if (ready) this.#events.ready();
        full = rows.length >= REAP_BATCH;
      } while (full && !this.#closed);
      const [due] = await this.#db.query<{ lease_ms: number | null; due_ms: number | null }>(this.#queries.nextDue, [], 'a reaper look-ahead');
      for (const ms of [due?.lease_ms, due?.due_ms]) {
        // A millisecond past the end: the reaper's test is `<= now()`.
        if (ms !== null && ms !== undefined) next = Math.min(next, Number(ms) + 1);
      }
      if (this.#clock.now() - this.#lastCleanup >= CLEANUP_EVERY_MS) {
        this.#lastCleanup = this.#clock.now();
        await this.#cleanup();
      }
    } catch (error) {
      this.#logger.warn({ err: error }, 'reaper pass failed; retrying at the next poll');
    }
    this.#arm(next);
  }

  /** One batch of `reap()`, run again when it lost a race for a job's slot (see `lostSlotRace`). */
  async #reapBatch(): Promise<ReapRow[]> {
    const s = this.#settings;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#db.query<ReapRow>(
          this.#queries.reap,
          [REAP_BATCH, s.deliveryLimit, s.initialNackDelayMs, s.subsequentNackDelayMs, this.#nodeId],
          'a reaper pass',
        );
      } catch (error) {
        if (!lostSlotRace(error) || attempt >= SLOT_RACE_TRIES) throw error;
        this.#logger.debug({ err: error, attempt }, 'reaper lost a race for a job slot to an admission; reaping the batch again');
      }
    }
  }

  async #cleanup(): Promise<void> {
    await this.#db.query(this.#queries.deleteSettled, [OUTCOME_RETENTION_MS], 'an outcome cleanup');
    await this.#db.query(this.#queries.compactLog, [LOG_RETENTION], 'a log compaction');
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer !== undefined) this.#clock.clearTimer(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }
}
