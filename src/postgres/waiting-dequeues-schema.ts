/**
 * Migration 11: an idle enqueue wakes one waiting process, not all of them.
 *
 * Every process LISTENs on the `ready` channel, and each notification used to send every process with a waiting
 * dequeue to `lease_ready` at once: with three processes idle on two cores, the three statements and their
 * backends contended for the one evaluation, which made the idle hand-off a third slower than with one process.
 *
 * - `waiting_dequeues`: one row per process whose last fetch leased fewer rows than it asked for, with the types it
 *   asked for and until when the row stands (`lease_ready`'s `p_wait_ms`, twice the process's poll interval: its
 *   polls renew it while it waits). A fetch that leases all it asked for removes it, and so does one whose
 *   process's threads have work ahead (it passes 0): a named process should start the evaluation at once. UNLOGGED: it is a hint, rebuilt
 *   by the next fetches, and a crash of the server that empties it only makes the next enqueues notify everyone.
 * - `notify_ready(p_type)`: an enqueue that made exactly one evaluation ready reads the standing row of a process
 *   waiting for its type, the same process while it stands (the first by id: its caches stay warm and the others
 *   stay asleep), and sends that process's id as the payload. It only reads: the rows are the holders' own, kept by
 *   their fetches (one that takes all it asked for, or whose threads have work ahead, stops standing), so an
 *   enqueue never waits for a fetch's row lock nor a fetch for an enqueue's commit. Taking the row instead (a
 *   DELETE … SKIP LOCKED) made the fetches of the PostgreSQL demo wait for enqueue commits: 137–147 acked/s
 *   against 168–188; otherwise, or with no such row, the payload is
 *   empty: everyone. What the other processes do with a notification that names someone else, and a named process
 *   that no longer waits, is the broker's (`PgBroker`): they look too after a short delay, it passes the
 *   notification on to everyone. So a named process that died only delays that evaluation by the short delay.
 *
 * `lease_ready` gains `p_wait_ms` (a new signature whose default, 0, also serves a process of the release before,
 * still running, that calls it with four arguments; the old signature is dropped) and keeps migration 10's
 * asynchronous commit; `enqueue` is version 1's with its last notification replaced. Both are re-given migration 10's plan
 * setting, which a CREATE OR REPLACE drops.
 */
import { genericPlansSchema } from './generic-plans-schema.js';
import { leaseCommitSchema } from './lease-commit-schema.js';
import { schemaV1 } from './schema-v1.js';
import { functionText, replacedOnce } from './sql-text.js';

/** Migration 11's `lease_ready` (a CREATE FUNCTION of its new signature), which later migrations change in turn. */
export function waitingLeaseReady(S: string): string {
  return replacedOnce(
    leaseCommitSchema(S),
    [
      [
        `CREATE OR REPLACE FUNCTION ${S}.lease_ready(p_types text[], p_max integer, p_lease_ms float8, p_holder uuid)`,
        `CREATE FUNCTION ${S}.lease_ready(p_types text[], p_max integer, p_lease_ms float8, p_holder uuid, p_wait_ms float8 DEFAULT 0)`,
      ],
      ['#variable_conflict use_column\nBEGIN', '#variable_conflict use_column\nDECLARE\n  v_leased integer;\nBEGIN'],
      [
        'RETURNING e.id, e.body, e.queue, e.deliveries, e.token, e.priority, e.create_index, e.seq;\n',
        `RETURNING e.id, e.body, e.queue, e.deliveries, e.token, e.priority, e.create_index, e.seq;
  GET DIAGNOSTICS v_leased = ROW_COUNT;
  IF v_leased < p_max AND p_wait_ms > 0 THEN
    INSERT INTO ${S}.waiting_dequeues AS w (holder, types, until)
    VALUES (p_holder, p_types, clock_timestamp() + p_wait_ms * interval '1 millisecond')
    ON CONFLICT (holder) DO UPDATE SET types = EXCLUDED.types, until = EXCLUDED.until;
    -- Rows of processes that ended without leaving (a crash): gone a minute after their time ran out.
    DELETE FROM ${S}.waiting_dequeues w WHERE w.until < clock_timestamp() - interval '1 minute';
  ELSE
    DELETE FROM ${S}.waiting_dequeues w WHERE w.holder = p_holder;
  END IF;
`,
      ],
    ],
    'migration 11: lease_ready',
  );
}

/** Migration 11's `enqueue` (a CREATE OR REPLACE), which later migrations change in turn. */
export function waitingEnqueue(S: string, K: number, channel: (name: string) => string): string {
  return replacedOnce(
    functionText(schemaV1(S, K, channel), S, 'enqueue', 11),
    [[`IF v_any_ready THEN PERFORM pg_notify('${channel('ready')}', ''); END IF;`, `IF v_any_ready THEN PERFORM ${S}.notify_ready(CASE WHEN cardinality(p_ids) = 1 THEN p_types[1] END); END IF;`]],
    'migration 11: enqueue',
  );
}

export function waitingDequeuesSchema(schema: string, S: string, K: number, channel: (name: string) => string): string {
  const ready = channel('ready');
  return `
CREATE UNLOGGED TABLE ${S}.waiting_dequeues (
  holder uuid PRIMARY KEY,
  types text[] NOT NULL,
  until timestamptz NOT NULL
);

-- Wakes one process standing as waiting for p_type (its id as the payload), or everyone ('').
CREATE FUNCTION ${S}.notify_ready(p_type text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_holder uuid;
BEGIN
  IF p_type IS NOT NULL THEN
    SELECT w.holder INTO v_holder FROM ${S}.waiting_dequeues w
     WHERE p_type = ANY(w.types) AND w.until > clock_timestamp()
     ORDER BY w.holder LIMIT 1;
  END IF;
  PERFORM pg_notify('${ready}', coalesce(v_holder::text, ''));
END
$$;

DROP FUNCTION ${S}.lease_ready(text[], integer, float8, uuid);
${waitingLeaseReady(S)}
${waitingEnqueue(S, K, channel)}
${genericPlansSchema(schema)}`;
}
