/**
 * Migration 8: the notification an ack batch sends to the processes the acked evaluations were enqueued in names the
 * evaluations: `{"origin": <process>, "ids": [...]}`, so that the process looks up the outcomes of those alone. The
 * bare process id it sent before made the process look up every outcome it was waiting for, on every notification:
 * with thousands awaited, thousands of ids a look-up, many look-ups a second. A payload that would pass
 * PostgreSQL's limit (8,000 bytes) is the bare process id, as before, and the look-up covers every awaited outcome.
 * The rarer paths (a dead letter, a removal, the single ack, a supersession) follow in migration 9.
 */
const MAX_PAYLOAD_BYTES = 7_900;

export function outcomeIdsSchema(S: string, channel: (name: string) => string): string {
  const outcome = channel('outcome');
  return `
CREATE OR REPLACE FUNCTION ${S}.ack_rows(p_ids text[], p_tokens text[], p_values bytea[], p_indexes bigint[], p_attempts integer[],
  p_actor uuid, p_lease boolean)
RETURNS TABLE (id text, deliveries integer, promoted text, canceled text[]) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_ids text[];
  v_deliveries integer[];
  v_namespaces text[];
  v_jobs text[];
  v_origins uuid[];
  v_settled text[];
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
         array_agg(d.origin) FILTER (WHERE d.origin IS NOT NULL AND d.origin IS DISTINCT FROM p_actor),
         array_agg(d.id) FILTER (WHERE d.origin IS NOT NULL AND d.origin IS DISTINCT FROM p_actor)
    INTO v_ids, v_deliveries, v_namespaces, v_jobs, v_origins, v_settled
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
    PERFORM pg_notify('${outcome}', CASE WHEN octet_length(n.payload) <= ${MAX_PAYLOAD_BYTES} THEN n.payload ELSE n.origin::text END)
      FROM (SELECT o.origin, jsonb_build_object('origin', o.origin, 'ids', jsonb_agg(o.id))::text AS payload
              FROM unnest(v_origins, v_settled) AS o(origin, id) GROUP BY o.origin) n;
  END IF;
END
$$;
`;
}
