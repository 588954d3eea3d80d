/**
 * Migration 14: a plan commit holds the state counter's lock for three round trips instead of seven.
 *
 * Every commit of the cluster waits for that lock, so its hold is the cluster's commit ceiling. The server's own
 * work under it is about 1.5 ms a batch; the rest of the hold was round trips, each of which waits for the
 * committing process to be scheduled on a machine busy with everyone else's work. Under the lock a commit now
 * sends `open_commit`, then `commit_batch`, then COMMIT:
 * - `open_commit` locks the counter, then (version 1's lock order) the jobs of the deliveries the commit may ack and
 *   the deliveries' rows, answering which are still current, and the log rows after the committer's replica. Each
 *   statement of a plpgsql function in READ COMMITTED takes its own snapshot, so the rows read after the lock was
 *   granted include every commit up to the counter.
 * - `commit_batch` is `commit_writes` and `ack_fenced` in one call.
 * The delivery rows are locked only while the counter is held, as before: a heartbeat meanwhile skips them and
 * retries, and a lease cannot run out unseen behind a commit that is still waiting for its turn.
 */
export function shortHoldSchema(S: string): string {
  return `
-- The first row: the counter (locked) and the deliveries among p_ids that are still current (their rows locked,
-- after the jobs p_namespaces, p_jobs). Then up to p_limit log rows after p_after, one per row.
CREATE FUNCTION ${S}.open_commit(p_after bigint, p_limit integer, p_namespaces text[], p_jobs text[], p_ids text[])
RETURNS TABLE (counter bigint, current_ids text[], current_tokens text[], index bigint, changes bytea) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_counter bigint;
  v_ids text[] := '{}';
  v_tokens text[] := '{}';
BEGIN
  SELECT c.index INTO v_counter FROM ${S}.state_counter c FOR UPDATE;
  IF cardinality(p_ids) > 0 THEN
    IF cardinality(p_jobs) > 0 THEN PERFORM ${S}.lock_jobs(p_namespaces, p_jobs); END IF;
    SELECT coalesce(array_agg(f.id) FILTER (WHERE f.current), '{}'), coalesce(array_agg(f.token) FILTER (WHERE f.current), '{}')
      INTO v_ids, v_tokens
      FROM (SELECT e.id, e.token, e.lease_until > clock_timestamp() AS current
              FROM ${S}.evals e WHERE e.id = ANY(p_ids) AND e.state = 'unacked' ORDER BY e.id FOR UPDATE) f;
  END IF;
  RETURN QUERY SELECT v_counter, v_ids, v_tokens, NULL::bigint, NULL::bytea;
  RETURN QUERY
    SELECT NULL::bigint, NULL::text[], NULL::text[], l.index, l.changes FROM ${S}.state_log l
     WHERE l.index > p_after AND l.index <= v_counter ORDER BY l.index LIMIT p_limit;
END
$$;

-- The first row says whether the writes were made (moved: the counter was at p_from); the rest are ack_fenced's.
-- No log rows: nothing is written and the counter stays. No acks: no rows after the first.
CREATE FUNCTION ${S}.commit_batch(
  p_put_tbl text[], p_put_key text[], p_put_value bytea[], p_put_create bigint[], p_put_modify bigint[],
  p_del_tbl text[], p_del_key text[],
  p_log_index bigint[], p_log_plan uuid[], p_log_changes bytea[],
  p_from bigint, p_to bigint,
  p_ack_ids text[], p_ack_tokens text[], p_ack_values bytea[], p_ack_indexes bigint[], p_ack_attempts integer[],
  p_actor uuid)
RETURNS TABLE (moved boolean, id text, deliveries integer, promoted text, canceled text[]) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  IF cardinality(p_log_index) > 0 AND NOT ${S}.commit_writes(p_put_tbl, p_put_key, p_put_value, p_put_create, p_put_modify,
       p_del_tbl, p_del_key, p_log_index, p_log_plan, p_log_changes, p_from, p_to) THEN
    RETURN QUERY SELECT false, NULL::text, NULL::integer, NULL::text, NULL::text[];
    RETURN;
  END IF;
  RETURN QUERY SELECT true, NULL::text, NULL::integer, NULL::text, NULL::text[];
  IF cardinality(p_ack_ids) > 0 THEN
    RETURN QUERY SELECT NULL::boolean, a.id, a.deliveries, a.promoted, a.canceled
      FROM ${S}.ack_fenced(p_ack_ids, p_ack_tokens, p_ack_values, p_ack_indexes, p_ack_attempts, p_actor) a;
  END IF;
END
$$;
`;
}
