import { InvalidArgumentError } from '../errors.js';
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

interface MutableRun {
  readonly taskId: string;
  readonly runId: string;
  scheduledFor: number;
  runAt: number;
  status: RunStatus;
  finalStatus: FinalRunStatus | undefined;
  attempts: number;
  error: Error | undefined;
  readonly history: RunStateChange[];
}

/**
 * An in-memory, queryable run log: every state change of every run, bounded per task.
 *
 * It records what it is told, including mistakes: a second final status is kept in `history` (while
 * `finalStatus` stays the first), so tests can assert that each run logged exactly one.
 */
export class MemoryRunLog implements LogWriter {
  readonly #maxRunsPerTask: number;
  // Per task, runs in creation order (a Map keeps insertion order, so the oldest is the first key).
  readonly #runs = new Map<string, Map<string, MutableRun>>();

  constructor(options: MemoryRunLogOptions = {}) {
    const max = options.maxRunsPerTask ?? memoryRunLogDefaults.maxRunsPerTask;
    if (!Number.isInteger(max) || max < 1) throw new InvalidArgumentError('maxRunsPerTask', 'a positive integer', max);
    this.#maxRunsPerTask = max;
  }

  updateRunState(task: Task, runId: string, when: number, status: RunStatus, details?: RunStateDetails): void {
    let runs = this.#runs.get(task.id);
    if (runs === undefined) {
      runs = new Map();
      this.#runs.set(task.id, runs);
    }
    let run = runs.get(runId);
    if (run === undefined) {
      run = {
        taskId: task.id,
        runId,
        scheduledFor: details?.scheduledFor ?? NaN,
        runAt: details?.runAt ?? NaN,
        status,
        finalStatus: undefined,
        attempts: 0,
        error: undefined,
        history: [],
      };
      runs.set(runId, run);
      this.#trim(runs);
    } else if (details !== undefined) {
      run.scheduledFor = details.scheduledFor;
      run.runAt = details.runAt;
    }
    const attempt = details?.attempt ?? run.attempts;
    const change: RunStateChange =
      details?.error === undefined ? { status, when, attempt } : { status, when, attempt, error: details.error };
    run.history.push(Object.freeze(change));
    run.status = status;
    if (status === RunStatus.STARTED) run.attempts = Math.max(run.attempts, attempt);
    if (details?.error !== undefined) run.error = details.error;
    if (isFinalStatus(status) && run.finalStatus === undefined) run.finalStatus = status;
  }

  /** Runs of a task, oldest first (snapshots). */
  runs(taskId: string): RunRecord[] {
    const runs = this.#runs.get(taskId);
    return runs === undefined ? [] : [...runs.values()].map(snapshot);
  }

  findRun(taskId: string, runId: string): RunRecord | undefined {
    const run = this.#runs.get(taskId)?.get(runId);
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

  #trim(runs: Map<string, MutableRun>): void {
    if (runs.size <= this.#maxRunsPerTask) return;
    // Drop the oldest ended run; if every run is still live, the oldest one.
    for (const [runId, run] of runs) {
      if (run.finalStatus !== undefined) {
        runs.delete(runId);
        return;
      }
    }
    const oldest = runs.keys().next();
    if (oldest.done !== true) runs.delete(oldest.value);
  }
}

function snapshot(run: MutableRun): RunRecord {
  return Object.freeze({ ...run, history: Object.freeze([...run.history]) });
}
