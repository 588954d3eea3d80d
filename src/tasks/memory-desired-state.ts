import type { StoredTask } from '../backend/task-backend.js';
import type { Clock } from '../clock.js';
import { DuplicateRunError, InvalidArgumentError, RunNotYetDueError, TaskNotFoundError } from '../errors.js';
import { planNextRun } from './catch-up.js';
import { growFloat64 } from './growable.js';
import { clockOption, optionsObject } from '../option-checks.js';
import type { Schedule } from './schedule/index.js';
import { scheduleOf, taskDefaults, validateTask, validateTaskMeta, type Task } from './task.js';
import type { DesiredState, QueuedRun, RunCreation } from './types.js';

/** Runs of one task that exist right now. Only tasks with some have one of these. */
interface LiveRuns {
  /** Manual runs waiting, oldest first; they go before scheduled runs. */
  readonly queued: QueuedRun[];
  /** Runs handed out by `createNextRun` and not finished. */
  readonly running: QueuedRun[];
}

export interface MemoryDesiredStateOptions {
  /** Time source for `putTask`'s default `latestCompleted`. */
  readonly clock?: Clock;
}

/** A task's progress, as `getMeta` reports it. */
export interface TaskProgress {
  /** Newest scheduled time handed out (or skipped by catch-up). */
  readonly latestScheduled: number;
  /** Newest scheduled time of a finished run. */
  readonly latestCompleted: number;
  /** Manual runs waiting. */
  readonly queued: number;
  /** Runs created and not finished. */
  readonly running: number;
}

/**
 * `putTask`, and a way back: `EngineTasks.add` stores (through `MemoryTaskStore.storeTask`), then claims, and a claim that fails must leave the store as
 * it was. Internal to `src/tasks` (not re-exported): the public face stays `putTask`/`deleteTask`.
 */
export let putTaskUndoably: (store: MemoryDesiredState, task: unknown, meta?: unknown) => StoredTask;

/**
 * The in-memory desired state and task store: InfluxDB's `StoreTaskMeta` logic (`CreateNextRun`, `FinishRun`,
 * manual runs) for many tasks at once, synchronous throughout.
 *
 * Per task it keeps the task, its shared Schedule and two times in typed arrays, indexed by a small integer, so an
 * idle task costs about 60 bytes here; a task with runs in flight or queued also has a small `LiveRuns` object.
 *
 * Rules: the schedule never hands out a scheduled time twice (`latestScheduled` only moves forward), a time with a
 * live (queued or running) run is never handed out again while that run lives, and `forceRun` of such a time
 * throws `DuplicateRunError`. Finishing a run twice, or a run of a deleted task, changes nothing: finishing races
 * with deletion when a task is removed while its canceled runs stop.
 */
export class MemoryDesiredState implements DesiredState {
  readonly #clock: Clock;
  readonly #ids = new Map<string, number>();
  readonly #tasks: Array<Task | undefined> = [];
  readonly #schedules: Array<Schedule | undefined> = [];
  #latestScheduled = new Float64Array(0);
  #latestCompleted = new Float64Array(0);
  readonly #live = new Map<number, LiveRuns>();
  readonly #free: number[] = [];
  #runSeq = 0;

  static {
    putTaskUndoably = (store, task, meta) => store.#putUndoably(task, meta);
  }

  /** Throws `InvalidOptionError` for options that are not an object, or a `clock` that is not a `Clock`. */
  constructor(options?: MemoryDesiredStateOptions) {
    this.#clock = clockOption(optionsObject(options, 'an object like { clock?: Clock }')['clock']);
  }

  /** Tasks stored. */
  get size(): number {
    return this.#ids.size;
  }

  /**
   * Stores (or replaces) a task, validating it synchronously (`InvalidTaskError` naming the field). Returns the
   * validated, frozen task: hand that one to `claimTask` so that both share one copy. A new task starts after
   * `meta.latestCompleted` (default: now); a replaced one keeps its progress, which `meta` can only move forward.
   */
  putTask(task: unknown, meta?: unknown): Task {
    const valid = validateTask(task);
    const { latestCompleted } = validateTaskMeta(meta);
    const schedule = scheduleOf(valid);
    let index = this.#ids.get(valid.id);
    if (index === undefined) {
      index = this.#free.pop() ?? this.#tasks.length;
      this.#ensure(index);
      const start = latestCompleted ?? this.#clock.now();
      this.#latestScheduled[index] = start;
      this.#latestCompleted[index] = start;
      this.#ids.set(valid.id, index);
    } else if (latestCompleted !== undefined && latestCompleted > this.#latestScheduled[index]!) {
      // Forward only: moving back would hand out scheduled times a second time (re-running the past is what
      // `forceRun` is for).
      this.#latestScheduled[index] = latestCompleted;
      this.#latestCompleted[index] = Math.max(this.#latestCompleted[index]!, latestCompleted);
    }
    this.#tasks[index] = valid;
    this.#schedules[index] = schedule;
    return valid;
  }

  /**
   * `putTask`, remembering what it replaces. `undo` removes a task that was new, or puts back a replaced one with
   * its schedule and progress (`putTask` leaves runs alone); it does nothing once the entry has changed again.
   */
  #putUndoably(task: unknown, meta: unknown): StoredTask {
    const valid = validateTask(task); // putTask takes a validated task as is
    const id = valid.id;
    const index = this.#ids.get(id);
    if (index === undefined) {
      const added = this.putTask(valid, meta);
      const undo = (): void => {
        if (this.getTask(id) === added) this.deleteTask(id);
      };
      return { task: added, undo };
    }
    const before = {
      task: this.#tasks[index]!,
      schedule: this.#schedules[index]!,
      latestScheduled: this.#latestScheduled[index]!,
      latestCompleted: this.#latestCompleted[index]!,
    };
    const put = this.putTask(valid, meta);
    const undo = (): void => {
      if (this.#ids.get(id) !== index || this.#tasks[index] !== put) return;
      this.#tasks[index] = before.task;
      this.#schedules[index] = before.schedule;
      this.#latestScheduled[index] = before.latestScheduled;
      this.#latestCompleted[index] = before.latestCompleted;
    };
    return { task: put, undo };
  }

  /** Removes a task with its queued manual runs; false when unknown. */
  deleteTask(id: string): boolean {
    const index = this.#ids.get(id);
    if (index === undefined) return false;
    this.#ids.delete(id);
    this.#tasks[index] = undefined;
    this.#schedules[index] = undefined;
    this.#live.delete(index);
    this.#free.push(index);
    return true;
  }

  getTask(id: string): Task | undefined {
    const index = this.#ids.get(id);
    return index === undefined ? undefined : this.#tasks[index];
  }

  getMeta(id: string): TaskProgress | undefined {
    const index = this.#ids.get(id);
    if (index === undefined) return undefined;
    const live = this.#live.get(index);
    return {
      latestScheduled: this.#latestScheduled[index]!,
      latestCompleted: this.#latestCompleted[index]!,
      queued: live?.queued.length ?? 0,
      running: live?.running.length ?? 0,
    };
  }

  /** Runs of the task created and not yet finished (a copy). */
  runningRuns(id: string): QueuedRun[] {
    const index = this.#ids.get(id);
    return index === undefined ? [] : [...(this.#live.get(index)?.running ?? [])];
  }

  createNextRun(taskId: string, now: number): RunCreation {
    checkTime('now', now);
    const index = this.#indexOf(taskId);
    const task = this.#tasks[index]!;
    const schedule = this.#schedules[index]!;
    const offset = task.offset ?? taskDefaults.offset;
    const live = this.#live.get(index);

    const manual = live?.queued.shift();
    if (manual !== undefined) {
      live!.running.push(manual);
      const nextDue = live!.queued.length > 0 ? now : schedule.next(this.#latestScheduled[index]!) + offset;
      return { created: manual, nextDue };
    }

    const policy = task.catchUp ?? taskDefaults.catchUp;
    for (;;) {
      const plan = planNextRun(schedule, offset, this.#latestScheduled[index]!, now, policy);
      this.#latestScheduled[index] = plan.lastScheduled;
      if (plan.scheduledFor === undefined) throw new RunNotYetDueError(plan.nextDue);
      // A manual run for this very time is alive: one run per scheduled time at once, so the schedule skips it.
      if (live !== undefined && isLive(live, plan.scheduledFor)) continue;
      const created: QueuedRun = Object.freeze({
        taskId,
        runId: this.#newRunId(),
        scheduledFor: plan.scheduledFor,
        runAt: plan.scheduledFor + offset,
      });
      this.#liveOf(index).running.push(created);
      return { created, nextDue: plan.nextDue };
    }
  }

  finishRun(taskId: string, runId: string): void {
    const index = this.#ids.get(taskId);
    if (index === undefined) return;
    const live = this.#live.get(index);
    if (live === undefined) return;
    const at = live.running.findIndex((run) => run.runId === runId);
    if (at < 0) return;
    const [run] = live.running.splice(at, 1);
    if (run!.scheduledFor > this.#latestCompleted[index]!) this.#latestCompleted[index] = run!.scheduledFor;
    if (live.running.length === 0 && live.queued.length === 0) this.#live.delete(index);
  }

  forceRun(taskId: string, scheduledFor: number, now: number): QueuedRun {
    checkTime('scheduledFor', scheduledFor);
    checkTime('now', now);
    const index = this.#indexOf(taskId);
    const live = this.#liveOf(index);
    if (isLive(live, scheduledFor)) {
      if (live.running.length === 0 && live.queued.length === 0) this.#live.delete(index);
      throw new DuplicateRunError(taskId, scheduledFor);
    }
    const run: QueuedRun = Object.freeze({ taskId, runId: this.#newRunId(), scheduledFor, runAt: now });
    live.queued.push(run);
    return run;
  }

  #indexOf(taskId: string): number {
    const index = this.#ids.get(taskId);
    if (index === undefined) throw new TaskNotFoundError(taskId);
    return index;
  }

  #liveOf(index: number): LiveRuns {
    let live = this.#live.get(index);
    if (live === undefined) {
      live = { queued: [], running: [] };
      this.#live.set(index, live);
    }
    return live;
  }

  #newRunId(): string {
    return (++this.#runSeq).toString(36);
  }

  #ensure(index: number): void {
    this.#latestScheduled = growFloat64(this.#latestScheduled, index + 1);
    this.#latestCompleted = growFloat64(this.#latestCompleted, index + 1);
  }
}

function isLive(live: LiveRuns, scheduledFor: number): boolean {
  return live.running.some((run) => run.scheduledFor === scheduledFor) || live.queued.some((run) => run.scheduledFor === scheduledFor);
}

function checkTime(name: string, value: unknown): void {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new InvalidArgumentError(name, 'a finite time in epoch milliseconds', value);
  }
}
