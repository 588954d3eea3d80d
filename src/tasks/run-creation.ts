/**
 * How a runner gets its run (`scheduler.go`'s `startFromWorking`): with its slot claimed, it asks the desired state
 * for the task's next due run, then executes it, or, when the answer is a failure, files the task for later (at the
 * time a "not yet due" names, else after the task's error backoff, so a failing store is not asked every tick).
 *
 * Invariants: one creation at a time per task (`activity.creating`); a run created for a claim that is no longer
 * current, or while the scheduler is stopping, ends `canceled` at once; a manual run queued while a creation was
 * pending makes the task due now, whatever the (older) answer says.
 */
import { Backoff } from '../backoff.js';
import { describeValue, InvalidStateError, RunNotYetDueError, type RunCanceledError } from '../errors.js';
import type { ActiveRun } from './active-run.js';
import type { ClaimedTasks } from './claimed-tasks.js';
import { isPromiseLike, settle, type MaybePromise } from './maybe-promise.js';
import type { RunLifecycle } from './run-lifecycle.js';
import type { SchedulerOperation } from './scheduler-metrics.js';
import type { ResolvedTaskSchedulerOptions } from './scheduler-options.js';
import type { TaskActivities } from './task-activities.js';
import { RunStatus, type QueuedRun, type RunCreation } from './types.js';

/** What the creation needs of its scheduler. */
export interface CreationHost {
  readonly options: ResolvedTaskSchedulerOptions;
  readonly claims: ClaimedTasks;
  readonly activities: TaskActivities;
  readonly runs: RunLifecycle;
  readonly internalHandler: (error: unknown) => void;
  latestNow(): number;
  isCurrent(run: ActiveRun): boolean;
  canRun(): boolean;
  write(run: ActiveRun, status: RunStatus, when: number, error: Error | undefined, value: unknown): void;
  canceledError(run: ActiveRun): RunCanceledError;
  reportError(taskId: string, operation: SchedulerOperation, error: unknown, facts: Record<string, unknown>): void;
  /** Works the task again with the latest now (its creation answered later than it was asked). */
  continueWork(index: number): void;
  checkStopped(): void;
}

export class RunCreator {
  readonly #host: CreationHost;

  constructor(host: CreationHost) {
    this.#host = host;
  }

  /**
   * Asks for the due run of `run`'s task at `now` and executes it. True when a run started synchronously (the
   * runner is working and the next runner may try); false when it went idle or the desired state answers
   * asynchronously (the answer continues the work).
   */
  start(run: ActiveRun, now: number): boolean {
    let creation: MaybePromise<RunCreation>;
    try {
      creation = this.#host.options.desiredState.createNextRun(run.task.id, now);
    } catch (error) {
      this.#failed(run, error, now, false);
      return false;
    }
    if (isPromiseLike(creation)) {
      settle(
        creation,
        (created) => this.#created(run, created, now, true),
        (error) => this.#failed(run, error, now, true),
        this.#host.internalHandler,
      );
      return false;
    }
    return this.#created(run, creation, now, false);
  }

  #created(run: ActiveRun, creation: RunCreation, askedAt: number, async: boolean): boolean {
    const host = this.#host;
    const activity = host.activities.get(run.index)!;
    activity.creating = false;
    const created = creation?.created;
    if (!isQueuedRun(created) || typeof creation.nextDue !== 'number' || Number.isNaN(creation.nextDue)) {
      const error = new InvalidStateError(`Expected createNextRun to return { created: QueuedRun, nextDue }, got ${describeValue(creation)}`);
      this.#failed(run, error, askedAt, async);
      return false;
    }
    run.run = created;
    // A resumed run continues its attempt count (its lost attempt counted against `retry`).
    run.attempt = created.attempts ?? 0;
    const current = host.isCurrent(run);
    const now = async ? host.latestNow() : askedAt;
    if (current) {
      let nextDue = creation.nextDue;
      if (activity.forced) nextDue = Math.min(nextDue, now);
      activity.forced = false;
      activity.errorBackoff = undefined;
      host.claims.setNextDue(run.index, nextDue);
    }
    host.write(run, RunStatus.SCHEDULED, now, undefined, undefined);
    if (run.canceled || !current || !host.canRun()) {
      host.runs.end(run, RunStatus.CANCELED, host.canceledError(run), undefined, undefined);
      return false;
    }
    host.runs.execute(run);
    if (async) host.continueWork(run.index);
    return true;
  }

  #failed(run: ActiveRun, error: unknown, askedAt: number, async: boolean): void {
    const host = this.#host;
    const index = run.index;
    const activity = host.activities.get(index)!;
    activity.creating = false;
    host.activities.removeRun(run);
    if (host.isCurrent(run)) {
      const now = async ? host.latestNow() : askedAt;
      const dueAt = notYetDueAt(error);
      if (dueAt !== undefined && dueAt > askedAt) {
        host.claims.setNextDue(index, activity.forced ? Math.min(dueAt, now) : dueAt);
        activity.errorBackoff = undefined;
      } else {
        // A real failure (or a "not yet due" for a time that is due): back off instead of asking every tick.
        const backoff = (activity.errorBackoff ??= new Backoff(host.options.backoff, { clock: host.options.clock }));
        const delay = Math.max(1, backoff.nextDelay());
        host.claims.setNextDue(index, now + delay);
        host.reportError(run.task.id, 'create_run', error, { retryInMs: delay });
      }
      activity.forced = false;
    }
    host.activities.tidy(index);
    if (async) host.continueWork(index);
    host.checkStopped();
  }
}

function isQueuedRun(value: unknown): value is QueuedRun {
  if (value === null || typeof value !== 'object') return false;
  const run = value as Record<string, unknown>;
  const attempts = run['attempts'];
  return (
    typeof run['taskId'] === 'string' &&
    typeof run['runId'] === 'string' &&
    typeof run['scheduledFor'] === 'number' &&
    typeof run['runAt'] === 'number' &&
    (attempts === undefined || (typeof attempts === 'number' && Number.isInteger(attempts) && attempts >= 0))
  );
}

function notYetDueAt(error: unknown): number | undefined {
  if (error instanceof RunNotYetDueError) return error.dueAt;
  // An error that crossed a boundary (a durable backend, a thread) keeps its code but not its class.
  const { code, dueAt, details } = (error ?? {}) as { code?: unknown; dueAt?: unknown; details?: { dueAt?: unknown } };
  if (code !== 'ERR_RUN_NOT_YET_DUE') return undefined;
  const at = typeof dueAt === 'number' ? dueAt : details?.dueAt;
  return typeof at === 'number' && !Number.isNaN(at) ? at : undefined;
}
