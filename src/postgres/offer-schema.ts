/**
 * Migration 12: an idle enqueue leases its evaluation to the waiting process it would name, and the notification
 * carries the delivery (an offer), so that process starts it without a fetch of its own.
 *
 * A named notification makes the idle hand-off two commits in a row: the enqueue's, whose notification wakes the
 * named process, and that process's `lease_ready`, a second round trip and commit before its thread can start. So:
 *
 * - `waiting_dequeues.offer_channel` and `offer_ms`: set by a fetch that stands as waiting and accepts offers
 *   (`lease_ready`'s new `p_offer_channel`, whose default, NULL, serves a process of the release before, which would
 *   not understand one): the channel that process alone listens on, and the lease an offer to it gets (its nack
 *   timeout). NULL: name it, as migration 11 does.
 * - `enqueue` of one evaluation that is ready at once, whose body fits a notification, while no other evaluation of
 *   its type is ready (so the queue's order holds) and the first process standing for its type (migration 11's
 *   choice) takes offers: the row is inserted already leased to that process (`unacked`, a new token, its lease
 *   from now, one delivery), in the same durable commit as the admission, and a notification on that process's own
 *   channel carries the delivery as JSON, `{"offer": holder, "id", "token", "queue", "body": base64}`: the other
 *   processes are not woken for it. Everything else is as before: a batch, a delay, an id seen before, a job whose
 *   slot is taken (the slow path), or an offer that would not fit a notification go by `notify_ready`.
 *
 * The offered lease is like one a fetch takes, so what holds for leases holds for offers: an offer to a process
 * that cannot start it is given back uncharged (`give_back`) by that process, and one to a process that died after
 * its last fetch, whose row still stood (for at most two poll intervals), is redelivered when its lease ends, as the
 * deliveries it held are. That case costs the evaluation its nack timeout where a named notification cost it
 * `NAMED_NOTIFY_LEAD_MS`. A process that stops cleanly withdraws its row, which waits for the enqueues that chose it
 * (they hold the row's key-share lock), and then gives back whatever is still leased to it, heard or not.
 *
 * Dead letters notify too: an evaluation that becomes ready in `_failed` (`to_failed`, an enqueue that carries its
 * failure, a `_failed` delivery requeued) sends the empty payload, as every other way of becoming ready does. A
 * process whose last fetch found too little fetches again only once it hears of something (`PgBroker`'s quiet
 * rule), so a consumer of `_failed` would otherwise learn of them only at its next poll.
 */
import { genericPlansSchema } from './generic-plans-schema.js';
import { namedOutcomesSchema } from './named-outcomes-schema.js';
import { schemaV1 } from './schema-v1.js';
import { functionText, replacedOnce } from './sql-text.js';
import { waitingEnqueue, waitingLeaseReady } from './waiting-dequeues-schema.js';

/**
 * The largest body an offer carries (base64 makes 4 bytes of 3), and the largest offer: PostgreSQL refuses a
 * notification payload over 8,000 bytes, and ids and types have no length limit of their own.
 */
export const MAX_OFFER_BODY_BYTES = 5_000;
const MAX_OFFER_BYTES = 7_900;

export function offerSchema(schema: string, S: string, K: number, channel: (name: string) => string): string {
  const ready = channel('ready');
  const lease = replacedOnce(
    waitingLeaseReady(S),
    [
      ['p_wait_ms float8 DEFAULT 0)', 'p_wait_ms float8 DEFAULT 0, p_offer_channel text DEFAULT NULL)'],
      [
        `INSERT INTO ${S}.waiting_dequeues AS w (holder, types, until)
    VALUES (p_holder, p_types, clock_timestamp() + p_wait_ms * interval '1 millisecond')
    ON CONFLICT (holder) DO UPDATE SET types = EXCLUDED.types, until = EXCLUDED.until;`,
        `INSERT INTO ${S}.waiting_dequeues AS w (holder, types, until, offer_channel, offer_ms)
    VALUES (p_holder, p_types, clock_timestamp() + p_wait_ms * interval '1 millisecond', p_offer_channel,
            CASE WHEN p_offer_channel IS NOT NULL THEN p_lease_ms END)
    ON CONFLICT (holder) DO UPDATE SET types = EXCLUDED.types, until = EXCLUDED.until, offer_channel = EXCLUDED.offer_channel,
        offer_ms = EXCLUDED.offer_ms;`,
      ],
    ],
    'migration 12: lease_ready',
  );
  const enqueue = replacedOnce(
    waitingEnqueue(S, K, channel),
    [
      [
        '  v_any_ready boolean := false;\nBEGIN\n',
        `  v_any_ready boolean := false;
  v_offer_to uuid;
  v_offer_ms float8;
  v_offer_channel text;
  v_offer text;
  v_token text;
  v_failed_ready boolean := false;
BEGIN
  IF cardinality(p_ids) = 1 AND p_failures[1] IS NULL AND coalesce(p_wait_ms[1], 0) <= 0 AND p_wait_until_ms[1] IS NULL
     AND octet_length(p_bodies[1]) <= ${MAX_OFFER_BODY_BYTES} THEN
    -- The key-share lock holds off the row's DELETE (a process leaving, or no longer standing) until this commits, so
    -- that the leaving process's last look for deliveries of its own comes after any offer made to it.
    SELECT w.holder, w.offer_ms, w.offer_channel INTO v_offer_to, v_offer_ms, v_offer_channel FROM ${S}.waiting_dequeues w
     WHERE p_types[1] = ANY(w.types) AND w.until > clock_timestamp()
     ORDER BY w.holder LIMIT 1 FOR KEY SHARE;
    IF v_offer_ms IS NOT NULL AND NOT EXISTS (SELECT 1 FROM ${S}.evals e WHERE e.state = 'ready' AND e.queue = p_types[1]) THEN
      v_token := gen_random_uuid()::text;
      v_offer := json_build_object('offer', v_offer_to, 'id', p_ids[1], 'token', v_token, 'queue', p_types[1],
        'body', encode(p_bodies[1], 'base64'))::text;
      IF octet_length(v_offer) > ${MAX_OFFER_BYTES} THEN
        v_token := NULL;
      END IF;
    END IF;
  END IF;
`,
      ],
      [
        `    INSERT INTO ${S}.evals AS e (id, namespace, job_id, type, priority, modify_index, create_index, body, origin, state,
        queue, holds_slot, ready_at)
    SELECT i.id, i.namespace, i.job_id, i.type, i.priority, i.modify_index, i.create_index, i.body, p_origin, 'ready',
        i.type, true, now()`,
        `    INSERT INTO ${S}.evals AS e (id, namespace, job_id, type, priority, modify_index, create_index, body, origin, state,
        queue, holds_slot, ready_at, token, holder, lease_until, deliveries)
    SELECT i.id, i.namespace, i.job_id, i.type, i.priority, i.modify_index, i.create_index, i.body, p_origin,
        CASE WHEN v_token IS NULL THEN 'ready' ELSE 'unacked' END, i.type, true, now(),
        v_token, CASE WHEN v_token IS NOT NULL THEN v_offer_to END,
        CASE WHEN v_token IS NOT NULL THEN clock_timestamp() + v_offer_ms * interval '1 millisecond' END,
        CASE WHEN v_token IS NULL THEN 0 ELSE 1 END`,
      ],
      [
        'IF v_fast IS NOT NULL THEN v_any_ready := true; END IF;',
        `IF v_fast IS NOT NULL AND v_token IS NULL THEN v_any_ready := true; END IF;
  IF v_fast IS NOT NULL AND v_token IS NOT NULL THEN
    PERFORM pg_notify(v_offer_channel, v_offer);
  END IF;`,
      ],
      ["      IF p_failures[i] IS NOT NULL THEN\n        v_state := 'ready';\n", "      IF p_failures[i] IS NOT NULL THEN\n        v_state := 'ready';\n        v_failed_ready := true;\n"],
      [
        `IF v_any_ready THEN PERFORM ${S}.notify_ready(CASE WHEN cardinality(p_ids) = 1 THEN p_types[1] END); END IF;`,
        `IF v_any_ready THEN PERFORM ${S}.notify_ready(CASE WHEN cardinality(p_ids) = 1 THEN p_types[1] END); END IF;
  IF v_failed_ready THEN PERFORM pg_notify('${ready}', ''); END IF;`,
      ],
      [
        `RETURN QUERY SELECT f.id, 'new'::text, 'ready'::text, NULL::float8 FROM unnest(v_fast) AS f(id);`,
        `RETURN QUERY SELECT f.id, 'new'::text, CASE WHEN v_token IS NULL THEN 'ready' ELSE 'unacked' END, NULL::float8 FROM unnest(v_fast) AS f(id);`,
      ],
    ],
    'migration 12: enqueue',
  );
  const notifyReady = `PERFORM pg_notify('${ready}', '');`;
  const toFailed = replacedOnce(
    functionText(namedOutcomesSchema(S, K, channel), S, 'to_failed', 12),
    [['   WHERE id = r.id;\n  IF r.holds_slot THEN', `   WHERE id = r.id;\n  ${notifyReady}\n  IF r.holds_slot THEN`]],
    'migration 12: to_failed',
  );
  const requeue = replacedOnce(
    functionText(schemaV1(S, K, channel), S, 'requeue', 12),
    [
      [
        `  IF r.queue = '_failed' THEN\n    UPDATE ${S}.evals SET state = 'ready', ready_at = now() WHERE id = r.id;\n`,
        `  IF r.queue = '_failed' THEN\n    UPDATE ${S}.evals SET state = 'ready', ready_at = now() WHERE id = r.id;\n    ${notifyReady}\n`,
      ],
    ],
    'migration 12: requeue',
  );
  return `
ALTER TABLE ${S}.waiting_dequeues ADD COLUMN offer_channel text, ADD COLUMN offer_ms float8;

DROP FUNCTION ${S}.lease_ready(text[], integer, float8, uuid, float8);
${lease}
${enqueue}
${toFailed}
${requeue}
${genericPlansSchema(schema)}`;
}
