/**
 * Every SQL text the PostgreSQL state store sends: the replica's loads and catch-ups (`PgState`) and the plan
 * committer's commits (`PgPlans`), built once per schema from its quoted name (`SchemaNames.S`), never from input:
 * what varies goes as parameters. Each text is named after what it does; the locks and checks of a commit live in
 * the schema's functions it calls.
 */

/** Log rows read per query while catching up. */
export const CATCH_UP_ROWS = 1_000;

/** How long the check of a cut-off commit waits for that transaction to end on the server. */
const CUT_OFF_LOCK_TIMEOUT_MS = 5000;

export interface StateQueries {
  /** Makes the transaction one read-only snapshot (a load reads the counter and the records as of one moment). */
  readonly readOnlySnapshot: string;
  /** The state counter: the index of the latest commit. */
  readonly counter: string;
  /** Every record of tables `$1`. */
  readonly records: string;
  /** Up to `CATCH_UP_ROWS` log rows after index `$1`, in index order. */
  readonly logAfter: string;
  /** Locks the counter, then jobs `($3, $4)` and the live deliveries among `$5`; up to `$2` log rows after `$1`. */
  readonly openCommit: string;
  /** Writes a batch's records and log rows and moves the counter from `$11` to `$12`; acks deliveries `$13`. */
  readonly commitBatch: string;
  /** Why token `$2` is not evaluation `$1`'s current delivery, and whether its lease is over. */
  readonly fenceRefusal: string;
  /** Bounds how long the transaction waits for a lock (the check of a cut-off commit). */
  readonly cutOffLockTimeout: string;
  /** Share-locks the counter row: waits for the transaction that holds it to end. */
  readonly counterShared: string;
  /** The log rows of plans `$1`. */
  readonly logOfPlans: string;
}

export function stateQueries(S: string): StateQueries {
  return {
    readOnlySnapshot: 'SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY',
    counter: `SELECT index FROM ${S}.state_counter`,
    records: `SELECT tbl, key, value, create_index, modify_index FROM ${S}.state_records WHERE tbl = ANY($1::text[])`,
    logAfter: `SELECT index, changes FROM ${S}.state_log WHERE index > $1 ORDER BY index LIMIT ${CATCH_UP_ROWS}`,
    openCommit: `SELECT * FROM ${S}.open_commit($1, $2, $3::text[], $4::text[], $5::text[])`,
    commitBatch: `SELECT * FROM ${S}.commit_batch($1::text[], $2::text[], $3::bytea[], $4::bigint[], $5::bigint[], $6::text[], $7::text[],
         $8::bigint[], $9::uuid[], $10::bytea[], $11, $12, $13::text[], $14::text[], $15::bytea[], $16::bigint[], $17::int[], $18)`,
    fenceRefusal: `SELECT ${S}.refusal(e, $2) AS refusal, (e.lease_until <= clock_timestamp()) AS expired FROM ${S}.evals e WHERE e.id = $1`,
    cutOffLockTimeout: `SET LOCAL lock_timeout = '${CUT_OFF_LOCK_TIMEOUT_MS}ms'`,
    counterShared: `SELECT index FROM ${S}.state_counter FOR SHARE`,
    logOfPlans: `SELECT plan_id, index, changes FROM ${S}.state_log WHERE plan_id = ANY($1::uuid[])`,
  };
}
