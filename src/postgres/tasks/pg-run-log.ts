/**
 * The shared run log: every process writes the state changes of the runs it runs (fenced by the run's claim, in
 * order per run) and any process reads any task's runs, newest first, bounded per task (`runLogLimit`), with their
 * status, attempts, the process that ran each attempt and the value the handler returned.
 *
 * A run's creation, each attempt's start and its end are logged by the desired state's writes (`task_create_run`,
 * `task_run_started`, `task_finish_run`), in the same transactions that decide them; what is left here is the wait
 * before a retry, and what a caller of the desired state that did not go through those wrote.
 */
import { InvalidArgumentError } from '../../errors.js';
import { isStorableKey } from '../../storable-key.js';
import type { Task } from '../../tasks/task.js';
import { isFinalStatus, RunStatus, type LogWriter, type RunRecord, type RunStateDetails } from '../../tasks/types.js';
import { encodeError } from '../codec.js';
import type { RunFence } from './held-claims.js';
import { storableValue } from './pg-desired-state.js';
import { runRecord, type RunLogRow } from './run-record.js';
import { staleClaimError, type TaskStoreContext } from './store-context.js';

export class PgRunLog implements LogWriter {
  readonly #c: TaskStoreContext;

  constructor(context: TaskStoreContext) {
    this.#c = context;
  }

  /**
   * Records one state change of a run this process runs. Rejects with `TaskNotClaimedError` when the database
   * refuses it as stale; a run whose claim is gone here is not written at all.
   */
  async updateRunState(task: Task, runId: string, when: number, status: RunStatus, details?: RunStateDetails): Promise<void> {
    const fence = this.#c.claims.run(runId);
    if (fence === undefined || fence.claim.taskId !== task.id) return;
    const attempt = details?.attempt ?? 0;
    if (isFinalStatus(status)) {
      // The last write about the run: its fence goes once it (or the finish before it) is done.
      try {
        if (!fence.finalized) await this.#write(fence, this.#c.queries.logFinal, [status, when, attempt, errorOf(details), storableValue(details?.value, this.#c)]);
      } finally {
        this.#c.claims.deleteRun(fence);
      }
      return;
    }
    // A start is recorded by the desired state's `startRun`, which the scheduler awaits before the attempt begins.
    if (status === RunStatus.STARTED) return;
    // `scheduled`: at creation it is logged already; before a retry it carries the failed attempt's error.
    if (details?.error === undefined) return;
    await this.#write(fence, this.#c.queries.runRetrying, [attempt, when, errorOf(details)]);
  }

  /** Runs `sql` with the run's fence (`$1`–`$4`) and `args` after it. */
  async #write(fence: RunFence, sql: string, args: readonly unknown[]): Promise<void> {
    const { claim } = fence;
    const outcome = await fence.queue(async () => {
      if (!claim.current) return 'lost';
      const [row] = await this.#c.db.query<{ outcome: string }>(
        sql,
        [claim.taskId, claim.epoch, claim.member, fence.runId, ...args],
        'a run log write',
      );
      return row?.outcome;
    });
    if (outcome === 'stale') {
      this.#c.staleClaim(claim);
      throw staleClaimError(claim);
    }
  }

  /** The runs of a task, newest first, as any process logged them (at most `runLogLimit` of the ended ones). */
  async runs(taskId: string): Promise<RunRecord[]> {
    if (typeof taskId !== 'string') throw new InvalidArgumentError('taskId', 'a task id', taskId);
    // No task has an id that is not a key (storable-key.ts): nothing to look up, and text could not carry it.
    if (!isStorableKey(taskId)) return [];
    const rows = await this.#c.db.query<RunLogRow>(this.#c.queries.runs, [taskId], 'the run log');
    return rows.map(runRecord);
  }

  async findRun(taskId: string, runId: string): Promise<RunRecord | undefined> {
    if (typeof taskId !== 'string') throw new InvalidArgumentError('taskId', 'a task id', taskId);
    if (typeof runId !== 'string') throw new InvalidArgumentError('runId', 'a run id', runId);
    if (!isStorableKey(taskId) || !isStorableKey(runId)) return undefined;
    const [row] = await this.#c.db.query<RunLogRow>(this.#c.queries.findRun, [taskId, runId], 'the run log');
    return row === undefined ? undefined : runRecord(row);
  }
}

function errorOf(details: RunStateDetails | undefined): unknown {
  return details?.error === undefined ? null : encodeError(details.error);
}
