import { InvalidOptionError } from '../errors.js';
import { optionsObject } from '../option-checks.js';
import type { Task } from './task.js';
import {
  isFinalStatus,
  RunStatus,
  type FinalRunStatus,
  type LogWriter,
  type RunRecord,
  type RunStateChange,
  type RunStateDetails,
} from './types.js';

export interface MemoryRunLogOptions {
  /** Runs kept per task; older ones are dropped, ended runs first. Default 100. */
  readonly maxRunsPerTask?: number;
}

export const memoryRunLogDefaults = Object.freeze({ maxRunsPerTask: 100 });

/** Status ↔ small integer, for the packed history. */
const STATUSES: readonly RunStatus[] = Object.values(RunStatus);
const CODE = new Map<RunStatus, number>(STATUSES.map((status, code) => [status, code]));
/** Numbers per history entry: status code, when, attempt. */
const ENTRY = 3;
/** The row starts with the run's scheduledFor and runAt; history entries follow. */
const ROW_HEAD = 2;

/**
 * One run's record; mutable inside the log, handed out as frozen snapshots.
 *
 * A log keeps runs for seconds to hours, long enough to be promoted out of V8's young generation, and at thousands
 * of runs per second every retained byte per run lengthens the scavenges that delay due runs. So a run's numbers
 * (its two times, then three numbers per state change) share one array of doubles: no boxed double per time field,
 * no object per change. The array is made with room for the usual three changes (scheduled, started, an end) and
 * grows to exactly what it holds beyond that, never by `push`'s spare capacity, which costs about 40% more bytes per
 * retained run (`tasks.run-log-memory` in the tasks bench).
 */
class MutableRun {
  readonly taskId: string;
  readonly runId: string;
  status: RunStatus;
  finalStatus: FinalRunStatus | undefined = undefined;
  attempts = 0;
  error: Error | undefined = undefined;
  #row: number[];
  /** Numbers of `#row` in use. */
  #used = ROW_HEAD;
  /** Errors by history entry; absent until an entry has one. */
  errors: Array<Error | undefined> | undefined = undefined;

  constructor(taskId: string, runId: string, status: RunStatus, details: RunStateDetails | undefined) {
    this.taskId = taskId;
    this.runId = runId;
    // A literal of numbers: one array of unboxed doubles from the start.
    this.#row = [details?.scheduledFor ?? NaN, details?.runAt ?? NaN, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    this.status = status;
  }

  get scheduledFor(): number {
    return this.#row[0]!;
  }

  get runAt(): number {
    return this.#row[1]!;
  }

  setTimes(scheduledFor: number, runAt: number): void {
    this.#row[0] = scheduledFor;
    this.#row[1] = runAt;
  }

  record(status: RunStatus, when: number, attempt: number, error: Error | undefined): void {
    const at = this.#used;
    if (at + ENTRY > this.#row.length) {
      const grown = new Array<number>(at + ENTRY);
      for (let i = 0; i < at; i++) grown[i] = this.#row[i]!;
      this.#row = grown;
    }
    const row = this.#row;
    row[at] = CODE.get(status)!;
    row[at + 1] = when;
    row[at + 2] = attempt;
    this.#used = at + ENTRY;
    if (error !== undefined) (this.errors ??= [])[(at - ROW_HEAD) / ENTRY] = error;
  }

  history(): RunStateChange[] {
    const row = this.#row;
    const out: RunStateChange[] = [];
    for (let i = ROW_HEAD; i < this.#used; i += ENTRY) {
      const status = STATUSES[row[i]!]!;
      const when = row[i + 1]!;
      const attempt = row[i + 2]!;
      const error = this.errors?.[(i - ROW_HEAD) / ENTRY];
      out.push(Object.freeze(error === undefined ? { status, when, attempt } : { status, when, attempt, error }));
    }
    return out;
  }
}

/**
 * An in-memory, queryable run log: every state change of every run, bounded per task.
 *
 * It records what it is told, including mistakes: a second final status is kept in `history` (while
 * `finalStatus` stays the first), so tests can assert that each run logged exactly one.
 *
 * Per task the runs sit in an array in creation order. Writes almost always concern the newest runs, so the
 * lookup scans from the end (one or two comparisons), which is cheaper than a Map per task in time and memory.
 */
export class MemoryRunLog implements LogWriter {
  readonly #maxRunsPerTask: number;
  readonly #runs = new Map<string, MutableRun[]>();

  /** Throws `InvalidOptionError` for options that are not an object, or a `maxRunsPerTask` that is not a positive integer. */
  constructor(options?: MemoryRunLogOptions) {
    const o = optionsObject(options, 'an object like { maxRunsPerTask?: number }');
    const max = o['maxRunsPerTask'] ?? memoryRunLogDefaults.maxRunsPerTask;
    if (typeof max !== 'number' || !Number.isInteger(max) || max < 1) {
      throw new InvalidOptionError('maxRunsPerTask', 'a positive integer', max);
    }
    this.#maxRunsPerTask = max;
  }

  updateRunState(task: Task, runId: string, when: number, status: RunStatus, details?: RunStateDetails): void {
    let runs = this.#runs.get(task.id);
    if (runs === undefined) {
      runs = [];
      this.#runs.set(task.id, runs);
    }
    let run = find(runs, runId);
    if (run === undefined) {
      run = new MutableRun(task.id, runId, status, details);
      runs.push(run);
      if (runs.length > this.#maxRunsPerTask) trim(runs);
    } else if (details !== undefined) {
      run.setTimes(details.scheduledFor, details.runAt);
    }
    const attempt = details?.attempt ?? run.attempts;
    const error = details?.error;
    run.record(status, when, attempt, error);
    run.status = status;
    if (status === RunStatus.STARTED && attempt > run.attempts) run.attempts = attempt;
    if (error !== undefined) run.error = error;
    if (run.finalStatus === undefined && isFinalStatus(status)) run.finalStatus = status;
  }

  /** Runs of a task, oldest first (snapshots). */
  runs(taskId: string): RunRecord[] {
    return (this.#runs.get(taskId) ?? []).map(snapshot);
  }

  findRun(taskId: string, runId: string): RunRecord | undefined {
    const runs = this.#runs.get(taskId);
    const run = runs === undefined ? undefined : find(runs, runId);
    return run === undefined ? undefined : snapshot(run);
  }

  /** Task ids with logged runs. */
  taskIds(): string[] {
    return [...this.#runs.keys()];
  }

  /** Drops a task's runs (after the task is deleted). */
  forget(taskId: string): void {
    this.#runs.delete(taskId);
  }
}

function find(runs: readonly MutableRun[], runId: string): MutableRun | undefined {
  for (let i = runs.length - 1; i >= 0; i--) if (runs[i]!.runId === runId) return runs[i];
  return undefined;
}

/** Drops the oldest ended run; if every run is still live, the oldest one. */
function trim(runs: MutableRun[]): void {
  const at = runs.findIndex((run) => run.finalStatus !== undefined);
  runs.splice(at < 0 ? 0 : at, 1);
}

function snapshot(run: MutableRun): RunRecord {
  return Object.freeze({
    taskId: run.taskId,
    runId: run.runId,
    scheduledFor: run.scheduledFor,
    runAt: run.runAt,
    status: run.status,
    finalStatus: run.finalStatus,
    attempts: run.attempts,
    error: run.error,
    history: Object.freeze(run.history()),
  });
}
