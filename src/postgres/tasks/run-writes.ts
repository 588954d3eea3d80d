/**
 * The writes about runs of one process, sent together. Every creation, start and finish asked for in one turn of the
 * event loop, and every one asked for while a batch is on its way, goes to the database in one statement
 * (`task_run_writes`: one round trip, one transaction). At a thousand runs a second a process would otherwise pay
 * three round trips and three commits per run; batched, what it pays grows with the batches, not with the runs.
 *
 * Invariants:
 * - Each write is its single function of the schema, with the same fence and the same outcome, whichever batch it
 *   went in: batching changes how writes travel, never what they decide.
 * - At most one batch is in flight per process; the next one forms meanwhile. Within a batch the writes are ordered
 *   by task id (stable: one task's writes keep the order they were asked in), so batches of different processes
 *   take claim rows in one order.
 * - A batch the database refused (a deadlock with a takeover, a value it cannot take) rolled back whole: each of its
 *   writes is sent again on its own, so that only the one at fault fails. A batch whose connection broke may have
 *   committed: its writes reject with the `BackendUnavailableError`, as a single write would, and their callers
 *   resolve that as they already do (a creation re-plans and finds its time taken, a start and a finish are
 *   idempotent).
 */
import { BackendUnavailableError } from '../../errors.js';
import type { Database } from '../database.js';
import type { TaskQueries } from './queries.js';

/** Most writes in one statement. */
const MAX_BATCH = 500;

export type CreateOutcome = {
  readonly outcome: 'stale' | 'moved' | 'exists' | 'created';
  readonly latest: number | null;
};

/** Who writes: the claim (task, epoch) and the member holding it, which the database's fence checks. */
export interface WriteFence {
  readonly taskId: string;
  readonly epoch: number;
  readonly member: string;
}

export interface CreateWrite {
  readonly runId: string;
  /** `latest_scheduled` as this claim last saw it: the compare-and-set's expected value. */
  readonly expected: number;
  readonly scheduledFor: number;
  readonly runAt: number;
  readonly when: number;
}

export interface FinishWrite {
  readonly runId: string;
  /** The final status to log with the finish, or null to log nothing final. */
  readonly status: string | null;
  readonly when: number | null;
  readonly attempt: number | null;
  readonly error: unknown;
  readonly value: Buffer | null;
}

type Kind = 'create-start' | 'start' | 'finish';

/** What a write carries besides its kind and fence; a field a kind does not use is absent (sent as NULL). */
interface WriteFields {
  readonly runId: string;
  readonly expected?: number;
  readonly scheduledFor?: number;
  readonly runAt?: number;
  readonly when?: number | null;
  readonly attempt?: number | null;
  readonly status?: string | null;
  readonly error?: unknown;
  readonly value?: Buffer | null;
}

interface PendingWrite {
  readonly kind: Kind;
  readonly fence: WriteFence;
  readonly fields: WriteFields;
  readonly resolve: (row: CreateOutcome) => void;
  readonly reject: (error: unknown) => void;
}

export class RunWrites {
  readonly #db: Database;
  readonly #sql: string;
  readonly #runLogLimit: number;
  readonly #queue: PendingWrite[] = [];
  #sending = false;
  #statements = 0;

  constructor(db: Database, queries: TaskQueries, runLogLimit: number) {
    this.#db = db;
    this.#runLogLimit = runLogLimit;
    this.#sql = queries.runWrites;
  }

  /** Statements sent so far (batches, and the writes of a refused batch sent again alone). */
  get statements(): number {
    return this.#statements;
  }

  /** The next scheduled run, with its first attempt begun here: `task_create_started_run`'s outcome. */
  createStarted(fence: WriteFence, write: CreateWrite): Promise<CreateOutcome> {
    return this.#push('create-start', fence, write);
  }

  /** An attempt begins here: `task_run_started`'s outcome ('stale', 'gone' or 'ok'). */
  async start(fence: WriteFence, runId: string, attempt: number, when: number): Promise<string> {
    return (await this.#push('start', fence, { runId, attempt, when })).outcome;
  }

  /** The run ended: `task_finish_run`'s outcome ('stale', 'gone' or 'ok'). */
  async finish(fence: WriteFence, write: FinishWrite): Promise<string> {
    return (await this.#push('finish', fence, write)).outcome;
  }

  #push(kind: Kind, fence: WriteFence, fields: WriteFields): Promise<CreateOutcome> {
    return new Promise<CreateOutcome>((resolve, reject) => {
      this.#queue.push({ kind, fence, fields, resolve, reject });
      // The rest of this turn's writes join it; while a batch is in flight, the loop below takes them next.
      if (this.#queue.length === 1 && !this.#sending) queueMicrotask(() => void this.#sendAll());
    });
  }

  async #sendAll(): Promise<void> {
    if (this.#sending) return;
    this.#sending = true;
    try {
      while (this.#queue.length > 0) await this.#send(this.#queue.splice(0, MAX_BATCH));
    } finally {
      this.#sending = false;
    }
  }

  /** Sends `batch` as one statement and settles each write; never rejects. */
  async #send(batch: PendingWrite[]): Promise<void> {
    if (batch.length > 1) batch = orderByTask(batch);
    const column = <T>(pick: (fields: WriteFields) => T | undefined): Array<T | null> => batch.map((w) => pick(w.fields) ?? null);
    let rows: Array<{ i: number; outcome: CreateOutcome['outcome']; latest: number | null }>;
    this.#statements++;
    try {
      rows = await this.#db.query(
        this.#sql,
        [
          batch.map((w) => w.kind),
          batch.map((w) => w.fence.taskId),
          batch.map((w) => w.fence.epoch),
          batch.map((w) => w.fence.member),
          column((f) => f.runId),
          column((f) => f.expected),
          column((f) => f.scheduledFor),
          column((f) => f.runAt),
          column((f) => f.when),
          column((f) => f.attempt),
          column((f) => f.status),
          column((f) => (f.error === null || f.error === undefined ? undefined : JSON.stringify(f.error))),
          column((f) => f.value),
          this.#runLogLimit,
        ],
        batch.length === 1 ? `a run ${batch[0]!.kind}` : `${batch.length} run writes`,
      );
    } catch (error) {
      if (batch.length === 1 || error instanceof BackendUnavailableError) {
        for (const w of batch) w.reject(error);
        return;
      }
      // Refused whole, so nothing of it landed: each alone, in the same order, and only the one at fault fails.
      for (const w of batch) await this.#send([w]);
      return;
    }
    if (rows.length !== batch.length) {
      const missing = new Error(`Expected task_run_writes to answer ${batch.length} rows, got ${rows.length}`);
      for (const w of batch) w.reject(missing);
      return;
    }
    for (const row of rows) batch[row.i - 1]!.resolve({ outcome: row.outcome, latest: row.latest });
  }
}

/** The writes ordered by task id; one task's writes keep their order. */
function orderByTask(batch: PendingWrite[]): PendingWrite[] {
  // Array.prototype.sort is stable.
  return batch.slice().sort((a, b) => (a.fence.taskId < b.fence.taskId ? -1 : a.fence.taskId > b.fence.taskId ? 1 : 0));
}
