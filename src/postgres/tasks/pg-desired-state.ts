/**
 * The desired state of runs in PostgreSQL, for the tasks this process has claimed: InfluxDB's `CreateNextRun`,
 * `FinishRun` and manual runs, each one fenced write (a function of the schema) under the claim's epoch.
 *
 * Planning is local (the claim's cursor and the task's catch-up policy, `planNextRun`), the decision is the
 * database's: a run exists once its row under (task, scheduledFor) is inserted in the same transaction as the
 * compare-and-set of `latest_scheduled`. A scheduled run is created with its first attempt begun on this process
 * (the scheduler begins it as soon as the run exists), so its `startRun` writes nothing; a run canceled before that
 * start has its start taken back and is queued again, as one never begun. A time that already has a run (one
 * settled after a lost process, a manual one) is skipped, never run twice. Queued runs (manual, resumed) are handed
 * out before scheduled ones.
 */
import { randomUUID } from 'node:crypto';
import { DuplicateRunError, InvalidArgumentError, InvalidStateError, RunNotYetDueError, TaskNotClaimedError } from '../../errors.js';
import { planNextRun } from '../../tasks/catch-up.js';
import { taskDefaults } from '../../tasks/task.js';
import { RunStatus, type DesiredState, type QueuedRun, type RunCreation, type RunEnding } from '../../tasks/types.js';
import { encodeError, encodeValue } from '../codec.js';
import { RunFence, type HeldClaim } from './held-claims.js';
import { staleClaimError, type TaskStoreContext } from './store-context.js';

/** Times skipped in one `createNextRun` because they already had a run (after a takeover) before it gives up. */
const MAX_SKIPS = 10_000;

type TakeRow = {
  readonly outcome: 'stale' | 'none' | 'taken';
  readonly run_id: string | null;
  readonly scheduled_for: number | null;
  readonly run_at: number | null;
  readonly attempts: number | null;
  readonly remaining: string | null;
};

export class PgDesiredState implements DesiredState {
  readonly #c: TaskStoreContext;

  constructor(context: TaskStoreContext) {
    this.#c = context;
  }

  async createNextRun(taskId: string, now: number): Promise<RunCreation> {
    checkTime('now', now);
    const claim = this.#claimOf(taskId);
    if (claim.queued > 0) {
      const taken = await this.#takeQueued(claim, now);
      if (taken !== undefined) return taken;
    }
    const offset = claim.task.offset ?? taskDefaults.offset;
    const policy = claim.task.catchUp ?? taskDefaults.catchUp;
    for (let skips = 0; skips < MAX_SKIPS; skips++) {
      const plan = planNextRun(claim.schedule, offset, claim.cursor, now, policy);
      if (plan.scheduledFor === undefined) {
        claim.cursor = plan.lastScheduled;
        throw new RunNotYetDueError(plan.nextDue);
      }
      if (claim.taken.has(plan.scheduledFor)) {
        // It had a run when the task was claimed (the run key would refuse it): skipped without asking.
        claim.cursor = plan.lastScheduled;
        continue;
      }
      const runId = randomUUID();
      const runAt = plan.scheduledFor + offset;
      const expected = claim.latestScheduled;
      const row = await this.#c.writes.createStarted(claim, { runId, expected, scheduledFor: plan.scheduledFor, runAt, when: now });
      switch (row.outcome) {
        case 'stale':
          throw this.#stale(claim);
        case 'moved':
          // Only this claim moves it while the claim is current; whatever moved it, compare against what is there.
          claim.latestScheduled = row.latest!;
          continue;
        case 'exists':
          claim.latestScheduled = row.latest!;
          claim.cursor = plan.lastScheduled;
          continue;
        case 'created': {
          claim.latestScheduled = row.latest!;
          claim.cursor = plan.lastScheduled;
          const created: QueuedRun = Object.freeze({ taskId, runId, scheduledFor: plan.scheduledFor, runAt });
          const fence = new RunFence(claim, runId, 0);
          fence.firstStartWritten = true;
          this.#c.claims.addRun(fence);
          return { created, nextDue: claim.queued > 0 ? now : plan.nextDue };
        }
        default:
          throw new InvalidStateError(`Expected task_create_run to answer an outcome, got ${JSON.stringify(row)}`);
      }
    }
    throw new InvalidStateError(`Expected a scheduled time of task "${taskId}" without a run within ${MAX_SKIPS} times, but every one had a run`);
  }

  async #takeQueued(claim: HeldClaim, now: number): Promise<RunCreation | undefined> {
    const [row] = await this.#c.db.query<TakeRow>(this.#c.queries.takeQueued, [claim.taskId, claim.epoch, claim.member], 'a queued run');
    if (row?.outcome === 'stale') throw this.#stale(claim);
    if (row?.outcome !== 'taken') {
      claim.queued = 0;
      return undefined;
    }
    claim.queued = Number(row.remaining);
    const attempts = row.attempts ?? 0;
    const run: QueuedRun = Object.freeze({
      taskId: claim.taskId,
      runId: row.run_id!,
      scheduledFor: row.scheduled_for!,
      runAt: row.run_at!,
      ...(attempts > 0 ? { attempts } : {}),
    });
    this.#c.claims.addRun(new RunFence(claim, run.runId, attempts));
    const offset = claim.task.offset ?? taskDefaults.offset;
    const nextDue = claim.queued > 0 ? now : claim.schedule.next(claim.cursor) + offset;
    return { created: run, nextDue };
  }

  /**
   * Records that an attempt begins on this process (the run row `started`, the attempt and its process in the log),
   * before the scheduler hands it to the executor: an attempt the database refuses (a stale claim) never runs, and
   * one it recorded counts when a lost process's runs are settled.
   */
  async startRun(taskId: string, runId: string, attempt: number, now: number): Promise<void> {
    const fence = this.#c.claims.run(runId);
    if (fence === undefined || fence.claim.taskId !== taskId) throw new InvalidStateError(`Expected run "${runId}" of task "${taskId}" to have been handed out here, but it was not`);
    const { claim } = fence;
    const outcome = await claim.queueStart(() => fence.queue(async () => {
      if (!claim.current) return 'stale';
      if (attempt === 1 && fence.firstStartWritten) {
        // Its creation wrote this start (at the creation's time), under the same claim.
        fence.firstStartWritten = false;
        return 'ok';
      }
      return this.#c.writes.start(claim, runId, attempt, now);
    }));
    if (outcome === 'stale') throw this.#stale(claim);
    if (outcome !== 'ok') throw new InvalidStateError(`Expected run "${runId}" of task "${taskId}" to be live under this claim, but the database has no such run`);
    fence.startedAttempt = attempt;
  }

  /**
   * The run ended: its row done and `latest_completed` moved, with the final status logged in the same write when
   * `ending` says it. A run whose claim is gone here changes nothing (the process that claims the task next settles
   * it); one the database refuses as stale rejects with `TaskNotClaimedError`.
   */
  async finishRun(taskId: string, runId: string, ending?: RunEnding): Promise<void> {
    const fence = this.#c.claims.run(runId);
    if (fence === undefined || fence.claim.taskId !== taskId || !fence.claim.current) return;
    const { claim } = fence;
    if (ending?.status === RunStatus.CANCELED && fence.startedAttempt === 0) {
      await this.#requeue(fence);
      return;
    }
    const error = ending?.error === undefined ? null : encodeError(ending.error);
    const value = ending === undefined ? null : storableValue(ending.value, this.#c);
    const outcome = await fence.queue(async () => {
      if (!claim.current) return 'lost';
      return this.#c.writes.finish(claim, {
        runId,
        status: ending?.status ?? null,
        when: ending?.when ?? null,
        attempt: ending?.attempt ?? null,
        error,
        value,
      });
    });
    if (outcome === 'stale') throw this.#stale(claim);
    if (outcome === 'ok' && ending !== undefined) fence.finalized = true;
  }

  /**
   * A run canceled before any attempt of it began here (its claim is being handed over, its scheduler stops) is not
   * over: it is queued again for whoever holds the claim next, so that its scheduled time still runs, and nothing
   * final is logged for it.
   */
  async #requeue(fence: RunFence): Promise<void> {
    const { claim } = fence;
    const outcome = await fence.queue(async () => {
      if (!claim.current) return 'lost';
      // A start its creation wrote is taken back with it.
      const sql = fence.firstStartWritten ? this.#c.queries.unstartRun : this.#c.queries.requeueRun;
      const [row] = await this.#c.db.query<{ outcome: string }>(
        sql,
        [claim.taskId, claim.epoch, claim.member, fence.runId],
        'a run given up before it began',
      );
      return row?.outcome;
    });
    if (outcome === 'stale') throw this.#stale(claim);
    fence.finalized = true;
    fence.firstStartWritten = false;
    if (outcome === 'ok') claim.queued++;
  }

  /** Queues a manual run under the run key: `DuplicateRunError` while a run for that time lives. */
  async forceRun(taskId: string, scheduledFor: number, now: number): Promise<QueuedRun> {
    checkTime('scheduledFor', scheduledFor);
    checkTime('now', now);
    const claim = this.#claimOf(taskId);
    const runId = randomUUID();
    const [row] = await this.#c.db.query<{ outcome: string }>(
      this.#c.queries.forceRun,
      [taskId, claim.epoch, claim.member, scheduledFor, now, runId, now, this.#c.runLogLimit],
      'a manual run',
    );
    if (row?.outcome === 'stale') throw this.#stale(claim);
    if (row?.outcome === 'duplicate') throw new DuplicateRunError(taskId, scheduledFor);
    claim.queued++;
    return Object.freeze({ taskId, runId, scheduledFor, runAt: now });
  }

  #claimOf(taskId: string): HeldClaim {
    if (typeof taskId !== 'string') throw new InvalidArgumentError('taskId', 'a task id', taskId);
    const claim = this.#c.claims.scheduling(taskId);
    if (claim === undefined) throw new TaskNotClaimedError(taskId);
    return claim;
  }

  #stale(claim: HeldClaim): TaskNotClaimedError {
    this.#c.staleClaim(claim);
    return staleClaimError(claim);
  }
}

/** The value as stored, or null when it has none or the database cannot hold it (shared memory). */
export function storableValue(value: unknown, context: TaskStoreContext): Buffer | null {
  if (value === undefined) return null;
  try {
    return encodeValue(value);
  } catch (error) {
    context.logger.warn({ err: error }, 'a run value cannot be stored in the run log; it is left out');
    return null;
  }
}

function checkTime(name: string, value: unknown): void {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new InvalidArgumentError(name, 'a finite time in epoch milliseconds', value);
  }
}
