/**
 * Migration 4, the dequeue: `lease_ready` leases up to `p_max` of the best ready evaluations across `p_types` in one
 * statement. It is a function so that its plan is cached by the server session, which a client's unnamed statement
 * is not, while the backend still keeps no session state of its own (a transaction pooler in front changes nothing).
 *
 * Order: priority first; within a type FIFO (create index, then enqueue order); ties between types at random. The
 * candidates are taken with FOR UPDATE SKIP LOCKED, so concurrent dequeues never wait for each other and never take
 * the same row; each candidate is then updated by its row address, which cannot move while this transaction holds
 * the row's lock.
 */
import { FAILED_QUEUE } from '../broker/evaluation.js';

export function leaseReadySchema(S: string): string {
  return `
CREATE FUNCTION ${S}.lease_ready(p_types text[], p_max integer, p_lease_ms float8, p_holder uuid)
RETURNS TABLE (id text, body bytea, queue text, deliveries integer, token text, priority integer, create_index bigint, seq bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH candidates AS MATERIALIZED (
    SELECT c.ctid AS row_id, c.priority,
           row_number() OVER (PARTITION BY t.queue ORDER BY c.priority DESC, c.create_index, c.seq) AS rank
      FROM unnest(p_types) AS t(queue)
      CROSS JOIN LATERAL (
        SELECT e.ctid, e.priority, e.create_index, e.seq FROM ${S}.evals e
         WHERE e.state = 'ready' AND e.queue = t.queue
         ORDER BY e.priority DESC, e.create_index, e.seq
         LIMIT p_max FOR UPDATE SKIP LOCKED) c),
  picked AS MATERIALIZED (
    SELECT row_id FROM candidates ORDER BY priority DESC, rank, random() LIMIT p_max)
  UPDATE ${S}.evals e
     SET state = 'unacked', token = gen_random_uuid()::text, holder = p_holder,
         lease_until = clock_timestamp() + p_lease_ms * interval '1 millisecond',
         deliveries = e.deliveries + CASE WHEN e.queue = '${FAILED_QUEUE}' THEN 0 ELSE 1 END
   WHERE e.ctid = ANY(ARRAY(SELECT row_id FROM picked))
  RETURNING e.id, e.body, e.queue, e.deliveries, e.token, e.priority, e.create_index, e.seq;
END
$$;
`;
}
