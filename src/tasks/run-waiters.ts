/**
 * The outcomes of manual runs (`forceRun`, `retryRun`): each one's `done` settles when the run ends, with its
 * `RunResult` on success and its error otherwise. Only manual runs are here, so a scheduled run costs nothing, and
 * an entry leaves when its run ends or is given up.
 */
import type { FinalRunStatus, ForcedRun, QueuedRun, RunResult } from './types.js';

interface Waiter {
  readonly resolve: (result: RunResult) => void;
  readonly reject: (error: Error) => void;
}

const ignore = (): void => undefined;

export class RunWaiters {
  /** taskId → runId → waiter. */
  readonly #byTask = new Map<string, Map<string, Waiter>>();
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** The run as `forceRun` returns it: its fields, and `done` (not enumerable: a copy of the run is the run). */
  add(run: QueuedRun): ForcedRun {
    let resolve!: (result: RunResult) => void;
    let reject!: (error: Error) => void;
    const done = new Promise<RunResult>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // A caller may never look at `done`: a failed run must not surface as an unhandled rejection.
    done.catch(ignore);
    let runs = this.#byTask.get(run.taskId);
    if (runs === undefined) this.#byTask.set(run.taskId, (runs = new Map()));
    if (!runs.has(run.runId)) this.#size++;
    runs.set(run.runId, { resolve, reject });
    const forced = { taskId: run.taskId, runId: run.runId, scheduledFor: run.scheduledFor, runAt: run.runAt };
    return Object.defineProperty(forced, 'done', { value: done, enumerable: false }) as ForcedRun;
  }

  /** A run ended with its final status (`error` is set unless it succeeded). */
  settle(taskId: string, runId: string, status: FinalRunStatus, error: Error | undefined, value: unknown): void {
    const waiter = this.#take(taskId, runId);
    if (waiter === undefined) return;
    if (status === 'success') waiter.resolve(value === undefined ? {} : { value });
    else waiter.reject(error ?? new Error(`run ${runId} of task ${taskId} ended ${status}`));
  }

  /** Rejects every waiter (of `taskId`, or of every task) with `reason(run)`; returns how many. */
  rejectAll(reason: (run: { readonly taskId: string; readonly runId: string }) => Error, taskId?: string): number {
    let count = 0;
    for (const [task, runs] of this.#byTask) {
      if (taskId !== undefined && task !== taskId) continue;
      for (const [runId, waiter] of runs) {
        waiter.reject(reason({ taskId: task, runId }));
        count++;
      }
      this.#byTask.delete(task);
    }
    this.#size -= count;
    return count;
  }

  #take(taskId: string, runId: string): Waiter | undefined {
    const runs = this.#byTask.get(taskId);
    const waiter = runs?.get(runId);
    if (waiter === undefined) return undefined;
    runs!.delete(runId);
    if (runs!.size === 0) this.#byTask.delete(taskId);
    this.#size--;
    return waiter;
  }
}
