/**
 * Every SQL text the PostgreSQL broker sends (its leases, outcome look-ups and reaper included), built once per
 * schema from its quoted name (`SchemaNames.S`), never from input: what varies goes as parameters. Each text is
 * named after what it does; the rules it relies on (the job's lock, the token check, promotion, dead-lettering) live
 * in the schema's functions it calls.
 */
import type { AdminEvaluationState } from '../../broker/admin-types.js';

/** Rows per reaper batch (`reap`'s `$1`); one cleanup statement deletes up to ten batches' worth. */
export const REAP_BATCH = 500;

export interface BrokerQueries {
  /** Admits a batch of evaluations (one array per column), from origin `$12`; a row per evaluation. */
  readonly enqueue: string;
  /** Leases up to `$2` ready evaluations of types `$1` to holder `$4`; too few found, the holder stands as waiting. */
  readonly leaseReady: string;
  /** Gives back deliveries `($1, $2)` uncharged, notifying `$3` when any went back. */
  readonly giveBack: string;
  /** `giveBack`, and holder `$4` stops standing as waiting, in the same statement. */
  readonly giveBackAndUnstand: string;
  /** Gives back every delivery of holder `$1` whose token is not among `$2`, notifying `$3` when any went back. */
  readonly giveBackMissed: string;
  /** One delivery `($1, $2)` back, uncharged, with the refusal as the statement's snapshot saw it; notifies `$3`. */
  readonly giveBackOne: string;
  /** The live deliveries of holder `$1` whose token is not among `$2`, with the lease's time left. */
  readonly unheardLeases: string;
  /** Holder `$2` stops standing as waiting, and `$1` is notified for everyone. */
  readonly passOn: string;
  /** Holder `$1` stops standing as waiting. */
  readonly unstand: string;
  /** Acks a batch of deliveries of holder `$8`, their jobs given (one array per column). */
  readonly ackMany: string;
  /** Acks one delivery. */
  readonly ack: string;
  /** An evaluation's state and current token (whether an ack that was not answered landed). */
  readonly ackCheck: string;
  /** The bodies of evaluations `$1`. */
  readonly bodies: string;
  /** Nacks one delivery with the broker's delivery limit and delays. */
  readonly nack: string;
  /** Fails one delivery. */
  readonly fail: string;
  /** Removes one evaluation, with the token of its delivery when it is in flight. */
  readonly remove: string;
  /** The token of evaluation `$1`'s current delivery, if it is in flight. */
  readonly outstanding: string;
  /** Why token `$2` is not evaluation `$1`'s current delivery. */
  readonly refusal: string;
  /** Counts by state (and by queue for the queued ones), each from its state's partial index. */
  readonly stats: string;
  /** `stats` with each state's scan stopped at `$1` rows: what a dashboard can ask every second of a million rows. */
  readonly depths: string;
  /** Where evaluation `$1` is, unless it is over. */
  readonly inspect: string;
  /** Makes the live leases `($1, $2)` end `$3` ms from now, skipping rows locked right now; the tokens extended. */
  readonly extendLeases: string;
  /** The state, token and whether the lease is live of evaluations `$1` (why an extension did not land). */
  readonly leaseCheck: string;
  /** The stored outcomes (and values) of those of evaluations `$1` that have one. */
  readonly outcomes: string;
  /** Ms until the earliest lease end and the earliest delay end in the schema (null when there is none). */
  readonly nextDue: string;
  /** Reaps up to `$1` rows as process `$5`: ends the leases that ran out, admits the delays that are over. */
  readonly reap: string;
  /** Deletes a batch of the evaluations settled more than `$1` ms ago, skipping locked rows. */
  readonly deleteSettled: string;
  /** Deletes a batch of the oldest log rows more than `$1` change sets behind the counter. */
  readonly compactLog: string;
  /** Evaluation `$1` in detail, unless it is over (its delivery times in epoch ms). */
  readonly evaluationDetail: string;
  /** Replays failed evaluation `$1` (`replay`): whether it was one, and its origin. */
  readonly replay: string;
  /** Up to `$2` ids of failed evaluations of type `$1` that are not in flight, oldest first. */
  readonly failedIds: string;
  readonly pauseType: string;
  readonly resumeType: string;
  readonly pausedTypes: string;
  /** A page of one state's evaluations (see `listEvaluationsQuery`). */
  listEvaluations(shape: ListShape): string;
}

/** What a listing asks for beyond its parameters' values: which state, which order, which filters are given. */
export interface ListShape {
  readonly state: AdminEvaluationState;
  readonly newest: boolean;
  readonly cursor: boolean;
  readonly type: boolean;
  readonly namespace: boolean;
  readonly jobId: boolean;
}

/**
 * Each admin state as rows: the predicate of its partial index (`evals_*_seq`; 'unacked' reads `evals_leases`, whose
 * rows are the deliveries in flight, and sorts them).
 */
const LISTED: Record<AdminEvaluationState, string> = {
  ready: `state = 'ready' AND queue <> '_failed'`,
  failed: `state = 'ready' AND queue = '_failed'`,
  unacked: `state = 'unacked'`,
  pending: `state = 'pending'`,
  delayed: `state = 'waiting'`,
};

/**
 * A page of evaluations in enqueue order (`seq`): `limit + 1` rows, so that the caller sees whether there is more.
 * One text per shape, so that each is planned for the index it can use: a cursor bounds the index scan, and a type
 * filter on ready rows also names the queue (the type's, for every ready row that is not failed), which lets the
 * planner read `evals_ready` instead when the type is rare, and a job filter on them reads `evals_one_per_job` when
 * the namespace is given too. Parameters in order: cursor, type, namespace, job, limit
 * (those the shape has).
 */
function listEvaluationsQuery(E: string, shape: ListShape): string {
  const where = [LISTED[shape.state]];
  const params: string[] = [];
  const param = (cast: string): string => {
    params.push(cast);
    return `$${params.length}::${cast}`;
  };
  if (shape.cursor) where.push(`seq ${shape.newest ? '<' : '>'} ${param('bigint')}`);
  if (shape.type) {
    const type = param('text');
    where.push(shape.state === 'ready' ? `type = ${type} AND queue = ${type}` : `type = ${type}`);
  }
  if (shape.namespace) where.push(`namespace = ${param('text')}`);
  if (shape.jobId) where.push(`job_id = ${param('text')}`);
  // Every ready row that is not failed holds its job's slot: a job's ready row is then one look-up in evals_one_per_job.
  if (shape.jobId && shape.state === 'ready') where.push('holds_slot');
  return `SELECT id, namespace, job_id, type, priority, deliveries, seq FROM ${E}
     WHERE ${where.join(' AND ')} ORDER BY seq ${shape.newest ? 'DESC' : 'ASC'} LIMIT ${param('int')}`;
}

export function brokerQueries(S: string): BrokerQueries {
  const E = `${S}.evals`;
  const lists = new Map<string, string>();
  const giveBack = (unstand: boolean): string =>
    `WITH back AS (SELECT bool_or(${S}.give_back(x.id, x.token)) AS ok FROM unnest($1::text[], $2::text[]) AS x(id, token))
       ${unstand ? `, unstand AS (DELETE FROM ${S}.waiting_dequeues WHERE holder = $4)` : ''}
       SELECT pg_notify($3, '') FROM back WHERE ok`;
  return {
    enqueue: `SELECT * FROM ${S}.enqueue($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::bigint[],
           $7::bigint[], $8::float8[], $9::float8[], $10::bytea[], $11::jsonb[], $12::uuid)`,
    leaseReady: `SELECT * FROM ${S}.lease_ready($1::text[], $2::int, $3::float8, $4::uuid, $5::float8, $6::text)`,
    giveBack: giveBack(false),
    giveBackAndUnstand: giveBack(true),
    giveBackMissed: `SELECT pg_notify($3, '') FROM (
             SELECT bool_or(${S}.give_back(e.id, e.token)) AS ok FROM ${S}.evals e
              WHERE e.state = 'unacked' AND e.holder = $1 AND NOT (e.token = ANY($2::text[]))) g
            WHERE g.ok`,
    giveBackOne: `WITH back AS (SELECT ${S}.give_back($1, $2) AS ok),
            seen AS (SELECT ${S}.refusal(e, $2) AS refusal, e.deliveries, e.queue FROM ${S}.evals e WHERE e.id = $1),
            told AS (SELECT pg_notify($3, '') FROM back WHERE back.ok)
       SELECT back.ok, seen.refusal, seen.deliveries, seen.queue, (SELECT count(*) FROM told) AS notified
         FROM back LEFT JOIN seen ON true`,
    unheardLeases: `SELECT id, body, queue, deliveries, token, extract(epoch FROM lease_until - clock_timestamp()) * 1000 AS left_ms
         FROM ${E}
        WHERE state = 'unacked' AND holder = $1 AND lease_until > clock_timestamp() AND NOT (token = ANY($2::text[]))`,
    passOn: `WITH unstand AS (DELETE FROM ${S}.waiting_dequeues WHERE holder = $2) SELECT pg_notify($1, '')`,
    unstand: `DELETE FROM ${S}.waiting_dequeues WHERE holder = $1`,
    ackMany: `SELECT * FROM ${S}.ack_many($1::text[], $2::text[], $3::bytea[], $4::bigint[], $5::int[], $6::text[], $7::text[], $8)`,
    ack: `SELECT * FROM ${S}.ack($1, $2, $3, $4, $5, $6)`,
    ackCheck: `SELECT state, token FROM ${E} WHERE id = $1`,
    bodies: `SELECT body FROM ${E} WHERE id = ANY($1::text[])`,
    nack: `SELECT * FROM ${S}.nack($1, $2, $3::jsonb, $4, $5, $6, $7, $8)`,
    fail: `SELECT * FROM ${S}.fail($1, $2, $3::jsonb, $4)`,
    remove: `SELECT * FROM ${S}.remove($1, $2, $3::jsonb, $4)`,
    outstanding: `SELECT token FROM ${E} WHERE id = $1 AND state = 'unacked'`,
    refusal: `SELECT ${S}.refusal(e, $2) AS refusal FROM ${E} e WHERE e.id = $1`,
    stats: `SELECT 'ready' AS state, queue, count(*)::int AS n FROM ${E} WHERE state = 'ready' GROUP BY queue
       UNION ALL SELECT 'unacked', queue, count(*)::int FROM ${E} WHERE state = 'unacked' GROUP BY queue
       UNION ALL SELECT 'pending', '', count(*)::int FROM ${E} WHERE state = 'pending'
       UNION ALL SELECT 'waiting', '', count(*)::int FROM ${E} WHERE state = 'waiting'
       UNION ALL SELECT 'cancelable', '', count(*)::int FROM ${E} WHERE state = 'cancelable'`,
    depths: `SELECT 'ready' AS state, queue, count(*)::int AS n FROM (SELECT queue FROM ${E} WHERE state = 'ready' AND queue <> '_failed' LIMIT $1) r GROUP BY queue
       UNION ALL SELECT 'failed', '', count(*)::int FROM (SELECT 1 FROM ${E} WHERE state = 'ready' AND queue = '_failed' LIMIT $1) f
       UNION ALL SELECT 'unacked', queue, count(*)::int FROM (SELECT queue FROM ${E} WHERE state = 'unacked' LIMIT $1) u GROUP BY queue
       UNION ALL SELECT 'pending', '', count(*)::int FROM (SELECT 1 FROM ${E} WHERE state = 'pending' LIMIT $1) p
       UNION ALL SELECT 'delayed', '', count(*)::int FROM (SELECT 1 FROM ${E} WHERE state = 'waiting' LIMIT $1) w`,
    inspect: `SELECT state, queue, deliveries, holds_slot FROM ${E} WHERE id = $1 AND state NOT IN ('acked', 'removed')`,
    extendLeases: `WITH x AS (SELECT * FROM unnest($1::text[], $2::text[], $3::float8[]) AS x(id, token, ms)),
         locked AS MATERIALIZED (
           SELECT e.id, x.ms FROM ${E} e JOIN x ON e.id = x.id AND e.token = x.token
            WHERE e.id = ANY($1::text[]) AND e.state = 'unacked' AND e.lease_until > clock_timestamp()
            FOR UPDATE OF e SKIP LOCKED)
         UPDATE ${E} e SET lease_until = clock_timestamp() + locked.ms * interval '1 millisecond'
           FROM locked WHERE e.id = ANY(ARRAY(SELECT id FROM locked)) AND e.id = locked.id
         RETURNING e.token`,
    leaseCheck: `SELECT token, state, coalesce(lease_until > clock_timestamp(), false) AS live FROM ${E} WHERE id = ANY($1::text[])`,
    outcomes: `SELECT id, outcome, value FROM ${E} WHERE id = ANY($1::text[]) AND outcome IS NOT NULL`,
    nextDue: `SELECT extract(epoch FROM (SELECT min(lease_until) FROM ${E} WHERE state = 'unacked') - now()) * 1000 AS lease_ms,
                extract(epoch FROM (SELECT min(due_at) FROM ${E} WHERE state = 'waiting') - now()) * 1000 AS due_ms`,
    reap: `SELECT * FROM ${S}.reap($1, $2, $3, $4, $5)`,
    deleteSettled: `DELETE FROM ${E} WHERE id IN (
         SELECT id FROM ${E} WHERE state IN ('acked', 'removed', 'cancelable')
            AND settled_at < now() - $1::float8 * interval '1 millisecond'
          LIMIT ${REAP_BATCH * 10} FOR UPDATE SKIP LOCKED)`,
    compactLog: `DELETE FROM ${S}.state_log WHERE index <= (SELECT index FROM ${S}.state_counter) - $1 AND index IN (
         SELECT index FROM ${S}.state_log ORDER BY index LIMIT ${REAP_BATCH * 10})`,
    evaluationDetail: `SELECT id, namespace, job_id, type, priority, state, queue, deliveries, holds_slot, body, last_reason, failure,
                holder, extract(epoch FROM leased_at) * 1000 AS leased_ms, extract(epoch FROM ready_at) * 1000 AS ready_ms,
                extract(epoch FROM settled_at) * 1000 AS settled_ms
           FROM ${E} WHERE id = $1 AND state IN ('ready', 'pending', 'unacked', 'waiting')`,
    replay: `SELECT replayed, origin FROM ${S}.replay($1)`,
    failedIds: `SELECT id FROM ${E} WHERE state = 'ready' AND queue = '_failed' AND type = $1 ORDER BY seq LIMIT $2`,
    pauseType: `SELECT ${S}.pause_type($1)`,
    resumeType: `SELECT ${S}.resume_type($1)`,
    pausedTypes: `SELECT type FROM ${S}.paused_types ORDER BY type`,
    listEvaluations(shape) {
      const key = `${shape.state}/${shape.newest}/${shape.cursor}/${shape.type}/${shape.namespace}/${shape.jobId}`;
      let text = lists.get(key);
      if (text === undefined) lists.set(key, (text = listEvaluationsQuery(E, shape)));
      return text;
    },
  };
}
