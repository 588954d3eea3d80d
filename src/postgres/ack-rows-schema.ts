/**
 * Migration 4: acks as one set-based update. `ack_rows` acks a batch of deliveries with a single UPDATE whose FROM
 * reads each row's slot before the update (the statement's snapshot), so nothing has to look the rows up again
 * afterwards. `ack_fenced` (plan commits, which checked and locked their rows already) and `ack_many` (the broker's
 * batched acks) both call it; their signatures and answers are those of version 1.
 *
 * Lock order is version 1's: job locks first (ascending key), then evaluation rows. `ack_many` no longer locks the
 * rows in a separate statement before its update. Rows are taken by the update itself, in whatever order its plan
 * visits them. That cannot deadlock. Whoever takes an evaluation row and may then wait (plan commits, acks, nacks,
 * removal) holds that evaluation's job lock first, and a job's lock has one holder at a time. Whoever takes rows
 * without the job lock (dequeue, the reaper, heartbeats) never waits while holding them: SKIP LOCKED, and
 * `pg_try_advisory_xact_lock`.
 */
export function ackRowsSchema(S: string, channel: (name: string) => string): string {
  const outcome = channel('outcome');
  return `
-- Acks the deliveries (id, token) that are still current; with p_lease, only those whose lease has not run out.
-- Rows with an id are acks; rows without one report a promotion (the job's best pending evaluation took its slot).
CREATE FUNCTION ${S}.ack_rows(p_ids text[], p_tokens text[], p_values bytea[], p_indexes bigint[], p_attempts integer[],
  p_actor uuid, p_lease boolean)
RETURNS TABLE (id text, deliveries integer, promoted text, canceled text[]) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_ids text[];
  v_deliveries integer[];
  v_namespaces text[];
  v_jobs text[];
  v_origins uuid[];
  v_promote record;
  p record;
BEGIN
  WITH done AS (
    UPDATE ${S}.evals e SET state = 'acked', holds_slot = false, lease_until = NULL, holder = NULL, settled_at = now(),
           outcome = COALESCE(e.outcome, jsonb_build_object('status', 'acked', 'index', x.idx, 'attempts', x.attempts,
             'deliveries', e.deliveries)),
           value = CASE WHEN e.outcome IS NULL THEN x.value ELSE e.value END
      FROM (SELECT x.*, before.holds_slot AS held_slot
              FROM unnest(p_ids, p_tokens, p_values, p_indexes, p_attempts) AS x(id, token, value, idx, attempts)
              JOIN ${S}.evals before ON before.id = x.id) x
     WHERE e.id = x.id AND e.token = x.token AND e.state = 'unacked'
       AND (NOT p_lease OR e.lease_until > clock_timestamp())
    RETURNING e.id, e.deliveries, x.held_slot, e.namespace, e.job_id, e.origin)
  SELECT array_agg(d.id), array_agg(d.deliveries),
         array_agg(d.namespace) FILTER (WHERE d.held_slot), array_agg(d.job_id) FILTER (WHERE d.held_slot),
         array_agg(DISTINCT d.origin) FILTER (WHERE d.origin IS NOT NULL AND d.origin IS DISTINCT FROM p_actor)
    INTO v_ids, v_deliveries, v_namespaces, v_jobs, v_origins
    FROM done d;
  IF v_ids IS NULL THEN RETURN; END IF;
  RETURN QUERY SELECT a.id, a.deliveries, NULL::text, NULL::text[] FROM unnest(v_ids, v_deliveries) AS a(id, deliveries);
  IF v_namespaces IS NOT NULL THEN
    FOR v_promote IN
      SELECT DISTINCT e.namespace, e.job_id FROM ${S}.evals e
        JOIN unnest(v_namespaces, v_jobs) AS j(namespace, job_id) ON e.namespace = j.namespace AND e.job_id = j.job_id
       WHERE e.state = 'pending'
    LOOP
      SELECT * INTO p FROM ${S}.promote(v_promote.namespace, v_promote.job_id, true);
      id := NULL; deliveries := NULL; promoted := p.promoted; canceled := p.canceled;
      RETURN NEXT;
    END LOOP;
  END IF;
  IF v_origins IS NOT NULL THEN
    PERFORM pg_notify('${outcome}', o::text) FROM unnest(v_origins) AS o;
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION ${S}.ack_fenced(p_ids text[], p_tokens text[], p_values bytea[], p_indexes bigint[],
  p_attempts integer[], p_actor uuid)
RETURNS TABLE (id text, deliveries integer, promoted text, canceled text[]) LANGUAGE sql AS $$
  SELECT * FROM ${S}.ack_rows(p_ids, p_tokens, p_values, p_indexes, p_attempts, p_actor, false)
$$;

CREATE OR REPLACE FUNCTION ${S}.ack_many(p_ids text[], p_tokens text[], p_values bytea[], p_indexes bigint[],
  p_attempts integer[], p_namespaces text[], p_jobs text[], p_actor uuid)
RETURNS TABLE (id text, status text, deliveries integer, promoted text, canceled text[]) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_acked text[] := '{}';
  r record;
BEGIN
  PERFORM ${S}.lock_jobs(p_namespaces, p_jobs);
  FOR r IN SELECT * FROM ${S}.ack_rows(p_ids, p_tokens, p_values, p_indexes, p_attempts, p_actor, true) LOOP
    id := r.id; status := CASE WHEN r.id IS NULL THEN NULL ELSE 'ok' END; deliveries := r.deliveries;
    promoted := r.promoted; canceled := r.canceled;
    IF r.id IS NOT NULL THEN v_acked := v_acked || r.id; END IF;
    RETURN NEXT;
  END LOOP;
  IF cardinality(v_acked) = cardinality(p_ids) THEN RETURN; END IF;
  FOR r IN
    SELECT x.id, x.token, e AS row, (e.lease_until <= clock_timestamp()) AS expired
      FROM unnest(p_ids, p_tokens) AS x(id, token) LEFT JOIN ${S}.evals e ON e.id = x.id
     WHERE NOT (x.id = ANY(v_acked))
  LOOP
    id := r.id; deliveries := NULL; promoted := NULL; canceled := NULL;
    status := coalesce(${S}.refusal(r.row, r.token), CASE WHEN r.expired THEN 'expired' ELSE 'not_outstanding' END);
    RETURN NEXT;
  END LOOP;
END
$$;
`;
}
