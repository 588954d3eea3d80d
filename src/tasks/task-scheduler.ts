import type { Clock, TimerHandle } from '../clock.js';
import {
  InvalidArgumentError,
  InvalidStateError,
  RunCanceledError,
  TaskAlreadyClaimedError,
  TaskNotClaimedError,
} from '../errors.js';
import { TypedEmitter } from '../events.js';
import { childLogger, type Logger } from '../observability/logger.js';
import type { Registry } from '../observability/metrics.js';
import type { SlotTable } from '../slots/slot-table.js';
import { ActiveRun } from './active-run.js';
import { ClaimedTasks, ClaimState } from './claimed-tasks.js';
import { DueCalendar } from './due-calendar.js';
import { ManualRuns } from './manual-runs.js';
import { isPromiseLike } from './maybe-promise.js';
import type { TaskSchedulerEvents } from './scheduler-events.js';
import { SchedulerMetrics, type SchedulerOperation } from './scheduler-metrics.js';
import { TaskActivities } from './task-activities.js';
import { RunCreator } from './run-creation.js';
import { RunLifecycle, toError } from './run-lifecycle.js';
import { resolveTaskSchedulerOptions, type ResolvedTaskSchedulerOptions, type TaskSchedulerOptions } from './scheduler-options.js';
import { scheduleOf, taskDefaults, validateTask, validateTaskMeta, type Task } from './task.js';
import {
  RunStatus,
  type FinalRunStatus,
  type ForcedRun,
  type LogWriter,
  type RunStateDetails,
} from './types.js';
import { SchedulerState, type SchedulerStateValue, type TaskSchedulerStats, type TaskStats } from './scheduler-state.js';

/**
 * InfluxDB's task scheduler (`task/backend/scheduler.go`), completed where that file leaves TODOs and gaps:
 * `maxConcurrency` is enforced by CAS-claimed runner slots in the shared slot table, retryable results are retried
 * with backoff, released tasks have their runs canceled, and the ticker sleeps until the earliest due time.
 *
 * Shape (`scheduler.go`'s names): `tick(now)` takes the due tasks from the due calendar and `#work`s each, which starts
 * runners while slots are free and runs are due; a runner (`#startFromWorking`) asks the desired state for the
 * next run and executes it; a runner whose run ends tries the next due run with the scheduler's latest `now`.
 *
 * Every created run ends in exactly one final status (`success`, `failed`, `canceled`): it is logged once,
 * `finishRun` is called once, and only then, once the execution has physically stopped, is its slot freed (that
 * lifecycle is `RunLifecycle`'s, in run-lifecycle.ts).
 */
export class TaskScheduler {
  readonly events: TypedEmitter<TaskSchedulerEvents>;
  readonly #o: ResolvedTaskSchedulerOptions;
  readonly #clock: Clock;
  readonly #slots: SlotTable;
  readonly #logger: Logger;
  readonly #metrics: SchedulerMetrics;
  readonly #claims = new ClaimedTasks();
  readonly #calendar = new DueCalendar();
  readonly #activities: TaskActivities;
  readonly #manual: ManualRuns;
  #state: SchedulerStateValue = SchedulerState.IDLE;
  /** The time of the latest tick (`outerScheduler.now` in `scheduler.go`). */
  #now: number;
  /** True once `start()` ran: "now" comes from the clock instead of the last tick. */
  #clockDriven = false;
  #lastTickAt = -Infinity;
  #timer: TimerHandle | undefined;
  #timerDue = Infinity;
  #workDepth = 0;
  readonly #deferred = new Set<number>();
  #drainingDeferred = false;
  #stopped: Promise<void> | undefined;
  #resolveStopped: (() => void) | undefined;
  readonly #onTimer = (): void => {
    this.#timer = undefined;
    this.#timerDue = Infinity;
    if (this.#state !== SchedulerState.RUNNING) return;
    try {
      this.tick(this.#clock.now());
    } catch (error) {
      this.#internal(error);
    }
  };
  readonly #internalHandler = (error: unknown): void => this.#internal(error);
  /** The run lifecycle: execute, attempt ended, retry, cancel, end. */
  readonly #runs: RunLifecycle;
  readonly #creator: RunCreator;

  constructor(options: TaskSchedulerOptions) {
    this.#o = resolveTaskSchedulerOptions(options);
    this.#clock = this.#o.clock;
    this.#slots = this.#o.slots;
    this.#logger = childLogger(this.#o.logger, { component: 'task-scheduler' });
    this.#metrics = new SchedulerMetrics(this.#o.registry, this);
    this.#activities = new TaskActivities(this.#claims, this.#slots);
    this.#now = this.#o.now;
    this.events = new TypedEmitter<TaskSchedulerEvents>(() => this.#logger);
    this.#manual = new ManualRuns({
      claims: this.#claims,
      options: this.#o,
      latestNow: () => this.#latestNow(),
      due: (index, epoch) => this.#forced(index, epoch),
    });
    this.#runs = new RunLifecycle({
      events: this.events,
      options: this.#o,
      clock: this.#clock,
      slots: this.#slots,
      metrics: this.#metrics,
      internalHandler: this.#internalHandler,
      internal: (error) => this.#internal(error),
      latestNow: () => this.#latestNow(),
      write: (run, status, when, error, value, attempt) => this.#write(run, status, when, error, value, attempt),
      canceledError: (run) => this.#canceledError(run),
      reportError: (taskId, operation, error, facts) => this.#reportError(taskId, operation, error, facts),
      isCurrent: (run) => this.#isCurrent(run),
      canRun: () => this.#canRun(),
      freeSlot: (run) => this.#activities.freeSlot(run),
      slotReclaimed: () => this.#activities.slotClaimed(),
      runStopped: (run, status, error, value) => this.#runStopped(run, status, error, value),
    });
    this.#creator = new RunCreator({
      options: this.#o,
      claims: this.#claims,
      activities: this.#activities,
      runs: this.#runs,
      internalHandler: this.#internalHandler,
      latestNow: () => this.#latestNow(),
      isCurrent: (run) => this.#isCurrent(run),
      canRun: () => this.#canRun(),
      write: (run, status, when, error, value) => this.#write(run, status, when, error, value),
      canceledError: (run) => this.#canceledError(run),
      reportError: (taskId, operation, error, facts) => this.#reportError(taskId, operation, error, facts),
      continueWork: (index) => this.#continue(index),
      checkStopped: () => this.#checkStopped(),
    });
  }

  get state(): SchedulerStateValue {
    return this.#state;
  }

  get registry(): Registry {
    return this.#o.registry;
  }

  get slots(): SlotTable {
    return this.#slots;
  }

  get logWriter(): LogWriter {
    return this.#o.logWriter;
  }

  /** The scheduler's current time: the clock once started, else the latest tick. */
  now(): number {
    return this.#latestNow();
  }

  /**
   * Updates the scheduler's time and starts every due run that has a free slot (`scheduler.go` `Tick`). Cost:
   * O(due tasks), plus O(log distinct due times) per instant reached; tasks not due are not touched.
   */
  tick(now: number): void {
    if (typeof now !== 'number' || !Number.isFinite(now)) throw new InvalidArgumentError('now', 'a finite time in epoch ms', now);
    this.#now = now;
    if (!this.#canRun()) return;
    this.#lastTickAt = now;
    let due = 0;
    for (let index = this.#calendar.popDue(now); index >= 0; index = this.#calendar.popDue(now)) {
      due++;
      this.#work(index, now);
    }
    if (this.events.hasListeners('task:tick')) this.events.emit('task:tick', { now, due });
    this.#arm();
  }

  /**
   * Takes control of a task's execution (`scheduler.go` `ClaimTask`). Validates synchronously (`InvalidTaskError`);
   * a second claim of the same id throws `TaskAlreadyClaimedError`. Runs are due for scheduled times after
   * `meta.latestCompleted` (default: now); if one is due already it starts before this returns.
   */
  claimTask(task: unknown, meta?: unknown): void {
    const valid = validateTask(task);
    const { latestCompleted } = validateTaskMeta(meta);
    if (this.#claims.claimedIndex(valid.id) >= 0) throw new TaskAlreadyClaimedError(valid.id);
    const now = this.#latestNow();
    const nextDue = scheduleOf(valid).next(latestCompleted ?? now) + (valid.offset ?? taskDefaults.offset);
    const count = valid.maxConcurrency;
    let index = this.#claims.drainingIndex(valid.id);
    if (index >= 0) {
      // Released, with canceled runs still stopping: the new claim inherits them, so they keep counting against
      // `maxConcurrency` until they stop. A different slot count retires the old range until it is idle.
      const previous = this.#claims.task(index).maxConcurrency;
      let base = this.#claims.slotBase(index);
      if (previous !== count) {
        const fresh = this.#slots.allocate(count); // may throw (table full): nothing has changed yet
        (this.#activities.of(index).retired ??= []).push({ base, count: previous });
        base = fresh;
      }
      this.#claims.reclaim(index, valid, base, nextDue);
    } else {
      index = this.#claims.add(valid, this.#slots.allocate(count), nextDue);
    }
    if (this.events.hasListeners('task:claim')) this.events.emit('task:claim', { taskId: valid.id, nextDue });
    if (nextDue <= now) this.#work(index, now);
    else this.#reschedule(index, now);
    this.#arm();
  }

  /**
   * Replaces the definition of a claimed task from its next run on: runs in flight go on with the definition they
   * started with (and keep counting against `maxConcurrency`), new runs take `task`; a different `maxConcurrency`
   * moves new runs to a fresh slot range (the old one is released once its runs have stopped). The task is asked
   * for its next run at once, so a changed schedule takes effect now. Validates synchronously (`InvalidTaskError`);
   * throws `TaskNotClaimedError` when the id is not claimed, and the slot table's error when it cannot hold the new
   * range (nothing changed then).
   */
  replaceTask(task: unknown): void {
    const valid = validateTask(task);
    const index = this.#claims.claimedIndex(valid.id);
    if (index < 0) throw new TaskNotClaimedError(valid.id);
    const previous = this.#claims.task(index);
    if (previous === valid) return;
    let base = this.#claims.slotBase(index);
    if (previous.maxConcurrency !== valid.maxConcurrency) {
      const fresh = this.#slots.allocate(valid.maxConcurrency); // may throw (table full): nothing has changed yet
      (this.#activities.of(index).retired ??= []).push({ base, count: previous.maxConcurrency });
      base = fresh;
    }
    this.#claims.replace(index, valid, base);
    this.#activities.tidy(index);
    this.#forced(index, this.#claims.epoch(index));
  }

  /**
   * Tells the scheduler that a claimed task has a run due now that it did not ask for (a shared store queued one:
   * a run resumed after its process was lost). No-op for a task that is not claimed.
   */
  markDue(taskId: string): void {
    const index = this.#claims.claimedIndex(taskId);
    if (index >= 0) this.#forced(index, this.#claims.epoch(index));
  }

  /** The ids of the tasks this scheduler has claimed. */
  claimedTaskIds(): string[] {
    return this.#claims.claimedIds();
  }

  /** The definition of a claimed task, or `undefined` when the id is not claimed. */
  claimedTask(taskId: string): Task | undefined {
    const index = this.#claims.claimedIndex(taskId);
    return index < 0 ? undefined : this.#claims.task(index);
  }

  /**
   * Gives up a task (`scheduler.go` `ReleaseTask`): it leaves the calendar at once, and every run in flight is
   * canceled. Throws `TaskNotClaimedError` when not claimed. The promise resolves once those runs have ended
   * (each logged `canceled` and finished) and physically stopped, with their slots free.
   *
   * With `{ cancel: false }` the runs in flight are not canceled but left to end on their own (a hand-over of a
   * task to another process: no new run starts here, and none is cut short); a retryable failure of one of them is
   * then not retried here. The promise resolves once they have ended and stopped.
   */
  releaseTask(taskId: string, options?: { readonly cancel?: boolean }): Promise<void> {
    const index = this.#claims.claimedIndex(taskId);
    if (index < 0) throw new TaskNotClaimedError(taskId);
    const cancel = options?.cancel ?? true;
    if (typeof cancel !== 'boolean') throw new InvalidArgumentError('options.cancel', 'a boolean', cancel);
    this.#calendar.delete(index);
    this.#claims.release(index);
    const activity = this.#activities.get(index);
    const runs = activity === undefined ? [] : [...activity.runs];
    let stopped: Promise<void> = Promise.resolve();
    if (activity !== undefined) {
      // The error backoff belonged to the claim; a re-claim starts fresh.
      activity.errorBackoff = undefined;
      activity.forced = false;
      if (runs.length > 0) {
        const epoch = this.#claims.epoch(index);
        stopped = new Promise<void>((resolve) => (activity.waiters ??= []).push({ epoch, resolve }));
      }
    }
    if (this.events.hasListeners('task:release')) this.events.emit('task:release', { taskId, canceledRuns: cancel ? runs.length : 0 });
    if (cancel) for (const run of runs) this.#runs.cancel(run);
    this.#activities.tidy(index);
    return stopped;
  }

  /**
   * Cancels the runs still ending of a task that was released with `{ cancel: false }` (a hand-over cut short) and
   * resolves once they have stopped; at once when there are none. Throws `InvalidStateError` when the task is
   * claimed (release it instead).
   */
  cancelReleasedRuns(taskId: string): Promise<void> {
    if (this.#claims.claimedIndex(taskId) >= 0) {
      throw new InvalidStateError(`Expected task "${taskId}" to be released before its runs are canceled this way, but it is claimed`);
    }
    const index = this.#claims.drainingIndex(taskId);
    const activity = index < 0 ? undefined : this.#activities.get(index);
    if (activity === undefined || activity.runs.length === 0) return Promise.resolve();
    const epoch = this.#claims.epoch(index);
    const stopped = new Promise<void>((resolve) => (activity.waiters ??= []).push({ epoch, resolve }));
    for (const run of [...activity.runs]) this.#runs.cancel(run);
    this.#activities.tidy(index);
    return stopped;
  }

  /** Queues a manual run of a claimed task, ahead of scheduled runs, with its `done` (see `ManualRuns.forceRun`). */
  forceRun(taskId: string, scheduledFor?: number): Promise<ForcedRun> {
    return this.#manual.forceRun(taskId, scheduledFor);
  }

  /** Runs a logged run's scheduled time again, as a manual run (InfluxDB's `RetryRun`; see `ManualRuns.retryRun`). */
  retryRun(taskId: string, runId: string): Promise<ForcedRun> {
    return this.#manual.retryRun(taskId, runId);
  }

  /**
   * Rejects the `done` of every manual run (of `taskId`, or of every task) not yet ended, for runs that will not run
   * here (their task was deleted, or the scheduler will not start again); answers how many. The runs are not touched.
   */
  rejectForcedRuns(reason: Error | ((run: { readonly taskId: string; readonly runId: string }) => Error), taskId?: string): number {
    return this.#manual.rejectAll(reason, taskId);
  }

  /** Starts the ticker: a tick now, then one at each earliest due time (and at least every `tickMs`). */
  start(): void {
    if (this.#state === SchedulerState.RUNNING) return;
    if (this.#state === SchedulerState.STOPPING) {
      throw new InvalidStateError('Expected the task scheduler to have stopped before start(), but it is stopping');
    }
    this.#clockDriven = true;
    this.#setState(SchedulerState.RUNNING);
    this.tick(this.#clock.now());
  }

  /**
   * Stops the ticker and cancels every run in flight; resolves once they have all ended (logged `canceled`, or
   * whatever they finished with first) and physically stopped. Claims are kept; `start()` resumes.
   */
  stop(): Promise<void> {
    if (this.#state === SchedulerState.STOPPED) return Promise.resolve();
    if (this.#state === SchedulerState.STOPPING) return this.#stopped!;
    this.#setState(SchedulerState.STOPPING);
    this.#disarm();
    this.#stopped = new Promise<void>((resolve) => (this.#resolveStopped = resolve));
    for (const activity of this.#activities.all()) {
      for (const run of [...activity.runs]) this.#runs.cancel(run);
    }
    this.#checkStopped();
    return this.#stopped;
  }

  stats(): TaskSchedulerStats {
    return {
      state: this.#state,
      claimedTasks: this.#claims.claimedCount,
      drainingTasks: this.#claims.drainingCount,
      runsActive: this.#activities.runsActive,
      slotsBusy: this.#activities.slotsBusy,
      scheduledTasks: this.#calendar.size,
      nextDue: this.#calendar.earliest(),
    };
  }

  /** One task's view: claimed or draining (released, runs still stopping); `undefined` when neither. */
  taskStats(taskId: string): TaskStats | undefined {
    let index = this.#claims.claimedIndex(taskId);
    const state = index >= 0 ? 'claimed' : 'draining';
    if (index < 0) index = this.#claims.drainingIndex(taskId);
    if (index < 0) return undefined;
    const activity = this.#activities.get(index);
    let slotsBusy = this.#slots.busy(this.#claims.slotBase(index), this.#claims.task(index).maxConcurrency);
    for (const range of activity?.retired ?? []) slotsBusy += this.#slots.busy(range.base, range.count);
    return { state, nextDue: this.#claims.nextDue(index), runs: activity?.runs.length ?? 0, slotsBusy };
  }

  // ── Work: scheduler.go's taskScheduler.Work / runner.Start / startFromWorking ──────────────────────────────

  /** Starts runners of a task while runs are due and slots are free, then files the task by its next due time. */
  #work(index: number, now: number): void {
    if (this.#claims.state(index) !== ClaimState.CLAIMED) return;
    this.#workDepth++;
    try {
      this.#workOnce(index, now);
    } finally {
      this.#workDepth--;
    }
    if (this.#workDepth === 0 && this.#deferred.size > 0) this.#drainDeferred();
  }

  /**
   * Works tasks whose runs ended while a work cycle was on the stack. A runner that ends synchronously (an
   * executor that throws at once) would otherwise recurse once per backlog entry.
   */
  #drainDeferred(): void {
    if (this.#drainingDeferred) return;
    this.#drainingDeferred = true;
    try {
      for (const index of this.#deferred) {
        this.#deferred.delete(index);
        if (this.#claims.state(index) === ClaimState.CLAIMED) this.#work(index, this.#latestNow());
      }
    } finally {
      this.#drainingDeferred = false;
    }
  }

  #workOnce(index: number, now: number): void {
    if (this.#canRun()) {
      const epoch = this.#claims.epoch(index);
      const task = this.#claims.task(index);
      const count = task.maxConcurrency;
      const base = this.#claims.slotBase(index);
      for (let k = 0; k < count; k++) {
        if (!(this.#claims.nextDue(index) <= now)) break;
        const activity = this.#activities.get(index);
        // One creation at a time per task; runs of a released earlier claim still count (they hold slots).
        if (activity !== undefined && (activity.creating || activity.runs.length >= count)) break;
        const generation = this.#slots.claim(base + k);
        if (generation < 0) continue; // this runner is working
        this.#activities.slotClaimed();
        if (!this.#startFromWorking(index, base + k, generation, now)) break;
        // A listener may have released the task meanwhile.
        if (this.#claims.state(index) !== ClaimState.CLAIMED || this.#claims.epoch(index) !== epoch) return;
      }
    }
    this.#reschedule(index, now);
  }

  /**
   * A runner whose slot is claimed asks the desired state for the due run and executes it. True when a run
   * started synchronously (the runner is working and the next runner may try); false when it went idle or the
   * desired state answers asynchronously (the answer continues the work).
   */
  #startFromWorking(index: number, slot: number, generation: number, now: number): boolean {
    const run = new ActiveRun(index, this.#claims.epoch(index), this.#claims.task(index), slot, generation);
    this.#activities.addRun(run).creating = true;
    return this.#creator.start(run, now);
  }

  /** The run has ended and stopped: free its slot, then let its runner try the next due run. */
  #runStopped(run: ActiveRun, status: FinalRunStatus, error: Error | undefined, value: unknown): void {
    this.#activities.removeRun(run);
    this.#manual.ended(run.run!.taskId, run.run!.runId, status, error, value);
    if (this.events.hasListeners('task:run:finish')) {
      const queued = run.run!;
      this.events.emit('task:run:finish', {
        taskId: queued.taskId,
        runId: queued.runId,
        scheduledFor: queued.scheduledFor,
        status,
        attempts: run.attempt,
        error,
        value,
      });
    }
    const index = run.index;
    this.#activities.tidy(index);
    this.#continue(index);
    this.#checkStopped();
  }

  /** Works a task with the scheduler's latest now (`scheduler.go` hands `startFromWorking` the run's stale one). */
  #continue(index: number): void {
    if (this.#workDepth > 0) {
      this.#deferred.add(index); // the work cycle on the stack takes it when it unwinds
      return;
    }
    if (this.#claims.state(index) === ClaimState.CLAIMED) this.#work(index, this.#latestNow());
    this.#arm();
  }

  /** A manual run was queued: the task is due now. */
  #forced(index: number, epoch: number): void {
    if (this.#claims.state(index) !== ClaimState.CLAIMED || this.#claims.epoch(index) !== epoch) return;
    const now = this.#latestNow();
    const activity = this.#activities.get(index);
    if (activity?.creating === true) activity.forced = true;
    if (this.#claims.nextDue(index) > now) this.#claims.setNextDue(index, now);
    this.#calendar.delete(index);
    this.#work(index, now);
    this.#arm();
  }

  /**
   * Files a claimed task by its next due time. A task due now stays out of the calendar only while it has runs
   * (one of them ending works it again); nothing due is ever left in the calendar of a running scheduler, so a
   * tick cannot spin on it.
   */
  #reschedule(index: number, now: number): void {
    if (this.#claims.state(index) !== ClaimState.CLAIMED) {
      this.#calendar.delete(index);
      return;
    }
    const due = this.#claims.nextDue(index);
    if (due > now) {
      if (due === Infinity) this.#calendar.delete(index);
      else this.#calendar.set(index, due);
      return;
    }
    const activity = this.#activities.get(index);
    if (activity !== undefined && activity.runs.length > 0) {
      this.#calendar.delete(index);
      return;
    }
    if (!this.#canRun()) {
      this.#calendar.set(index, due); // the first tick after start() takes it
      return;
    }
    // Due and idle, yet nothing started: only a misbehaving component gets here. Look again shortly.
    const again = now + Math.max(1, this.#o.backoff.baselineMs);
    this.#claims.setNextDue(index, again);
    this.#calendar.set(index, again);
  }

  // ── Bookkeeping ────────────────────────────────────────────────────────────────────────────────────────────

  #isCurrent(run: ActiveRun): boolean {
    return this.#claims.state(run.index) === ClaimState.CLAIMED && this.#claims.epoch(run.index) === run.epoch;
  }

  #canRun(): boolean {
    return this.#state === SchedulerState.IDLE || this.#state === SchedulerState.RUNNING;
  }

  #latestNow(): number {
    return this.#clockDriven ? this.#clock.now() : this.#now;
  }

  #write(run: ActiveRun, status: RunStatus, when: number, error: Error | undefined, value: unknown, attempt = run.attempt): void {
    const queued = run.run!;
    const details: RunStateDetails =
      error === undefined && value === undefined
        ? { scheduledFor: queued.scheduledFor, runAt: queued.runAt, attempt }
        : { scheduledFor: queued.scheduledFor, runAt: queued.runAt, attempt, error, value };
    try {
      const written = this.#o.logWriter.updateRunState(run.task, queued.runId, when, status, details);
      if (isPromiseLike(written)) {
        written.then(undefined, (writeError: unknown) => this.#reportError(queued.taskId, 'log', writeError, { runId: queued.runId, status }));
      }
    } catch (writeError) {
      this.#reportError(queued.taskId, 'log', writeError, { runId: queued.runId, status });
    }
  }

  #canceledError(run: ActiveRun): RunCanceledError {
    return new RunCanceledError(run.task.id, run.run?.runId ?? '');
  }

  #reportError(taskId: string, operation: SchedulerOperation, error: unknown, facts: Record<string, unknown>): void {
    this.#metrics.errors.inc({ operation });
    this.#logger.warn({ err: error, taskId, operation, ...facts }, `task ${operation} failed`);
    if (this.events.hasListeners('task:error')) this.events.emit('task:error', { taskId, operation, error: toError(error) });
  }

  #internal(error: unknown): void {
    this.#logger.error({ err: error }, 'task scheduler internal error');
  }

  #checkStopped(): void {
    if (this.#state !== SchedulerState.STOPPING || this.#activities.runsActive > 0) return;
    this.#setState(SchedulerState.STOPPED);
    const resolve = this.#resolveStopped;
    this.#resolveStopped = undefined;
    resolve?.();
  }

  #setState(state: SchedulerStateValue): void {
    if (this.#state === state) return;
    this.#state = state;
    if (this.events.hasListeners('task:state')) this.events.emit('task:state', { state });
  }

  // ── Ticker ─────────────────────────────────────────────────────────────────────────────────────────────────

  /**
   * Arms one timer for the earliest due time (capped at `tickMs` after the last tick). Nothing due is ever left
   * in the calendar after a tick, so the timer is never for a time already handled and the ticker cannot spin.
   */
  #arm(): void {
    if (this.#state !== SchedulerState.RUNNING) return;
    let target = this.#calendar.earliest();
    if (this.#o.tickMs > 0 && this.#claims.claimedCount > 0) target = Math.min(target, this.#lastTickAt + this.#o.tickMs);
    if (target === this.#timerDue) return;
    this.#disarm();
    if (target === Infinity) return;
    this.#timerDue = target;
    this.#timer = this.#clock.setTimer(this.#onTimer, target - this.#clock.now());
  }

  #disarm(): void {
    if (this.#timer !== undefined) this.#clock.clearTimer(this.#timer);
    this.#timer = undefined;
    this.#timerDue = Infinity;
  }
}
