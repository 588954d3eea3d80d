/**
 * The leases this process holds: every delivery it handed out, until it is acked, nacked, failed, removed or lost.
 * A lease is `lease_until` in database time; here each one has its end on this process's clock (the database's
 * answer at dequeue, shifted to the local clock), and a timer a margin before that end asks the lease keeper whether
 * to extend it (the engine's worker set answers from shared memory: the work is waiting for a thread, running with
 * heartbeats, or hung). Extensions of many leases go to the database in one statement. A lease the keeper lets go
 * is ended here as a nack timeout at its end; a lease the database no longer shows as this delivery's (it ran out
 * while this process was cut off, and another process redelivered it) is lost: the broker tells the worker to stop.
 */
import type { Evaluation } from '../../broker/evaluation.js';
import { DeadlineQueue, type DeadlineNode } from '../../broker/deadline-queue.js';
import type { LeaseKeeper } from '../../backend/broker-backend.js';
import type { Clock } from '../../clock.js';
import type { Logger } from '../../observability/logger.js';
import type { Database } from '../database.js';
import type { BrokerQueries } from './queries.js';

export class Held implements DeadlineNode {
  readonly id: string;
  readonly token: string;
  readonly evaluation: Evaluation;
  readonly queue: string;
  readonly deliveries: number;
  /** Local clock time at which the database's lease ends (as last extended). */
  leaseEnd: number;
  /** Kept alive by heartbeats without asking the keeper (the plan queue: `pauseNackTimeout`). */
  paused = false;
  /** The timer is the one at `leaseEnd` itself: the last look before the lease is let go. */
  final = false;
  /** Ended locally (acked, nacked, …): whatever is in flight for it changes nothing any more. */
  ended = false;
  /**
   * Its holder asked for its end (an ack, nack, fail or remove, or the keeper let it go): nobody works on it any
   * more, so its lease is never extended again, paused or not. Either the end lands (retried while the database is
   * away, see `PgBroker`), or the lease runs out and the reaper ends it: either way within a nack timeout.
   */
  ending = false;
  due = 0;
  deadlineIndex = -1;
  deadlineSeq = 0;

  constructor(id: string, token: string, evaluation: Evaluation, queue: string, deliveries: number, leaseEnd: number) {
    this.id = id;
    this.token = token;
    this.evaluation = evaluation;
    this.queue = queue;
    this.deliveries = deliveries;
    this.leaseEnd = leaseEnd;
  }
}

export interface LeaseEvents {
  /** The keeper let the lease go and its end came: end it as a nack timeout. */
  readonly expire: (held: Held) => void;
  /** The database no longer has this delivery's lease (it was reaped elsewhere, or ended): the holder lost it. */
  readonly lost: (held: Held) => void;
  /** The lease was extended to `leaseEnd` (local time). */
  readonly extended: (held: Held) => void;
}

interface Extension {
  readonly held: Held;
  readonly ms: number;
  readonly done: ((ok: boolean) => void) | undefined;
}

/** Retry delay for an extension skipped because its row was locked at that moment (a commit of its own plan). */
const LOCKED_RETRY_MS = 10;
/** Retry delay after the database did not answer. */
const ERROR_RETRY_MS = 250;

export class Leases {
  readonly #db: Database;
  readonly #queries: BrokerQueries;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #nackTimeoutMs: number;
  readonly #marginMs: number;
  readonly #events: LeaseEvents;
  readonly #byToken = new Map<string, Held>();
  readonly #byId = new Map<string, Held>();
  readonly #timers: DeadlineQueue<Held>;
  #keeper: LeaseKeeper | undefined;
  #batch: Extension[] = [];
  #flushing = false;
  #closed = false;

  constructor(db: Database, queries: BrokerQueries, clock: Clock, logger: Logger, nackTimeoutMs: number, events: LeaseEvents) {
    this.#db = db;
    this.#queries = queries;
    this.#clock = clock;
    this.#logger = logger;
    this.#nackTimeoutMs = nackTimeoutMs;
    // Asked this long before the end, so that the extension reaches the database in time; a quarter of the lease,
    // 20 ms to 2 s.
    this.#marginMs = Math.max(20, Math.min(2_000, nackTimeoutMs / 4));
    this.#events = events;
    this.#timers = new DeadlineQueue<Held>(clock, (held) => this.#due(held));
  }

  get size(): number {
    return this.#byToken.size;
  }

  keepLeases(keeper: LeaseKeeper | undefined): void {
    this.#keeper = keeper;
  }

  add(held: Held): void {
    this.#byToken.set(held.token, held);
    this.#byId.set(held.id, held);
    this.#schedule(held);
  }

  byToken(token: string): Held | undefined {
    return this.#byToken.get(token);
  }

  byId(id: string): Held | undefined {
    return this.#byId.get(id);
  }

  all(): Held[] {
    return [...this.#byToken.values()];
  }

  /** The delivery is over for this process. */
  delete(held: Held): void {
    held.ended = true;
    this.#timers.cancel(held);
    this.#byToken.delete(held.token);
    if (this.#byId.get(held.id) === held) this.#byId.delete(held.id);
  }

  pause(held: Held): void {
    held.paused = true;
  }

  /** Restarts a paused lease with a full nack timeout from now. */
  resume(held: Held): void {
    held.paused = false;
    this.#push({ held, ms: this.#nackTimeoutMs, done: undefined });
  }

  /** A heartbeat pushed by the holder: the lease restarts from now; resolves true once the database has it. */
  extendNow(held: Held): Promise<boolean> {
    return new Promise<boolean>((resolve) => this.#push({ held, ms: this.#nackTimeoutMs, done: resolve }));
  }

  #schedule(held: Held): void {
    held.final = false;
    this.#timers.schedule(held, held.leaseEnd - this.#marginMs);
  }

  #due(held: Held): void {
    if (held.ended || held.ending || this.#closed) return;
    const now = this.#clock.now();
    if (held.paused) {
      this.#push({ held, ms: this.#nackTimeoutMs, done: undefined });
      return;
    }
    const until = this.#askKeeper(held, now);
    if (until !== undefined && until > now) {
      // An extension that would end before the lease does changes nothing: look again at the end.
      if (until > held.leaseEnd || held.final) {
        this.#push({ held, ms: until - now, done: undefined });
        return;
      }
    }
    if (!held.final && held.leaseEnd > now) {
      held.final = true;
      this.#timers.schedule(held, held.leaseEnd);
      return;
    }
    this.#events.expire(held);
  }

  /** The local time the keeper wants the lease extended to, or undefined to let it end. */
  #askKeeper(held: Held, now: number): number | undefined {
    const keeper = this.#keeper;
    if (keeper === undefined) return undefined;
    let answer: boolean | number;
    try {
      answer = keeper.leaseProgress(held.id, held.token);
    } catch (error) {
      this.#logger.warn({ err: error, evalId: held.id }, 'lease keeper threw; letting the lease end');
      return undefined;
    }
    if (answer === true) return now + this.#nackTimeoutMs;
    if (typeof answer !== 'number' || Number.isNaN(answer)) return undefined;
    return answer + this.#nackTimeoutMs;
  }

  #push(extension: Extension): void {
    if (this.#closed || extension.held.ended || extension.held.ending) {
      extension.done?.(false);
      return;
    }
    this.#batch.push(extension);
    if (!this.#flushing) {
      this.#flushing = true;
      queueMicrotask(() => void this.#flush());
    }
  }

  async #flush(): Promise<void> {
    try {
      while (this.#batch.length > 0 && !this.#closed) {
        const batch = this.#batch;
        this.#batch = [];
        await this.#extend(batch);
      }
    } finally {
      this.#flushing = false;
    }
  }

  async #extend(batch: Extension[]): Promise<void> {
    const live: Extension[] = [];
    for (const x of batch) {
      // Asked for before its end was: not extended now.
      if (x.held.ended || x.held.ending) x.done?.(false);
      else live.push(x);
    }
    if (live.length === 0) return;
    const sentAt = this.#clock.now();
    let extended: Set<string>;
    try {
      const rows = await this.#db.query<{ token: string }>(
        this.#queries.extendLeases,
        [live.map((x) => x.held.id), live.map((x) => x.held.token), live.map((x) => x.ms)],
        'a lease extension',
      );
      extended = new Set(rows.map((r) => r.token));
    } catch (error) {
      // The database did not answer: the leases run on; try again shortly, while they may still be saved.
      this.#logger.warn({ err: error, leases: live.length }, 'lease extension failed; retrying');
      for (const x of live) this.#retryLater(x, ERROR_RETRY_MS);
      return;
    }
    const missing: Extension[] = [];
    for (const x of live) {
      if (extended.has(x.held.token)) {
        if (x.held.ended) continue;
        // Counted from when the statement was sent: the database's lease is at least this long.
        x.held.leaseEnd = sentAt + x.ms;
        this.#schedule(x.held);
        this.#events.extended(x.held);
        x.done?.(true);
      } else {
        missing.push(x);
      }
    }
    if (missing.length > 0) await this.#sortOut(missing);
  }

  /**
   * Not extended: locked right now by a commit (try again); acked with this token, by an ack or a plan commit of
   * this process whose answer is still on its way (that ack ends the lease here: `settledAck`, or the check of a
   * cut-off commit); or no longer this delivery's lease (lost).
   */
  async #sortOut(missing: Extension[]): Promise<void> {
    let rows: { token: string; state: string; live: boolean }[];
    try {
      rows = await this.#db.query<{ token: string; state: string; live: boolean }>(
        this.#queries.leaseCheck,
        [missing.map((x) => x.held.id)],
        'a lease check',
      );
    } catch (error) {
      this.#logger.warn({ err: error }, 'lease check failed; retrying');
      for (const x of missing) this.#retryLater(x, ERROR_RETRY_MS);
      return;
    }
    const current = new Set(rows.filter((r) => r.state === 'unacked' && r.live).map((r) => r.token));
    const acked = new Set(rows.filter((r) => r.state === 'acked').map((r) => r.token));
    for (const x of missing) {
      if (x.held.ended) {
        x.done?.(false);
      } else if (current.has(x.held.token)) {
        this.#retryLater(x, LOCKED_RETRY_MS);
      } else if (acked.has(x.held.token)) {
        x.done?.(false);
      } else {
        x.done?.(false);
        this.#events.lost(x.held);
      }
    }
  }

  #retryLater(x: Extension, delayMs: number): void {
    this.#clock.setTimer(() => this.#push(x), delayMs, { unref: true });
  }

  close(): void {
    this.#closed = true;
    this.#timers.clear();
    for (const x of this.#batch) x.done?.(false);
    this.#batch = [];
  }
}
