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
  /**
   * One claim round of member `$1`: renews its lease, claims and hands over towards its share; a member joining
   * records its host `$6` and pid `$7`; each round, its thread count `$8`.
   */
  readonly cycle: string;
  /** The claims member `$1` holds, with their epochs, definitions' hashes and whether their tasks are disabled. */
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
  /** Disables task `$1` for the whole cluster; whether there is one. */
  readonly disable: string;
  /** Enables task `$1` again from time `$2` on; whether there is one. */
  readonly enable: string;
  /** Every live member: its host, pid, thread count, last renewal (epoch ms) and the tasks it claims. */
  readonly members: string;
  /**
   * The catalogue (task `$1` alone when given): each task's definition, whether it is disabled, its claim's live
   * holder, its runs in flight, and its newest run log row (`run_id` null when it has none).
   */
  readonly catalogue: string;
}

export function taskQueries(S: string): TaskQueries {
  const log = `${S}.task_run_log`;
  return {
    declare: `SELECT ${S}.task_declare($1, $2, $3, $4, $5, $6) AS outcome`,
    remove: `SELECT ${S}.task_remove($1) AS removed`,
    runWrites: `SELECT i, outcome, latest FROM ${S}.task_run_writes($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[],
      $6::float8[], $7::float8[], $8::float8[], $9::float8[], $10::int[], $11::text[], $12::jsonb[], $13::bytea[], $14)`,
    leave: `SELECT ${S}.task_leave($1)`,
    cycle: `SELECT ${S}.task_cycle($1, $2, $3, $4, $5, $6, $7, $8) AS r`,
    claimsOf: `SELECT s.task_id, s.epoch, t.hash, t.disabled FROM ${S}.task_state s JOIN ${S}.tasks t ON t.id = s.task_id WHERE s.owner = $1`,
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
    disable: `SELECT ${S}.task_disable($1) AS found`,
    enable: `SELECT ${S}.task_enable($1, $2) AS found`,
    members: `SELECT m.id, m.host, m.pid, m.threads, extract(epoch FROM m.renewed_at) * 1000 AS last_seen,
        coalesce(array_agg(s.task_id ORDER BY s.task_id) FILTER (WHERE s.task_id IS NOT NULL), '{}') AS claimed
      FROM ${S}.task_members m LEFT JOIN ${S}.task_state s ON s.owner = m.id
      WHERE NOT m.dead AND m.expires_at > now() GROUP BY m.id ORDER BY m.joined_at, m.id`,
    catalogue: `SELECT t.id, t.definition, t.disabled, m.id AS member, m.host, m.pid,
        (SELECT count(*) FROM ${S}.task_runs r WHERE r.task_id = t.id AND r.status IN ('scheduled', 'started'))::int AS active, l.*
      FROM ${S}.tasks t JOIN ${S}.task_state s ON s.task_id = t.id
      LEFT JOIN ${S}.task_members m ON m.id = s.owner AND NOT m.dead AND m.expires_at > now()
      LEFT JOIN LATERAL (SELECT * FROM ${log} g WHERE g.task_id = t.id ORDER BY g.seq DESC LIMIT 1) l ON true
      WHERE $1::text IS NULL OR t.id = $1 ORDER BY t.id`,
  };
}
