/**
 * Version 1 of the backend's schema: the broker's evaluations and the state store's records, counter and log, and
 * the functions that change them. `S` is the quoted schema name; `K` the 32-bit key that puts this schema's job
 * locks in a key space of their own.
 *
 * Invariants the database itself keeps:
 * - One per job: at most one evaluation per (namespace, job_id) has `holds_slot` (a unique partial index). Every
 *   change of who holds a job's slot happens under that job's transaction-scoped advisory lock (admission's slow
 *   path, promotion on ack, release to `_failed`, removal, a delay coming due), except the lock-free admission of
 *   `enqueue`, which only the index guards: whoever it turns away lost a race (enqueue retries on its slow path, the
 *   reaper runs its batch again) and then sees the holder.
 * - Lock order, to rule out deadlocks: the state counter row, then job locks (ascending key), then evaluation rows.
 *   Whoever takes evaluation rows first (dequeue, the reaper, heartbeats) takes them with SKIP LOCKED and job locks
 *   only with `pg_try_advisory_xact_lock`, so it never waits while holding them. Migration 11's `waiting_dequeues`
 *   rows come after all of these: only fetches write them, after the rows they lease (its holder's, or one that
 *   ran out a minute ago), and a named process that passes a notification on deletes its own in a statement that
 *   takes nothing else, so a writer may wait only for another that holds nothing else it needs; enqueues read
 *   them without a lock.
 * - A delivery is the pair (id, token) while `state = 'unacked'`; its lease is `lease_until`, in database time.
 * - An evaluation whose outcome is known has `outcome` set, once (`COALESCE`): acked, failed, superseded or removed.
 * - Indexes of the state store are gap-free and in commit order: every commit takes the next one from the counter
 *   row, whose row lock it holds until it commits.
 */
export function schemaV1(S: string, K: number, channel: (name: string) => string): string {
  const ready = channel('ready');
  const outcome = channel('outcome');
  return `
CREATE SEQUENCE ${S}.eval_seq;

CREATE TABLE ${S}.evals (
  id text PRIMARY KEY,
  namespace text NOT NULL,
  job_id text NOT NULL,
  type text NOT NULL,
  priority integer NOT NULL,
  modify_index bigint NOT NULL,
  create_index bigint NOT NULL,
  seq bigint NOT NULL DEFAULT nextval('${S}.eval_seq'),
  body bytea NOT NULL,
  origin uuid,
  state text NOT NULL CHECK (state IN ('ready', 'pending', 'unacked', 'waiting', 'cancelable', 'acked', 'removed')),
  queue text NOT NULL,
  holds_slot boolean NOT NULL DEFAULT false,
  deliveries integer NOT NULL DEFAULT 0,
  token text,
  holder uuid,
  lease_until timestamptz,
  due_at timestamptz,
  timed_out_token text,
  last_reason jsonb,
  failure jsonb,
  outcome jsonb,
  value bytea,
  enqueued_at timestamptz NOT NULL DEFAULT now(),
  ready_at timestamptz,
  settled_at timestamptz
);
CREATE UNIQUE INDEX evals_one_per_job ON ${S}.evals (namespace, job_id) WHERE holds_slot;
CREATE INDEX evals_ready ON ${S}.evals (queue, priority DESC, create_index, seq) WHERE state = 'ready';
CREATE INDEX evals_pending ON ${S}.evals (namespace, job_id, priority DESC, modify_index DESC, seq DESC) WHERE state = 'pending';
CREATE INDEX evals_leases ON ${S}.evals (lease_until) WHERE state = 'unacked';
CREATE INDEX evals_due ON ${S}.evals (due_at) WHERE state = 'waiting';
CREATE INDEX evals_live ON ${S}.evals (state, queue) WHERE state NOT IN ('acked', 'removed');
CREATE INDEX evals_settled ON ${S}.evals (settled_at) WHERE state IN ('acked', 'removed', 'cancelable');

CREATE TABLE ${S}.state_counter (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  index bigint NOT NULL
);
INSERT INTO ${S}.state_counter (id, index) VALUES (true, 0);

CREATE TABLE ${S}.state_records (
  tbl text NOT NULL,
  key text NOT NULL,
  value bytea NOT NULL,
  create_index bigint NOT NULL,
  modify_index bigint NOT NULL,
  PRIMARY KEY (tbl, key)
);

CREATE TABLE ${S}.state_log (
  index bigint PRIMARY KEY,
  plan_id uuid UNIQUE,
  changes bytea NOT NULL,
  committed_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION ${S}.job_lock(p_namespace text, p_job text) RETURNS void LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(${K}, hashtext(p_namespace || chr(31) || p_job))
$$;

CREATE FUNCTION ${S}.job_try_lock(p_namespace text, p_job text) RETURNS boolean LANGUAGE sql AS $$
  SELECT pg_try_advisory_xact_lock(${K}, hashtext(p_namespace || chr(31) || p_job))
$$;

CREATE FUNCTION ${S}.job_key(p_namespace text, p_job text) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
  SELECT hashtext(p_namespace || chr(31) || p_job)
$$;

-- Locks several jobs, in ascending key order (the lock order between transactions that lock more than one).
CREATE FUNCTION ${S}.lock_jobs(p_namespaces text[], p_jobs text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_key integer;
BEGIN
  FOR v_key IN SELECT DISTINCT ${S}.job_key(n, j) AS k FROM unnest(p_namespaces, p_jobs) AS t(n, j) ORDER BY k LOOP
    PERFORM pg_advisory_xact_lock(${K}, v_key);
  END LOOP;
END
$$;

-- Nomad's nackReenqueueDelay: none before any delivery, the initial delay after the first, then linear growth.
CREATE FUNCTION ${S}.nack_delay_ms(p_deliveries integer, p_initial float8, p_subsequent float8) RETURNS float8
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_deliveries <= 0 THEN 0::float8 WHEN p_deliveries = 1 THEN p_initial ELSE (p_deliveries - 1) * p_subsequent END
$$;

-- Why a call that presents (id, token) is refused, or NULL when the token is the current delivery's.
CREATE FUNCTION ${S}.refusal(r ${S}.evals, p_token text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN r.id IS NULL OR r.state IN ('acked', 'removed') THEN
      CASE WHEN p_token <> '' AND p_token = r.timed_out_token THEN 'timed_out' ELSE 'not_outstanding' END
    WHEN r.state = 'unacked' AND r.token = p_token THEN NULL
    WHEN p_token <> '' AND p_token = r.timed_out_token THEN 'timed_out'
    WHEN r.state <> 'unacked' THEN 'not_outstanding'
    ELSE 'mismatch'
  END
$$;

-- The evaluation's row, locked, after its job's lock (the lock order). NULL when there is no such id.
CREATE FUNCTION ${S}.lock_eval(p_id text) RETURNS ${S}.evals LANGUAGE plpgsql AS $$
DECLARE
  r ${S}.evals;
  v_namespace text;
  v_job text;
BEGIN
  LOOP
    SELECT e.namespace, e.job_id INTO v_namespace, v_job FROM ${S}.evals e WHERE e.id = p_id;
    IF NOT FOUND THEN RETURN NULL; END IF;
    PERFORM ${S}.job_lock(v_namespace, v_job);
    SELECT * INTO r FROM ${S}.evals e WHERE e.id = p_id FOR UPDATE;
    IF NOT FOUND THEN RETURN NULL; END IF;
    -- The id was replaced by an evaluation of another job between the two reads: lock that job instead.
    IF r.namespace = v_namespace AND r.job_id = v_job THEN RETURN r; END IF;
  END LOOP;
END
$$;

-- The job's slot was given up: its best pending evaluation takes it. On ack the others are superseded (cancelable);
-- when the holder went to _failed or was removed they stay pending (newer work, not duplicates of finished work).
CREATE FUNCTION ${S}.promote(p_namespace text, p_job text, p_on_ack boolean, OUT promoted text, OUT canceled text[])
LANGUAGE plpgsql AS $$
BEGIN
  SELECT e.id INTO promoted FROM ${S}.evals e
   WHERE e.namespace = p_namespace AND e.job_id = p_job AND e.state = 'pending'
   ORDER BY e.priority DESC, e.modify_index DESC, e.seq DESC LIMIT 1 FOR UPDATE;
  IF promoted IS NULL THEN RETURN; END IF;
  UPDATE ${S}.evals SET state = 'ready', holds_slot = true, ready_at = now() WHERE id = promoted;
  IF p_on_ack THEN
    WITH c AS (
      UPDATE ${S}.evals e SET state = 'cancelable', settled_at = now(),
             outcome = jsonb_build_object('status', 'superseded', 'by', promoted)
       WHERE e.namespace = p_namespace AND e.job_id = p_job AND e.state = 'pending'
      RETURNING e.id)
    SELECT array_agg(c.id) INTO canceled FROM c;
  END IF;
  PERFORM pg_notify('${ready}', '');
END
$$;

-- Dead-letters a locked evaluation (its delivery, if any, already ended) and gives up its job's slot.
CREATE FUNCTION ${S}.to_failed(r ${S}.evals, p_error jsonb, p_actor uuid, OUT promoted text) LANGUAGE plpgsql AS $$
BEGIN
  UPDATE ${S}.evals SET state = 'ready', queue = '_failed', holds_slot = false, ready_at = now(), failure = p_error,
         settled_at = COALESCE(settled_at, now()),
         outcome = COALESCE(outcome, jsonb_build_object('status', 'failed', 'error', p_error))
   WHERE id = r.id;
  IF r.holds_slot THEN
    SELECT p.promoted INTO promoted FROM ${S}.promote(r.namespace, r.job_id, false) p;
  END IF;
  IF r.outcome IS NULL AND r.origin IS DISTINCT FROM p_actor AND r.origin IS NOT NULL THEN
    PERFORM pg_notify('${outcome}', r.origin::text);
  END IF;
END
$$;

-- A delivery ended without an ack (a nack, or its lease ran out): back to its queue after the nack delay for its
-- delivery count, or to _failed at the delivery limit. A dead-lettered one goes straight back to _failed.
CREATE FUNCTION ${S}.requeue(r ${S}.evals, p_reason jsonb, p_timed_out boolean, p_limit integer, p_initial float8,
  p_subsequent float8, p_actor uuid, OUT failed boolean, OUT delay_ms float8, OUT promoted text) LANGUAGE plpgsql AS $$
DECLARE
  v_reason jsonb := COALESCE(p_reason, r.last_reason);
BEGIN
  failed := false;
  delay_ms := 0;
  UPDATE ${S}.evals SET token = NULL, holder = NULL, lease_until = NULL, last_reason = v_reason,
         timed_out_token = CASE WHEN p_timed_out THEN r.token ELSE timed_out_token END
   WHERE id = r.id;
  IF r.queue = '_failed' THEN
    UPDATE ${S}.evals SET state = 'ready', ready_at = now() WHERE id = r.id;
  ELSIF r.deliveries >= p_limit THEN
    failed := true;
    SELECT f.promoted INTO promoted FROM ${S}.to_failed(r, jsonb_build_object(
      'name', 'DeliveryLimitError', 'code', 'ERR_DELIVERY_LIMIT',
      'details', jsonb_build_object('evalId', r.id, 'deliveries', r.deliveries, 'limit', p_limit),
      'cause', v_reason), p_actor) f;
  ELSE
    delay_ms := ${S}.nack_delay_ms(r.deliveries, p_initial, p_subsequent);
    IF delay_ms > 0 THEN
      -- It keeps its job's slot while it waits: the job stays serialized behind its own retry, as in Nomad.
      UPDATE ${S}.evals SET state = 'waiting', due_at = now() + delay_ms * interval '1 millisecond' WHERE id = r.id;
    ELSE
      UPDATE ${S}.evals SET state = 'ready', ready_at = now() WHERE id = r.id;
      PERFORM pg_notify('${ready}', '');
    END IF;
  END IF;
END
$$;

-- Admission of a batch, in the given order. Returns each id with 'new' (admitted now) or 'held' (the id is already
-- held: nothing changed). An id that was acked or removed is new work again.
--
-- The common case is set-based and takes no lock: every evaluation due now goes in as its job's slot holder, and
-- the unique partial index turns away whatever cannot be (its job's slot is held, its id is known; PostgreSQL
-- waits for an uncommitted holder, so a concurrent ack that frees the slot is seen). Only what the index turned
-- away, and delayed or failed evaluations, take the slow path, row by row, under their jobs' locks (ascending key
-- order, so that concurrent batches cannot deadlock): there an evaluation becomes pending behind its job's holder.
CREATE FUNCTION ${S}.enqueue(p_ids text[], p_namespaces text[], p_jobs text[], p_types text[], p_priorities integer[],
  p_modify bigint[], p_create bigint[], p_wait_ms float8[], p_wait_until_ms float8[], p_bodies bytea[],
  p_failures jsonb[], p_origin uuid)
RETURNS TABLE (id text, admitted text, state text, due_in_ms float8) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  i integer;
  v_fast text[];
  v_slow integer[];
  v_state text;
  v_due timestamptz;
  v_held boolean;
  v_inserted integer;
  v_any_ready boolean := false;
BEGIN
  WITH input AS (
    SELECT t.* FROM unnest(p_ids, p_namespaces, p_jobs, p_types, p_priorities, p_modify, p_create, p_bodies, p_failures,
                           p_wait_ms, p_wait_until_ms)
      WITH ORDINALITY AS t(id, namespace, job_id, type, priority, modify_index, create_index, body, failure, wait_ms, wait_until_ms, ord)
  ), once AS (
    -- An id given twice in one batch takes the slow path: the first one in is admitted, the later ones are held.
    SELECT i.*, count(*) OVER (PARTITION BY i.id) AS copies FROM input i
  ), inserted AS (
    INSERT INTO ${S}.evals AS e (id, namespace, job_id, type, priority, modify_index, create_index, body, origin, state,
        queue, holds_slot, ready_at)
    SELECT i.id, i.namespace, i.job_id, i.type, i.priority, i.modify_index, i.create_index, i.body, p_origin, 'ready',
        i.type, true, now()
      FROM once i
     WHERE i.copies = 1 AND i.failure IS NULL AND coalesce(i.wait_ms, 0) <= 0
       AND (i.wait_until_ms IS NULL OR to_timestamp(i.wait_until_ms / 1000.0) <= now())
     ORDER BY i.ord
    ON CONFLICT DO NOTHING
    RETURNING e.id)
  SELECT array_agg(inserted.id) INTO v_fast FROM inserted;
  IF v_fast IS NOT NULL THEN v_any_ready := true; END IF;

  SELECT array_agg(t.ord ORDER BY t.ord) INTO v_slow
    FROM unnest(p_ids) WITH ORDINALITY AS t(id, ord) LEFT JOIN unnest(v_fast) AS f(id) ON f.id = t.id
   WHERE f.id IS NULL;
  IF v_slow IS NOT NULL THEN
    PERFORM ${S}.lock_jobs(array(SELECT p_namespaces[o] FROM unnest(v_slow) AS o), array(SELECT p_jobs[o] FROM unnest(v_slow) AS o));
  END IF;

  -- The fast ones first, then the others in batch order (the caller matches rows to its batch by id).
  RETURN QUERY SELECT f.id, 'new'::text, 'ready'::text, NULL::float8 FROM unnest(v_fast) AS f(id);
  FOREACH i IN ARRAY coalesce(v_slow, '{}'::integer[]) LOOP
    LOOP
      SELECT e.state INTO v_state FROM ${S}.evals e WHERE e.id = p_ids[i];
      IF FOUND AND v_state NOT IN ('acked', 'removed') THEN
        id := p_ids[i]; admitted := 'held'; state := v_state; due_in_ms := NULL;
        EXIT;
      END IF;
      IF FOUND THEN
        DELETE FROM ${S}.evals e WHERE e.id = p_ids[i] AND e.state IN ('acked', 'removed');
      END IF;
      v_due := NULL;
      IF p_wait_ms[i] IS NOT NULL AND p_wait_ms[i] > 0 THEN v_due := now() + p_wait_ms[i] * interval '1 millisecond'; END IF;
      IF p_wait_until_ms[i] IS NOT NULL AND (v_due IS NULL OR to_timestamp(p_wait_until_ms[i] / 1000.0) > v_due) THEN
        v_due := to_timestamp(p_wait_until_ms[i] / 1000.0);
      END IF;
      v_held := false;
      IF p_failures[i] IS NOT NULL THEN
        v_state := 'ready';
      ELSIF v_due IS NOT NULL AND v_due > now() THEN
        v_state := 'waiting';
      ELSE
        v_due := NULL;
        PERFORM 1 FROM ${S}.evals e WHERE e.namespace = p_namespaces[i] AND e.job_id = p_jobs[i] AND e.holds_slot;
        IF FOUND THEN v_state := 'pending'; ELSE v_state := 'ready'; v_held := true; END IF;
      END IF;
      INSERT INTO ${S}.evals AS e (id, namespace, job_id, type, priority, modify_index, create_index, body, origin, state,
          queue, holds_slot, due_at, ready_at, failure, outcome, settled_at)
      VALUES (p_ids[i], p_namespaces[i], p_jobs[i], p_types[i], p_priorities[i], p_modify[i], p_create[i], p_bodies[i],
          p_origin, v_state,
          CASE WHEN p_failures[i] IS NULL THEN p_types[i] ELSE '_failed' END,
          v_held, CASE WHEN v_state = 'waiting' THEN v_due END, CASE WHEN v_state = 'ready' THEN now() END,
          p_failures[i],
          CASE WHEN p_failures[i] IS NULL THEN NULL ELSE jsonb_build_object('status', 'failed', 'error', p_failures[i]) END,
          CASE WHEN p_failures[i] IS NULL THEN NULL ELSE now() END)
      ON CONFLICT DO NOTHING;
      GET DIAGNOSTICS v_inserted = ROW_COUNT;
      IF v_inserted > 0 THEN
        id := p_ids[i]; admitted := 'new'; state := v_state;
        due_in_ms := CASE WHEN v_state = 'waiting' THEN extract(epoch FROM v_due - now()) * 1000 END;
        IF v_held THEN v_any_ready := true; END IF;
        EXIT;
      END IF;
      -- Turned away: the id was admitted meanwhile (found above on the next turn), or the job's slot was taken by a
      -- lock-free admission that committed while we waited (pending on the next turn).
    END LOOP;
    RETURN NEXT;
  END LOOP;
  IF v_any_ready THEN PERFORM pg_notify('${ready}', ''); END IF;
END
$$;

CREATE FUNCTION ${S}.ack(p_id text, p_token text, p_value bytea, p_index bigint, p_attempts integer, p_actor uuid,
  OUT status text, OUT deliveries integer, OUT promoted text, OUT canceled text[]) LANGUAGE plpgsql AS $$
DECLARE
  r ${S}.evals;
  p record;
BEGIN
  r := ${S}.lock_eval(p_id);
  status := ${S}.refusal(r, p_token);
  IF status IS NULL AND r.lease_until <= clock_timestamp() THEN status := 'expired'; END IF;
  IF status IS NOT NULL THEN RETURN; END IF;
  -- The token stays on the row: a caller whose connection broke mid-ack finds out by it whether the ack landed.
  UPDATE ${S}.evals SET state = 'acked', holds_slot = false, lease_until = NULL, holder = NULL, settled_at = now(),
         outcome = COALESCE(outcome, jsonb_build_object('status', 'acked', 'index', p_index, 'attempts', p_attempts,
           'deliveries', r.deliveries)),
         value = CASE WHEN outcome IS NULL THEN p_value ELSE value END
   WHERE id = p_id;
  status := 'ok';
  deliveries := r.deliveries;
  IF r.holds_slot THEN
    SELECT * INTO p FROM ${S}.promote(r.namespace, r.job_id, true);
    promoted := p.promoted;
    canceled := p.canceled;
  END IF;
  IF r.origin IS DISTINCT FROM p_actor AND r.origin IS NOT NULL THEN PERFORM pg_notify('${outcome}', r.origin::text); END IF;
END
$$;

-- Acks many deliveries at once, inside a plan commit that already holds their jobs' locks and their rows (checked
-- current there). Set-based; only jobs with pending evaluations promote one, each under the lock already held.
CREATE FUNCTION ${S}.ack_fenced(p_ids text[], p_tokens text[], p_values bytea[], p_indexes bigint[], p_attempts integer[],
  p_actor uuid)
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
  WITH x AS (
    SELECT * FROM unnest(p_ids, p_tokens, p_values, p_indexes, p_attempts) AS x(id, token, value, idx, attempts)
  ), old AS (
    SELECT e.id, e.holds_slot, e.namespace, e.job_id, e.origin, e.deliveries
      FROM ${S}.evals e JOIN x ON x.id = e.id AND e.token = x.token
     WHERE e.id = ANY(p_ids) AND e.state = 'unacked'
  ), done AS (
    UPDATE ${S}.evals e SET state = 'acked', holds_slot = false, lease_until = NULL, holder = NULL, settled_at = now(),
           outcome = COALESCE(e.outcome, jsonb_build_object('status', 'acked', 'index', x.idx, 'attempts', x.attempts,
             'deliveries', e.deliveries)),
           value = CASE WHEN e.outcome IS NULL THEN x.value ELSE e.value END
      FROM x WHERE e.id = ANY(p_ids) AND e.id = x.id AND e.token = x.token AND e.state = 'unacked'
    RETURNING e.id)
  SELECT array_agg(old.id), array_agg(old.deliveries),
         array_agg(old.namespace) FILTER (WHERE old.holds_slot), array_agg(old.job_id) FILTER (WHERE old.holds_slot),
         array_agg(DISTINCT old.origin) FILTER (WHERE old.origin IS NOT NULL AND old.origin IS DISTINCT FROM p_actor)
    INTO v_ids, v_deliveries, v_namespaces, v_jobs, v_origins
    FROM old JOIN done ON done.id = old.id;
  IF v_ids IS NULL THEN RETURN; END IF;
  FOR i IN 1 .. array_length(v_ids, 1) LOOP
    id := v_ids[i]; deliveries := v_deliveries[i]; promoted := NULL; canceled := NULL;
    RETURN NEXT;
  END LOOP;
  FOR v_promote IN
    SELECT DISTINCT e.namespace, e.job_id FROM ${S}.evals e
      JOIN unnest(v_namespaces, v_jobs) AS j(namespace, job_id) ON e.namespace = j.namespace AND e.job_id = j.job_id
     WHERE e.state = 'pending'
  LOOP
    SELECT * INTO p FROM ${S}.promote(v_promote.namespace, v_promote.job_id, true);
    id := NULL; deliveries := NULL; promoted := p.promoted; canceled := p.canceled;
    RETURN NEXT;
  END LOOP;
  IF v_origins IS NOT NULL THEN
    PERFORM pg_notify('${outcome}', o::text) FROM unnest(v_origins) AS o;
  END IF;
END
$$;

-- Acks a batch of deliveries (their jobs named by the caller) in one call: the jobs' locks first (ascending key), then
-- the rows of those still current (token, lease not over), then the set-based ack. Each id answers 'ok' or why not;
-- rows without an id report what the acks promoted.
CREATE FUNCTION ${S}.ack_many(p_ids text[], p_tokens text[], p_values bytea[], p_indexes bigint[], p_attempts integer[],
  p_namespaces text[], p_jobs text[], p_actor uuid)
RETURNS TABLE (id text, status text, deliveries integer, promoted text, canceled text[]) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_current text[];
  r record;
BEGIN
  PERFORM ${S}.lock_jobs(p_namespaces, p_jobs);
  SELECT array_agg(c.id) INTO v_current FROM (
    SELECT e.id FROM ${S}.evals e JOIN unnest(p_ids, p_tokens) AS x(id, token) ON e.id = x.id AND e.token = x.token
     WHERE e.id = ANY(p_ids) AND e.state = 'unacked' AND e.lease_until > clock_timestamp()
     ORDER BY e.id FOR UPDATE OF e) c;
  FOR r IN
    SELECT * FROM ${S}.ack_fenced(
      array(SELECT x.id FROM unnest(p_ids) WITH ORDINALITY AS x(id, o) WHERE x.id = ANY(coalesce(v_current, '{}')) ORDER BY x.o),
      array(SELECT p_tokens[x.o] FROM unnest(p_ids) WITH ORDINALITY AS x(id, o) WHERE x.id = ANY(coalesce(v_current, '{}')) ORDER BY x.o),
      array(SELECT p_values[x.o] FROM unnest(p_ids) WITH ORDINALITY AS x(id, o) WHERE x.id = ANY(coalesce(v_current, '{}')) ORDER BY x.o),
      array(SELECT p_indexes[x.o] FROM unnest(p_ids) WITH ORDINALITY AS x(id, o) WHERE x.id = ANY(coalesce(v_current, '{}')) ORDER BY x.o),
      array(SELECT p_attempts[x.o] FROM unnest(p_ids) WITH ORDINALITY AS x(id, o) WHERE x.id = ANY(coalesce(v_current, '{}')) ORDER BY x.o),
      p_actor)
  LOOP
    id := r.id; status := CASE WHEN r.id IS NULL THEN NULL ELSE 'ok' END; deliveries := r.deliveries;
    promoted := r.promoted; canceled := r.canceled;
    RETURN NEXT;
  END LOOP;
  FOR r IN
    SELECT x.id, x.token, e AS row, (e.lease_until <= clock_timestamp()) AS expired
      FROM unnest(p_ids, p_tokens) AS x(id, token) LEFT JOIN ${S}.evals e ON e.id = x.id
     WHERE NOT (x.id = ANY(coalesce(v_current, '{}')))
  LOOP
    id := r.id; deliveries := NULL; promoted := NULL; canceled := NULL;
    status := coalesce(${S}.refusal(r.row, r.token), CASE WHEN r.expired THEN 'expired' ELSE 'not_outstanding' END);
    RETURN NEXT;
  END LOOP;
END
$$;

CREATE FUNCTION ${S}.nack(p_id text, p_token text, p_reason jsonb, p_timed_out boolean, p_limit integer,
  p_initial float8, p_subsequent float8, p_actor uuid,
  OUT status text, OUT deliveries integer, OUT failed boolean, OUT delay_ms float8, OUT promoted text) LANGUAGE plpgsql AS $$
DECLARE
  r ${S}.evals;
  q record;
BEGIN
  r := ${S}.lock_eval(p_id);
  status := ${S}.refusal(r, p_token);
  IF status IS NOT NULL THEN RETURN; END IF;
  SELECT * INTO q FROM ${S}.requeue(r, p_reason, p_timed_out, p_limit, p_initial, p_subsequent, p_actor);
  status := 'ok';
  deliveries := r.deliveries;
  failed := q.failed;
  delay_ms := q.delay_ms;
  promoted := q.promoted;
END
$$;

CREATE FUNCTION ${S}.fail(p_id text, p_token text, p_reason jsonb, p_actor uuid,
  OUT status text, OUT deliveries integer, OUT promoted text) LANGUAGE plpgsql AS $$
DECLARE
  r ${S}.evals;
BEGIN
  r := ${S}.lock_eval(p_id);
  status := ${S}.refusal(r, p_token);
  IF status IS NOT NULL THEN RETURN; END IF;
  UPDATE ${S}.evals SET token = NULL, holder = NULL, lease_until = NULL, last_reason = p_reason WHERE id = p_id;
  SELECT f.promoted INTO promoted FROM ${S}.to_failed(r, p_reason, p_actor) f;
  status := 'ok';
  deliveries := r.deliveries;
END
$$;

-- Gives a delivery back uncharged (fetched for a dequeue that went away before it was handed over).
CREATE FUNCTION ${S}.give_back(p_id text, p_token text) RETURNS boolean LANGUAGE sql AS $$
  WITH g AS (
    UPDATE ${S}.evals SET state = 'ready', token = NULL, holder = NULL, lease_until = NULL, ready_at = now(),
           deliveries = deliveries - CASE WHEN queue = '_failed' THEN 0 ELSE 1 END
     WHERE id = p_id AND token = p_token AND state = 'unacked'
    RETURNING id)
  SELECT count(*) > 0 FROM g
$$;

-- Takes an evaluation out in whatever state it is: one in flight needs its current token, one not in flight none.
CREATE FUNCTION ${S}.remove(p_id text, p_token text, p_cause jsonb, p_actor uuid,
  OUT status text, OUT prior text, OUT promoted text) LANGUAGE plpgsql AS $$
DECLARE
  r ${S}.evals;
BEGIN
  r := ${S}.lock_eval(p_id);
  IF r.id IS NULL OR r.state IN ('acked', 'removed') THEN status := 'absent'; RETURN; END IF;
  IF p_token IS NOT NULL AND p_token <> '' THEN
    status := ${S}.refusal(r, p_token);
    IF status IS NOT NULL THEN RETURN; END IF;
  ELSIF r.state = 'unacked' THEN
    status := 'mismatch';
    RETURN;
  END IF;
  prior := CASE WHEN r.state = 'ready' AND r.queue = '_failed' THEN 'failed' ELSE r.state END;
  UPDATE ${S}.evals SET state = 'removed', holds_slot = false, lease_until = NULL, holder = NULL, settled_at = now(),
         outcome = COALESCE(outcome, jsonb_build_object('status', 'removed', 'cause', p_cause))
   WHERE id = p_id;
  IF r.holds_slot THEN
    SELECT p.promoted INTO promoted FROM ${S}.promote(r.namespace, r.job_id, false) p;
  END IF;
  IF r.outcome IS NULL AND r.origin IS DISTINCT FROM p_actor AND r.origin IS NOT NULL THEN
    PERFORM pg_notify('${outcome}', r.origin::text);
  END IF;
  status := 'ok';
END
$$;

-- Every process runs this (no leader): leases that ran out are ended as nack timeouts, delays that are over admit
-- their evaluations. Bounded batches; rows another process is working on are skipped, not waited for.
CREATE FUNCTION ${S}.reap(p_batch integer, p_limit integer, p_initial float8, p_subsequent float8, p_actor uuid)
RETURNS TABLE (id text, holder uuid, token text, deliveries integer, failed boolean, delay_ms float8, kind text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  r ${S}.evals;
  q record;
  v_any_ready boolean := false;
BEGIN
  FOR r IN SELECT * FROM ${S}.evals e WHERE e.state = 'unacked' AND e.lease_until <= now()
            ORDER BY e.lease_until LIMIT p_batch FOR UPDATE SKIP LOCKED LOOP
    IF NOT ${S}.job_try_lock(r.namespace, r.job_id) THEN CONTINUE; END IF;
    SELECT * INTO q FROM ${S}.requeue(r, jsonb_build_object('name', 'NackTimeoutReachedError',
      'code', 'ERR_NACK_TIMEOUT_REACHED', 'details', jsonb_build_object('evalId', r.id)),
      true, p_limit, p_initial, p_subsequent, p_actor);
    id := r.id; holder := r.holder; token := r.token; deliveries := r.deliveries; failed := q.failed;
    delay_ms := q.delay_ms; kind := 'lease';
    RETURN NEXT;
  END LOOP;
  FOR r IN SELECT * FROM ${S}.evals e WHERE e.state = 'waiting' AND e.due_at <= now()
            ORDER BY e.due_at LIMIT p_batch FOR UPDATE SKIP LOCKED LOOP
    IF r.holds_slot THEN
      UPDATE ${S}.evals SET state = 'ready', ready_at = now(), due_at = NULL WHERE id = r.id;
    ELSE
      IF NOT ${S}.job_try_lock(r.namespace, r.job_id) THEN CONTINUE; END IF;
      PERFORM 1 FROM ${S}.evals e WHERE e.namespace = r.namespace AND e.job_id = r.job_id AND e.holds_slot;
      IF FOUND THEN
        UPDATE ${S}.evals SET state = 'pending', due_at = NULL WHERE id = r.id;
      ELSE
        UPDATE ${S}.evals SET state = 'ready', holds_slot = true, ready_at = now(), due_at = NULL WHERE id = r.id;
      END IF;
    END IF;
    v_any_ready := true;
    id := r.id; holder := NULL; token := NULL; deliveries := r.deliveries; failed := false; delay_ms := 0; kind := 'due';
    RETURN NEXT;
  END LOOP;
  IF v_any_ready THEN PERFORM pg_notify('${ready}', ''); END IF;
END
$$;
`;
}
