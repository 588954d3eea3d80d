/**
 * Migration 10, first part: a lease commits without waiting for its WAL flush (`synchronous_commit = off` for the
 * lease's own transaction, set inside `lease_ready`), which took 0.25 ms off each dequeue at idle here.
 *
 * Why losing a lease is safe, where losing an enqueue or an ack is not: WAL is written in order, so the next
 * durable commit of anyone (an ack, a plan, an enqueue) flushes every lease before it. Only a crash of the database
 * server (or of one of its processes, after which it recovers from WAL), in the fraction of a second before that,
 * can forget a lease; the evaluation is then `ready` again with its previous token, so it is delivered anew, and
 * the forgotten holder's ack or plan is refused: its token is not the current lease. At-least-once delivery and the
 * fencing of plans are unchanged; what such a crash loses is one count of `deliveries` (an evaluation that crashed
 * the server each time, within that fraction of a second, would never reach the delivery limit). Enqueues (`accepted` promises durability) and acks (`done` promises the
 * outcome) stay synchronous.
 *
 * The function is migration 4's, changed at one place (checked to occur exactly once).
 */
import { leaseReadySchema } from './lease-ready-schema.js';
import { functionText, replacedOnce } from './sql-text.js';

export function leaseCommitSchema(S: string): string {
  return replacedOnce(
    functionText(leaseReadySchema(S), S, 'lease_ready', 10),
    [['BEGIN\n  RETURN QUERY', "BEGIN\n  PERFORM set_config('synchronous_commit', 'off', true);\n  RETURN QUERY"]],
    'migration 10: lease_ready',
  );
}
