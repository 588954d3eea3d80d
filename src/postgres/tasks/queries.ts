/**
 * Every SQL text the PostgreSQL task store sends, built once per schema from its quoted name (`SchemaNames.S`),
 * never from input: what varies goes as parameters. Each text is named after what it does; the fence of a write
 * about a run (the claim is the member's, its lease live: `task_fence`) lives in the schema's functions it calls.
 */

export interface TaskQueries {
  /** Declares task `$1` with definition `$2` (hash `$3`) into the catalogue; the outcome says whether it changed. */
  readonly declare: string;
  /** Deletes task `$1` everywhere; whether there was one. */
  readonly remove: string;
  /** A batch of creations, starts and finishes of runs (one array per column), each under its own fence. */
  readonly runWrites: string;
  /** Member `$1` leaves: its claims pass on and its membership ends. */
  readonly leave: string;
  /** One claim round of member `$1`: renews its lease, claims and hands over towards its share. */
  readonly cycle: string;
  /** The claims member `$1` holds, with their epochs and definitions' hashes. */
  readonly claimsOf: string;
  /** The definitions of tasks `$1`. */
  readonly definitions: string;
  /** Member `$1` gives back its claims on tasks `$2` at epochs `$3`. */
  readonly giveBack: string;
  /** Takes the next queued run of the claim `($1, $2, $3)`. */
  readonly takeQueued: string;
  /** Queues run `$4` again with the start its creation wrote taken back. */
  readonly unstartRun: string;
  /** Queues run `$4`, which no attempt began, again. */
  readonly requeueRun: string;
  /** Queues a manual run of task `$1` for time `$4`, unless a run for that time lives. */
  readonly forceRun: string;
  /** Logs the final status `$5` of run `$4` apart from its finish. */
  readonly logFinal: string;
  /** Run `$4` waits out a backoff before its attempt `$5`, logged with the failed attempt's error `$7`. */
  readonly runRetrying: string;
  /** The run log of task `$1`, newest first. */
  readonly runs: string;
  /** Run `$2` of task `$1` as the run log has it. */
  readonly findRun: string;
}

export function taskQueries(S: string): TaskQueries {
  const log = `${S}.task_run_log`;
  return {
    declare: `SELECT ${S}.task_declare($1, $2, $3, $4, $5, $6) AS outcome`,
    remove: `SELECT ${S}.task_remove($1) AS removed`,
    runWrites: `SELECT i, outcome, latest FROM ${S}.task_run_writes($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[],
      $6::float8[], $7::float8[], $8::float8[], $9::float8[], $10::int[], $11::text[], $12::jsonb[], $13::bytea[], $14)`,
    leave: `SELECT ${S}.task_leave($1)`,
    cycle: `SELECT ${S}.task_cycle($1, $2, $3, $4, $5) AS r`,
    claimsOf: `SELECT s.task_id, s.epoch, t.hash FROM ${S}.task_state s JOIN ${S}.tasks t ON t.id = s.task_id WHERE s.owner = $1`,
    definitions: `SELECT id, definition, hash FROM ${S}.tasks WHERE id = ANY ($1)`,
    giveBack: `SELECT ${S}.task_give_back($1, $2, $3)`,
    takeQueued: `SELECT * FROM ${S}.task_take_queued($1, $2, $3)`,
    unstartRun: `SELECT ${S}.task_unstart_run($1, $2, $3, $4) AS outcome`,
    requeueRun: `SELECT ${S}.task_requeue_run($1, $2, $3, $4) AS outcome`,
    forceRun: `SELECT ${S}.task_force_run($1, $2, $3, $4, $5, $6, $7, $8) AS outcome`,
    logFinal: `SELECT ${S}.task_log_write($1, $2, $3, $4, $5, $6, $7, $8, $9) AS outcome`,
    runRetrying: `SELECT ${S}.task_run_retrying($1, $2, $3, $4, $5, $6, $7) AS outcome`,
    runs: `SELECT * FROM ${log} WHERE task_id = $1 ORDER BY seq DESC`,
    findRun: `SELECT * FROM ${log} WHERE task_id = $1 AND run_id = $2`,
  };
}
