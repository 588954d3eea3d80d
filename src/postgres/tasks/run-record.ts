/** A row of the shared run log as the `RunRecord` every run log answers with. */
import { RunCanceledError, ThreadExitedError } from '../../errors.js';
import type { FinalRunStatus, RunRecord, RunStateChange, RunStatus } from '../../tasks/types.js';
import { decodeError, decodeValue, type StoredError } from '../codec.js';

export type RunLogRow = {
  readonly run_id: string;
  readonly task_id: string;
  readonly scheduled_for: number;
  readonly run_at: number;
  readonly status: RunStatus;
  readonly final_status: FinalRunStatus | null;
  readonly attempts: number;
  readonly processes: string[];
  readonly error: StoredError | null;
  readonly value: Buffer | null;
  readonly history: Array<{ status: RunStatus; when: number; attempt: number; process?: string; error?: StoredError }>;
};

export function runRecord(row: RunLogRow): RunRecord {
  const history: RunStateChange[] = row.history.map((entry) =>
    Object.freeze({
      status: entry.status,
      when: entry.when,
      attempt: entry.attempt,
      ...(entry.error === undefined ? {} : { error: runError(entry.error) }),
      ...(entry.process === undefined ? {} : { process: entry.process }),
    }),
  );
  return Object.freeze({
    taskId: row.task_id,
    runId: row.run_id,
    scheduledFor: row.scheduled_for,
    runAt: row.run_at,
    status: row.status,
    finalStatus: row.final_status ?? undefined,
    attempts: row.attempts,
    error: row.error === null ? undefined : runError(row.error),
    history: Object.freeze(history),
    value: row.value === null ? undefined : decodeValue(row.value),
    processes: Object.freeze([...row.processes]),
  });
}

/** A stored run error as its class where the scheduler or the store made it (`instanceof` holds in any process). */
function runError(stored: StoredError): Error {
  const details = stored.details ?? {};
  let error: Error;
  switch (stored.code) {
    case 'ERR_THREAD_EXITED':
      error = new ThreadExitedError(stored.message ?? '', { details });
      break;
    case 'ERR_RUN_CANCELED':
      error = new RunCanceledError(String(details['taskId'] ?? ''), String(details['runId'] ?? ''));
      break;
    default:
      return decodeError(stored);
  }
  if (stored.message !== undefined) error.message = stored.message;
  if (stored.stack !== undefined) error.stack = stored.stack;
  return error;
}
