/**
 * The claim keeper of one engine process: it keeps the process a member of the shared task store, claims its fair
 * share of the tasks into the process's task scheduler, renews its lease, hands tasks over when the share shrinks,
 * and lets go of everything when the lease cannot be renewed in time.
 *
 * Leases. The process is a member with a lease row (`expires_at`, database time) that covers all its claims; a
 * round (`task_cycle`, one statement) renews it every `renewMs`. A claim is (owner, epoch) on the task's row, and
 * every write about a run carries the epoch (the fence). The lease is renewed only while it is live: a member whose
 * lease ended is reaped by whichever process sees it first (its claims freed, its runs settled by their next owner)
 * and can never renew again; its process joins again as a new member.
 *
 * maxConcurrency across processes, failover included. The keeper counts half the lease from when it *sent* its last
 * successful renewal (the database's `now()` of that renewal is later, so its lease ends later still). If no
 * renewal succeeds by then, it releases every task here, canceling their runs: a handler that ignores the cancel is
 * terminated after `cancelGraceMs`. Only after the full lease can another process claim those tasks, so their runs
 * here have stopped before runs elsewhere start.
 *
 * Fair share: with n tasks and k live members, a member claims up to ⌈n/k⌉ and hands over what it holds beyond
 * that; a hand-over starts no new run and lets the runs in flight end (nothing is cut short), then gives the claim
 * back, which the others claim at once (a notification wakes them).
 *
 * Timing. A round renews every `renewMs` (the engine's tick, at most a fifth of `claimTtlMs`), and the lease it
 * writes is `claimTtlMs - renewMs` long: a process dies after its last renewal, so its lease ends within that of
 * its death, and the round of another process that comes at the end of it (woken for it) claims its tasks within
 * `claimTtlMs` of the death.
 *
 * Leases are in real time (`leaseClock`, the system clock), whatever clock the engine schedules by: the database's
 * clock passes regardless of a test's `ManualClock`.
 */
import { randomBytes } from 'node:crypto';
import type { Clock, TimerHandle } from '../../clock.js';
import type { Logger } from '../../observability/logger.js';
import type { TaskScheduler } from '../../tasks/task-scheduler.js';
import type { Task } from '../../tasks/task.js';
import { decodeDefinition } from './definition.js';
import { ClaimState, HeldClaim } from './held-claims.js';
import type { TaskStoreContext } from './store-context.js';

/** How often a member renews, and how long the lease it writes is (see Timing above). */
export function leaseTiming(claimTtlMs: number, tickMs: number): { readonly renewMs: number; readonly leaseMs: number } {
  const renewMs = Math.max(10, Math.min(tickMs, Math.floor(claimTtlMs / 5)));
  return { renewMs, leaseMs: claimTtlMs - renewMs };
}

export interface ClaimKeeperOptions {
  readonly context: TaskStoreContext;
  readonly scheduler: TaskScheduler;
  readonly claimTtlMs: number;
  readonly tickMs: number;
  /** Real time, for the lease deadline and the rounds. */
  readonly leaseClock: Clock;
  /** A readable name of this process (`host/pid`); each membership adds a random suffix. */
  readonly processName: string;
  /** Who this process is and its live thread count, recorded with its membership (the count at each round). */
  readonly identity: { readonly host: string; readonly pid: number; readonly threads: () => number | null };
  readonly logger: Logger;
}

/** Most tasks claimed in one round (the rest in the next ones, a round apart). */
const MAX_CLAIMS_PER_ROUND = 1000;
/** A round after another member's lease ends waits this much past it, so that the lease has ended by `now()`. */
const EXPIRY_MARGIN_MS = 2;

interface CycleAnswer {
  readonly lost: boolean;
  readonly claimed?: ClaimedRow[];
  readonly target?: number;
  readonly members?: number;
  readonly tasks?: number;
  readonly version?: number;
  readonly nextExpiryMs?: number | null;
}

/** A task claimed in a round, as `task_cycle` answers it. */
interface ClaimedRow {
  readonly id: string;
  /** Base64 of the stored definition. */
  readonly definition: string;
  readonly hash: string;
  readonly epoch: number;
  readonly latestScheduled: number;
  readonly latestCompleted: number;
  readonly queued: number;
  readonly taken: number[];
}

/** What a process's claims look like, for stats and tests. */
export interface ClaimKeeperStats {
  /** The member id of this process's current membership, or `undefined` when it is not a member. */
  readonly member: string | undefined;
  /** Claims held (scheduling) and being handed over. */
  readonly held: number;
  readonly handingOver: number;
  /** The fair share of the last round: ⌈tasks / live members⌉. */
  readonly target: number;
  readonly members: number;
  readonly tasks: number;
  /** Memberships lost (a lease that could not be renewed in time, or ended in the database). */
  readonly leasesLost: number;
  /** Rounds whose answer was taken in (claims adopted, the catalogue compared), since the keeper was made. */
  readonly rounds: number;
}

export class ClaimKeeper {
  readonly #c: TaskStoreContext;
  readonly #scheduler: TaskScheduler;
  readonly #ttlMs: number;
  readonly #renewMs: number;
  readonly #leaseMs: number;
  readonly #clock: Clock;
  readonly #processName: string;
  readonly #identity: ClaimKeeperOptions['identity'];
  readonly #logger: Logger;
  #member: string | undefined;
  #joined = false;
  /** Grows when the membership is lost: answers of rounds sent before that are ignored. */
  #generation = 0;
  /** Claiming and handing over happen only while the scheduler runs; renewals go on while anything is held. */
  #active = false;
  #closed = false;
  #round: Promise<void> | undefined;
  #again = false;
  #timer: TimerHandle | undefined;
  #deadline: TimerHandle | undefined;
  #catalogVersion = -1;
  #last = { target: 0, members: 0, tasks: 0 };
  #leasesLost = 0;
  #roundsTaken = 0;
  #failures = 0;
  readonly #handovers = new Set<Promise<void>>();

  constructor(options: ClaimKeeperOptions) {
    this.#c = options.context;
    this.#scheduler = options.scheduler;
    this.#ttlMs = options.claimTtlMs;
    // Several renewals per half lease: one lost round trip never costs the lease.
    const timing = leaseTiming(options.claimTtlMs, options.tickMs);
    this.#renewMs = timing.renewMs;
    this.#leaseMs = timing.leaseMs;
    this.#clock = options.leaseClock;
    this.#processName = options.processName;
    this.#identity = options.identity;
    this.#logger = options.logger;
  }

  get member(): string | undefined {
    return this.#member;
  }

  stats(): ClaimKeeperStats {
    let held = 0;
    let handingOver = 0;
    for (const claim of this.#c.claims.claims()) {
      if (claim.state === ClaimState.HELD) held++;
      else if (claim.state === ClaimState.HANDING_OVER) handingOver++;
    }
    return { member: this.#member, held, handingOver, ...this.#last, leasesLost: this.#leasesLost, rounds: this.#roundsTaken };
  }

  /** The scheduler runs: join, and claim from now on. */
  start(): void {
    if (this.#closed) return;
    this.#active = true;
    this.kick();
  }

  /** The scheduler stops: claim nothing more and hand nothing over; the lease is renewed while runs end. */
  pause(): void {
    this.#active = false;
  }

  /** A round soon (a task was declared or removed, claims were given back, a write was refused as stale). */
  kick(): void {
    if (this.#closed) return;
    if (this.#round !== undefined) {
      this.#again = true;
      return;
    }
    this.#arm(0);
  }

  /** The catalogue changed under a claim (a write was refused as stale): compare claims at the next round. */
  recheck(): void {
    this.#catalogVersion = -1;
    this.kick();
  }

  /** Releases `taskId` here, canceling its runs (it was deleted); resolves once they have stopped. */
  drop(taskId: string): Promise<void> {
    const claim = this.#c.claims.get(taskId);
    return claim === undefined ? Promise.resolve() : this.#drop(claim);
  }

  /**
   * `taskId` was disabled: when it is held here, it is handed over (no new runs; those in flight finish, then the
   * claim is given back); resolves once that is done.
   */
  disable(taskId: string): Promise<void> {
    const claim = this.#c.claims.get(taskId);
    if (claim === undefined || claim.state !== ClaimState.HELD) return Promise.resolve();
    return this.#handOverClaim(claim) ?? Promise.resolve();
  }

  /**
   * Leaves: no more rounds; waits for the writes in flight, then gives back every claim and ends the lease, so the
   * other processes claim the tasks at once. The scheduler should have stopped first (its runs ended and logged);
   * whatever still runs here is released (canceled).
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#active = false;
    this.#disarm();
    await this.#round?.catch(() => undefined);
    await Promise.allSettled([...this.#handovers]);
    await this.#c.claims.settled();
    const member = this.#member;
    if (this.#deadline !== undefined) this.#clock.clearTimer(this.#deadline);
    this.#deadline = undefined;
    for (const claim of this.#c.claims.claims()) void this.#drop(claim);
    if (member !== undefined && this.#joined) {
      try {
        await this.#c.db.query(this.#c.queries.leave, [member], 'leaving the task store');
      } catch (error) {
        // The lease ends by itself: the others claim the tasks once it has.
        this.#logger.warn({ err: error, member }, 'could not leave the task store; its claims pass on when the lease ends');
      }
    }
    this.#joined = false;
    this.#member = undefined;
  }

  // ── Rounds ─────────────────────────────────────────────────────────────────────────────────────────────────

  #arm(delayMs: number): void {
    if (this.#closed) return;
    if (this.#timer !== undefined) {
      if (this.#timer.due <= this.#clock.now() + delayMs) return;
      this.#clock.clearTimer(this.#timer);
    }
    this.#timer = this.#clock.setTimer(() => {
      this.#timer = undefined;
      this.#run();
    }, delayMs, { unref: true });
  }

  #disarm(): void {
    if (this.#timer !== undefined) this.#clock.clearTimer(this.#timer);
    this.#timer = undefined;
  }

  #run(): void {
    if (this.#closed || this.#round !== undefined) return;
    if (!this.#active && !this.#joined) return; // nothing to renew, nothing to claim
    this.#round = this.#rounds().finally(() => {
      this.#round = undefined;
      if (this.#closed) return;
      if (this.#again) {
        this.#again = false;
        this.#arm(0);
      }
    });
  }

  async #rounds(): Promise<void> {
    let next = this.#renewMs;
    try {
      next = await this.#roundOnce();
      this.#failures = 0;
    } catch (error) {
      this.#failures++;
      // One failed round is routine (a connection dropped); the lease deadline decides when it matters.
      const level = this.#failures === 1 ? 'debug' : 'warn';
      this.#logger[level]({ err: error, failures: this.#failures }, 'task claim round failed; retrying');
    }
    this.#arm(next);
  }

  /** One round; answers when the next should be (ms). */
  async #roundOnce(): Promise<number> {
    const generation = this.#generation;
    const join = !this.#joined;
    if (!this.#active && join) return this.#renewMs;
    this.#member ??= `${this.#processName}/${randomBytes(4).toString('hex')}`;
    const member = this.#member;
    const held = this.#c.claims.size;
    const sentAt = this.#clock.now();
    const [row] = await this.#c.db.query<{ r: CycleAnswer }>(
      this.#c.queries.cycle,
      [member, this.#leaseMs, held, this.#active ? MAX_CLAIMS_PER_ROUND : 0, join, this.#identity.host, this.#identity.pid, this.#identity.threads()],
      'a task claim round',
    );
    if (generation !== this.#generation || this.#closed) return 0;
    const answer = row?.r;
    if (answer === undefined || answer.lost) {
      this.#lose(join ? 'its membership could not be created' : 'its lease had ended in the database');
      return 0;
    }
    this.#joined = true;
    this.#renewed(sentAt, generation);
    const target = answer.target ?? 0;
    this.#last = { target, members: answer.members ?? 0, tasks: answer.tasks ?? 0 };
    const claimed = answer.claimed ?? [];
    if (claimed.length > 0) await this.#adopt(member, claimed, generation);
    if (answer.version !== undefined && answer.version !== this.#catalogVersion && generation === this.#generation) {
      await this.#reconcile(member, generation);
      this.#catalogVersion = answer.version;
    }
    if (this.#active && generation === this.#generation) {
      const scheduling = this.#countScheduling();
      if (scheduling > target) this.#handOver(scheduling - target);
    }
    let next = this.#renewMs;
    const expiry = answer.nextExpiryMs;
    if (typeof expiry === 'number') next = Math.min(next, Math.max(0, Math.ceil(expiry)) + EXPIRY_MARGIN_MS);
    // Still short of the share with tasks claimed this round: there may be more free ones right away.
    if (this.#active && claimed.length === MAX_CLAIMS_PER_ROUND) next = 0;
    this.#roundsTaken++;
    return next;
  }

  #countScheduling(): number {
    let n = 0;
    for (const claim of this.#c.claims.claims()) if (claim.state === ClaimState.HELD) n++;
    return n;
  }

  /** A renewal sent at `sentAt` succeeded: the lease is ours until at least `sentAt + leaseMs`; let go at half of it. */
  #renewed(sentAt: number, generation: number): void {
    if (this.#deadline !== undefined) this.#clock.clearTimer(this.#deadline);
    const deadline = sentAt + this.#leaseMs / 2;
    this.#deadline = this.#clock.setTimer(() => {
      this.#deadline = undefined;
      if (generation === this.#generation && this.#joined) this.#lose(`no lease renewal succeeded within half of the lease (${this.#leaseMs} ms of claimTtlMs ${this.#ttlMs} ms)`);
    }, deadline - this.#clock.now(), { unref: true });
  }

  /** The membership is gone: every task here is released (runs canceled), and the process joins again anew. */
  #lose(reason: string): void {
    const member = this.#member;
    this.#generation++;
    this.#joined = false;
    this.#member = undefined;
    this.#catalogVersion = -1;
    this.#leasesLost++;
    if (this.#deadline !== undefined) this.#clock.clearTimer(this.#deadline);
    this.#deadline = undefined;
    const claims = this.#c.claims.claims();
    this.#logger.warn({ member, reason, claims: claims.length }, 'task claims lost: their runs here are canceled, and the process joins the task store again');
    for (const claim of claims) void this.#drop(claim);
    this.kick();
  }

  /** Takes the claims of a round into the scheduler (with their definitions, progress and queued runs). */
  async #adopt(member: string, rows: readonly ClaimedRow[], generation: number): Promise<void> {
    const refused: Array<{ readonly taskId: string; readonly epoch: number }> = [];
    for (const row of rows) {
      if (generation !== this.#generation) return;
      let task: Task;
      try {
        task = decodeDefinition(Buffer.from(row.definition, 'base64'));
      } catch (error) {
        this.#logger.error({ err: error, taskId: row.id }, 'a stored task definition is not valid here; its claim is given back');
        refused.push({ taskId: row.id, epoch: row.epoch });
        continue;
      }
      const claim = new HeldClaim(row.id, member, row.epoch, task, row.hash, row.latestScheduled, row.latestCompleted, row.queued, new Set(row.taken));
      this.#c.claims.set(claim);
      try {
        this.#scheduler.claimTask(task, { latestCompleted: claim.cursor });
      } catch (error) {
        this.#logger.error({ err: error, taskId: row.id }, 'a claimed task cannot be scheduled here; its claim is given back');
        this.#c.claims.delete(claim);
        refused.push(claim);
        continue;
      }
      if (claim.queued > 0) this.#scheduler.markDue(task.id);
    }
    if (refused.length > 0) await this.#giveBack(member, refused);
  }

  /** The catalogue changed: claims that are no longer this process's are dropped, replaced definitions taken. */
  async #reconcile(member: string, generation: number): Promise<void> {
    const rows = await this.#c.db.query<{ task_id: string; epoch: string; hash: string; disabled: boolean }>(
      this.#c.queries.claimsOf,
      [member],
      'the claims of this process',
    );
    if (generation !== this.#generation) return;
    const current = new Map(rows.map((row) => [row.task_id, row]));
    const replaced: HeldClaim[] = [];
    for (const claim of this.#c.claims.claims()) {
      const row = current.get(claim.taskId);
      if (claim.member !== member || row === undefined || Number(row.epoch) !== claim.epoch) void this.#drop(claim);
      else if (row.disabled) {
        if (claim.state === ClaimState.HELD) void this.#handOverClaim(claim);
      } else if (row.hash !== claim.hash) replaced.push(claim);
    }
    if (replaced.length === 0) return;
    const definitions = await this.#c.db.query<{ id: string; definition: Buffer; hash: string }>(
      this.#c.queries.definitions,
      [replaced.map((claim) => claim.taskId)],
      'the replaced task definitions',
    );
    for (const row of definitions) {
      const claim = this.#c.claims.get(row.id);
      if (claim === undefined || !claim.current || generation !== this.#generation) continue;
      try {
        const task = decodeDefinition(row.definition);
        if (claim.state === ClaimState.HELD) this.#scheduler.replaceTask(task);
        claim.replace(task, row.hash);
      } catch (error) {
        this.#logger.error({ err: error, taskId: row.id }, 'a replaced task definition cannot be scheduled here; the claim keeps the one before');
      }
    }
  }

  /** Hands `count` tasks over: idle ones first; each is given back once its runs have ended here. */
  #handOver(count: number): void {
    const candidates = this.#c.claims.claims().filter((claim) => claim.state === ClaimState.HELD);
    candidates.sort((a, b) => (this.#scheduler.taskStats(a.taskId)?.runs ?? 0) - (this.#scheduler.taskStats(b.taskId)?.runs ?? 0));
    for (const claim of candidates.slice(0, count)) void this.#handOverClaim(claim);
  }

  /**
   * Hands one held claim over: its task starts no new run, and once its runs here have ended (and their writes
   * settled) the claim is given back; resolves then. Undefined when the scheduler refused to release it.
   */
  #handOverClaim(claim: HeldClaim): Promise<void> | undefined {
    claim.state = ClaimState.HANDING_OVER;
    let released: Promise<void>;
    try {
      released = this.#scheduler.claimedTask(claim.taskId) === undefined ? Promise.resolve() : this.#scheduler.releaseTask(claim.taskId, { cancel: false });
    } catch (error) {
      this.#logger.error({ err: error, taskId: claim.taskId }, 'could not hand a task over');
      claim.state = ClaimState.HELD;
      return undefined;
    }
    const handover = released
      .then(() => Promise.all(this.#c.claims.runsOf(claim).map((fence) => fence.settled())))
      .then(() => (claim.current ? this.#giveBack(claim.member, [claim]) : undefined))
      .catch((error: unknown) => this.#logger.warn({ err: error, taskId: claim.taskId }, 'a hand-over could not give its claim back; it passes on when the lease ends'))
      .finally(() => {
        this.#c.claims.delete(claim);
        this.#handovers.delete(handover);
      });
    this.#handovers.add(handover);
    return handover;
  }

  async #giveBack(member: string, claims: ReadonlyArray<{ readonly taskId: string; readonly epoch: number }>): Promise<void> {
    await this.#c.db.query(
      this.#c.queries.giveBack,
      [member, claims.map((claim) => claim.taskId), claims.map((claim) => claim.epoch)],
      'giving claims back',
    );
  }

  /**
   * Forgets a claim here and stops its task in the scheduler, canceling its runs (those of a hand-over too); resolves
   * once they have stopped.
   */
  #drop(claim: HeldClaim): Promise<void> {
    this.#c.claims.delete(claim);
    try {
      if (this.#scheduler.claimedTask(claim.taskId) !== undefined) return this.#scheduler.releaseTask(claim.taskId);
      return this.#scheduler.cancelReleasedRuns(claim.taskId);
    } catch (error) {
      this.#logger.error({ err: error, taskId: claim.taskId }, 'could not release a task whose claim is gone');
      return Promise.resolve();
    }
  }
}
