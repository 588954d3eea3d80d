-- What an operator sees of the broker and may do to it (engine.admin): evaluations listed by state in enqueue
-- order, one replayed out of '_failed', a type paused for the whole cluster, and when the current delivery began.
-- Placeholders as in 001_schema.sql.

-- When the current (or last) delivery was leased: the start of an evaluation's delivery record. No index reads it.
ALTER TABLE "{{schema}}".evals ADD COLUMN leased_at timestamptz;

-- Listing by state in enqueue order: one partial index per state that a listing reads by seq, entered only by rows
-- in that state. 'unacked' has none: its rows are the deliveries in flight, read through evals_leases and sorted.
CREATE INDEX evals_ready_seq ON "{{schema}}".evals (seq) WHERE state = 'ready' AND queue <> '_failed';
CREATE INDEX evals_failed_seq ON "{{schema}}".evals (seq) WHERE state = 'ready' AND queue = '_failed';
CREATE INDEX evals_pending_seq ON "{{schema}}".evals (seq) WHERE state = 'pending';
CREATE INDEX evals_waiting_seq ON "{{schema}}".evals (seq) WHERE state = 'waiting';

-- Types no process of the schema leases (nor is offered) until they are resumed; deliveries in flight go on.
CREATE TABLE "{{schema}}".paused_types (
  type text PRIMARY KEY,
  paused_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION "{{schema}}".pause_type(p_type text) RETURNS void LANGUAGE sql AS $$
  INSERT INTO "{{schema}}".paused_types (type) VALUES (p_type) ON CONFLICT (type) DO NOTHING
$$;

-- Resumed: every process looks for ready work again (the ready notification), as after any change that makes some.
CREATE FUNCTION "{{schema}}".resume_type(p_type text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM "{{schema}}".paused_types WHERE type = p_type;
  IF FOUND THEN PERFORM pg_notify('{{schema}}_ready', ''); END IF;
END
$$;

-- A failed evaluation that is not in flight back to its type's queue as if new: no deliveries counted, its failure
-- and outcome cleared (so that its outcome is stored anew), its job's slot asked for again under the job's lock:
-- ready holding the slot when the job has no holder, pending behind the holder otherwise. NULL when p_id is not
-- such an evaluation; else its origin (whose handle, in that process, waits for the new outcome).
CREATE FUNCTION "{{schema}}".replay(p_id text, OUT replayed boolean, OUT origin uuid) LANGUAGE plpgsql AS $$
DECLARE
  r "{{schema}}".evals;
  v_slot boolean;
BEGIN
  replayed := false;
  r := "{{schema}}".lock_eval(p_id);
  IF r.id IS NULL OR r.state <> 'ready' OR r.queue <> '_failed' THEN RETURN; END IF;
  PERFORM 1 FROM "{{schema}}".evals e WHERE e.namespace = r.namespace AND e.job_id = r.job_id AND e.holds_slot;
  v_slot := NOT FOUND;
  UPDATE "{{schema}}".evals SET queue = r.type, state = CASE WHEN v_slot THEN 'ready' ELSE 'pending' END, holds_slot = v_slot,
         deliveries = 0, failure = NULL, outcome = NULL, value = NULL, settled_at = NULL,
         ready_at = CASE WHEN v_slot THEN now() END, token = NULL, holder = NULL, lease_until = NULL, due_at = NULL
   WHERE id = p_id;
  IF v_slot THEN PERFORM "{{schema}}".notify_ready(r.type); END IF;
  replayed := true;
  origin := r.origin;
END
$$;

CREATE OR REPLACE FUNCTION "{{schema}}".enqueue(p_ids text[], p_namespaces text[], p_jobs text[], p_types text[], p_priorities integer[],
  p_modify bigint[], p_create bigint[], p_wait_ms float8[], p_wait_until_ms float8[], p_bodies bytea[],
  p_failures jsonb[], p_origin uuid)
RETURNS TABLE (id text, admitted text, state text, due_in_ms float8) LANGUAGE plpgsql
  SET plan_cache_mode = force_generic_plan AS $$
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
  v_offer_to uuid;
  v_offer_ms float8;
  v_offer_channel text;
  v_offer text;
  v_token text;
  v_failed_ready boolean := false;
BEGIN
  -- An offer: one evaluation, ready at once, whose body (5,000 bytes at most; base64 makes 4 bytes of 3) and offer
  -- (7,900 at most) fit a notification, which PostgreSQL refuses over 8,000 bytes.
  IF cardinality(p_ids) = 1 AND p_failures[1] IS NULL AND coalesce(p_wait_ms[1], 0) <= 0 AND p_wait_until_ms[1] IS NULL
     AND octet_length(p_bodies[1]) <= 5000 THEN
    -- The key-share lock holds off the row's DELETE (a process leaving, or no longer standing) until this commits, so
    -- that the leaving process's last look for deliveries of its own comes after any offer made to it.
    SELECT w.holder, w.offer_ms, w.offer_channel INTO v_offer_to, v_offer_ms, v_offer_channel FROM "{{schema}}".waiting_dequeues w
     WHERE p_types[1] = ANY(w.types) AND w.until > clock_timestamp()
     ORDER BY w.holder LIMIT 1 FOR KEY SHARE;
    -- No offer of a paused type: the process would start what the operator held back.
    IF v_offer_ms IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "{{schema}}".evals e WHERE e.state = 'ready' AND e.queue = p_types[1])
       AND NOT EXISTS (SELECT 1 FROM "{{schema}}".paused_types p WHERE p.type = p_types[1]) THEN
      v_token := gen_random_uuid()::text;
      v_offer := json_build_object('offer', v_offer_to, 'id', p_ids[1], 'token', v_token, 'queue', p_types[1],
        'body', encode(p_bodies[1], 'base64'))::text;
      IF octet_length(v_offer) > 7900 THEN
        v_token := NULL;
      END IF;
    END IF;
  END IF;
  WITH input AS (
    SELECT t.* FROM unnest(p_ids, p_namespaces, p_jobs, p_types, p_priorities, p_modify, p_create, p_bodies, p_failures,
                           p_wait_ms, p_wait_until_ms)
      WITH ORDINALITY AS t(id, namespace, job_id, type, priority, modify_index, create_index, body, failure, wait_ms, wait_until_ms, ord)
  ), once AS (
    -- An id given twice in one batch takes the slow path: the first one in is admitted, the later ones are held.
    SELECT i.*, count(*) OVER (PARTITION BY i.id) AS copies FROM input i
  ), inserted AS (
    INSERT INTO "{{schema}}".evals AS e (id, namespace, job_id, type, priority, modify_index, create_index, body, origin, state,
        queue, holds_slot, ready_at, token, holder, lease_until, leased_at, deliveries)
    SELECT i.id, i.namespace, i.job_id, i.type, i.priority, i.modify_index, i.create_index, i.body, p_origin,
        CASE WHEN v_token IS NULL THEN 'ready' ELSE 'unacked' END, i.type, true, now(),
        v_token, CASE WHEN v_token IS NOT NULL THEN v_offer_to END,
        CASE WHEN v_token IS NOT NULL THEN clock_timestamp() + v_offer_ms * interval '1 millisecond' END,
        CASE WHEN v_token IS NOT NULL THEN clock_timestamp() END,
        CASE WHEN v_token IS NULL THEN 0 ELSE 1 END
      FROM once i
     WHERE i.copies = 1 AND i.failure IS NULL AND coalesce(i.wait_ms, 0) <= 0
       AND (i.wait_until_ms IS NULL OR to_timestamp(i.wait_until_ms / 1000.0) <= now())
     ORDER BY i.ord
    ON CONFLICT DO NOTHING
    RETURNING e.id)
  SELECT array_agg(inserted.id) INTO v_fast FROM inserted;
  IF v_fast IS NOT NULL AND v_token IS NULL THEN v_any_ready := true; END IF;
  IF v_fast IS NOT NULL AND v_token IS NOT NULL THEN
    PERFORM pg_notify(v_offer_channel, v_offer);
  END IF;

  SELECT array_agg(t.ord ORDER BY t.ord) INTO v_slow
    FROM unnest(p_ids) WITH ORDINALITY AS t(id, ord) LEFT JOIN unnest(v_fast) AS f(id) ON f.id = t.id
   WHERE f.id IS NULL;
  IF v_slow IS NOT NULL THEN
    PERFORM "{{schema}}".lock_jobs(array(SELECT p_namespaces[o] FROM unnest(v_slow) AS o), array(SELECT p_jobs[o] FROM unnest(v_slow) AS o));
  END IF;

  -- The fast ones first, then the others in batch order (the caller matches rows to its batch by id).
  RETURN QUERY SELECT f.id, 'new'::text, CASE WHEN v_token IS NULL THEN 'ready' ELSE 'unacked' END, NULL::float8 FROM unnest(v_fast) AS f(id);
  FOREACH i IN ARRAY coalesce(v_slow, '{}'::integer[]) LOOP
    LOOP
      SELECT e.state INTO v_state FROM "{{schema}}".evals e WHERE e.id = p_ids[i];
      IF FOUND AND v_state NOT IN ('acked', 'removed') THEN
        id := p_ids[i]; admitted := 'held'; state := v_state; due_in_ms := NULL;
        EXIT;
      END IF;
      IF FOUND THEN
        DELETE FROM "{{schema}}".evals e WHERE e.id = p_ids[i] AND e.state IN ('acked', 'removed');
      END IF;
      v_due := NULL;
      IF p_wait_ms[i] IS NOT NULL AND p_wait_ms[i] > 0 THEN v_due := now() + p_wait_ms[i] * interval '1 millisecond'; END IF;
      IF p_wait_until_ms[i] IS NOT NULL AND (v_due IS NULL OR to_timestamp(p_wait_until_ms[i] / 1000.0) > v_due) THEN
        v_due := to_timestamp(p_wait_until_ms[i] / 1000.0);
      END IF;
      v_held := false;
      IF p_failures[i] IS NOT NULL THEN
        v_state := 'ready';
        v_failed_ready := true;
      ELSIF v_due IS NOT NULL AND v_due > now() THEN
        v_state := 'waiting';
      ELSE
        v_due := NULL;
        PERFORM 1 FROM "{{schema}}".evals e WHERE e.namespace = p_namespaces[i] AND e.job_id = p_jobs[i] AND e.holds_slot;
        IF FOUND THEN v_state := 'pending'; ELSE v_state := 'ready'; v_held := true; END IF;
      END IF;
      INSERT INTO "{{schema}}".evals AS e (id, namespace, job_id, type, priority, modify_index, create_index, body, origin, state,
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
  IF v_any_ready THEN PERFORM "{{schema}}".notify_ready(CASE WHEN cardinality(p_ids) = 1 THEN p_types[1] END); END IF;
  IF v_failed_ready THEN PERFORM pg_notify('{{schema}}_ready', ''); END IF;
END
$$;

-- Leases up to p_max of the best ready evaluations across p_types in one statement: priority first; within a type
-- FIFO (create index, then enqueue order); ties between types at random. Candidates are taken FOR UPDATE SKIP LOCKED,
-- so concurrent dequeues never wait for each other nor take the same row. Paused types are skipped. A fetch that leased fewer than it asked for
-- stands in waiting_dequeues for p_wait_ms (0: it does not), taking offers on p_offer_channel when given. The lease
-- commits without waiting for its WAL flush (docs/postgres.md says why that is safe).
CREATE OR REPLACE FUNCTION "{{schema}}".lease_ready(p_types text[], p_max integer, p_lease_ms float8, p_holder uuid, p_wait_ms float8 DEFAULT 0, p_offer_channel text DEFAULT NULL)
RETURNS TABLE (id text, body bytea, queue text, deliveries integer, token text, priority integer, create_index bigint, seq bigint)
LANGUAGE plpgsql
  SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  v_leased integer;
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);
  RETURN QUERY
  WITH candidates AS MATERIALIZED (
    SELECT c.ctid AS row_id, c.priority,
           row_number() OVER (PARTITION BY t.queue ORDER BY c.priority DESC, c.create_index, c.seq) AS rank
      FROM (SELECT u.queue FROM unnest(p_types) AS u(queue)
             WHERE NOT EXISTS (SELECT 1 FROM "{{schema}}".paused_types p WHERE p.type = u.queue)) AS t
      CROSS JOIN LATERAL (
        SELECT e.ctid, e.priority, e.create_index, e.seq FROM "{{schema}}".evals e
         WHERE e.state = 'ready' AND e.queue = t.queue
         ORDER BY e.priority DESC, e.create_index, e.seq
         LIMIT p_max FOR UPDATE SKIP LOCKED) c),
  picked AS MATERIALIZED (
    SELECT row_id FROM candidates ORDER BY priority DESC, rank, random() LIMIT p_max)
  UPDATE "{{schema}}".evals e
     SET state = 'unacked', token = gen_random_uuid()::text, holder = p_holder,
         lease_until = clock_timestamp() + p_lease_ms * interval '1 millisecond', leased_at = clock_timestamp(),
         deliveries = e.deliveries + CASE WHEN e.queue = '_failed' THEN 0 ELSE 1 END
   WHERE e.ctid = ANY(ARRAY(SELECT row_id FROM picked))
  RETURNING e.id, e.body, e.queue, e.deliveries, e.token, e.priority, e.create_index, e.seq;
  GET DIAGNOSTICS v_leased = ROW_COUNT;
  IF v_leased < p_max AND p_wait_ms > 0 THEN
    INSERT INTO "{{schema}}".waiting_dequeues AS w (holder, types, until, offer_channel, offer_ms)
    VALUES (p_holder, p_types, clock_timestamp() + p_wait_ms * interval '1 millisecond', p_offer_channel,
            CASE WHEN p_offer_channel IS NOT NULL THEN p_lease_ms END)
    ON CONFLICT (holder) DO UPDATE SET types = EXCLUDED.types, until = EXCLUDED.until, offer_channel = EXCLUDED.offer_channel,
        offer_ms = EXCLUDED.offer_ms;
    -- Rows of processes that ended without leaving (a crash): gone a minute after their time ran out.
    DELETE FROM "{{schema}}".waiting_dequeues w WHERE w.until < clock_timestamp() - interval '1 minute';
  ELSE
    DELETE FROM "{{schema}}".waiting_dequeues w WHERE w.holder = p_holder;
  END IF;
END
$$;
