-- tickpool's PostgreSQL schema: the evaluation broker, the state store and the task store, whole.
--
-- The migration runner (src/postgres/migrate.ts) applies this file once per schema, in one transaction, and
-- replaces two placeholders first: {{schema}} with the schema's name (a validated lowercase identifier, so that it
-- reads the same quoted and in a channel name) and {{job_lock_space}} with the 32-bit key that puts this schema's
-- job locks in a key space of their own. docs/postgres.md explains the design: leases and tokens, fencing, the
-- counter row, waiting processes and offers, outcome notifications, and the lock order that rules out deadlocks.
-- test/postgres/schema.dump is what PostgreSQL holds after this file; a test keeps the two in step.

-- ---------------------------------------------------------------------------------------------------------------
-- The evaluation broker
-- ---------------------------------------------------------------------------------------------------------------

-- Enqueue order within a type, after priority and create index.
CREATE SEQUENCE "{{schema}}".eval_seq;

-- One row per evaluation. A delivery is the pair (id, token) while state = 'unacked'; its lease is lease_until, in
-- database time. `outcome` is set once (COALESCE): acked, failed, superseded or removed. `holds_slot` marks the one
-- evaluation per (namespace, job_id) that may be delivered; the others of its job wait as 'pending'.
CREATE TABLE "{{schema}}".evals (
  id text PRIMARY KEY,
  namespace text NOT NULL,
  job_id text NOT NULL,
  type text NOT NULL,
  priority integer NOT NULL,
  modify_index bigint NOT NULL,
  create_index bigint NOT NULL,
  seq bigint NOT NULL DEFAULT nextval('"{{schema}}".eval_seq'),
  body bytea NOT NULL,
  -- The process the evaluation was enqueued in: its outcome is notified there.
  origin uuid,
  state text NOT NULL CHECK (state IN ('ready', 'pending', 'unacked', 'waiting', 'cancelable', 'acked', 'removed')),
  -- The type's queue, or '_failed' once dead-lettered.
  queue text NOT NULL,
  holds_slot boolean NOT NULL DEFAULT false,
  deliveries integer NOT NULL DEFAULT 0,
  token text,
  -- The process that holds the current delivery.
  holder uuid,
  lease_until timestamptz,
  -- When a 'waiting' evaluation (delayed, or backing off after a nack) comes due.
  due_at timestamptz,
  -- The token of the delivery whose lease ran out: its late ack or nack is told 'timed_out'.
  timed_out_token text,
  last_reason jsonb,
  failure jsonb,
  outcome jsonb,
  value bytea,
  enqueued_at timestamptz NOT NULL DEFAULT now(),
  ready_at timestamptz,
  settled_at timestamptz
);
-- One per job: at most one evaluation of a (namespace, job_id) holds its slot.
CREATE UNIQUE INDEX evals_one_per_job ON "{{schema}}".evals (namespace, job_id) WHERE holds_slot;
-- A partial index per state that something looks up by; a state change rewrites the row into each index whose
-- predicate the new row meets, so there is no index over all live rows.
CREATE INDEX evals_ready ON "{{schema}}".evals (queue, priority DESC, create_index, seq) WHERE state = 'ready';
CREATE INDEX evals_pending ON "{{schema}}".evals (namespace, job_id, priority DESC, modify_index DESC, seq DESC) WHERE state = 'pending';
CREATE INDEX evals_leases ON "{{schema}}".evals (lease_until) WHERE state = 'unacked';
CREATE INDEX evals_due ON "{{schema}}".evals (due_at) WHERE state = 'waiting';
CREATE INDEX evals_settled ON "{{schema}}".evals (settled_at) WHERE state IN ('acked', 'removed', 'cancelable');

-- One row per process whose last fetch leased fewer rows than it asked for: the types it waits for, until when the
-- row stands (its polls renew it), and, when it takes offers, the channel it alone listens on and the lease an offer
-- to it gets. UNLOGGED: a hint rebuilt by the next fetches; losing it in a server crash only makes the next
-- enqueues notify everyone.
CREATE UNLOGGED TABLE "{{schema}}".waiting_dequeues (
  holder uuid PRIMARY KEY,
  types text[] NOT NULL,
  until timestamptz NOT NULL,
  offer_channel text,
  offer_ms float8
);

-- ---------------------------------------------------------------------------------------------------------------
-- The state store
-- ---------------------------------------------------------------------------------------------------------------

-- The counter row: every commit takes the next index from it and holds its row lock until it commits, so indexes
-- are gap-free and in commit order.
CREATE TABLE "{{schema}}".state_counter (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  index bigint NOT NULL
);
INSERT INTO "{{schema}}".state_counter (id, index) VALUES (true, 0);

-- The records, each with the indexes of the commits that created and last modified it.
CREATE TABLE "{{schema}}".state_records (
  tbl text NOT NULL,
  key text NOT NULL,
  value bytea NOT NULL,
  create_index bigint NOT NULL,
  modify_index bigint NOT NULL,
  PRIMARY KEY (tbl, key)
);

-- The change log: one row per commit, from which every process's replica catches up. A plan commits at most once.
CREATE TABLE "{{schema}}".state_log (
  index bigint PRIMARY KEY,
  plan_id uuid UNIQUE,
  changes bytea NOT NULL,
  committed_at timestamptz NOT NULL DEFAULT now()
);

-- ---------------------------------------------------------------------------------------------------------------
-- The task store
-- ---------------------------------------------------------------------------------------------------------------

-- Claim epochs: no two claims ever share one.
CREATE SEQUENCE "{{schema}}".task_epoch_seq;
-- Run log order.
CREATE SEQUENCE "{{schema}}".task_log_seq;
-- The order queued runs are handed out in.
CREATE SEQUENCE "{{schema}}".task_queue_seq;

-- The catalogue's version (moved by every declaration and removal) and size: a member's fair share of claims.
CREATE TABLE "{{schema}}".task_catalog (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  version bigint NOT NULL,
  task_count bigint NOT NULL
);
INSERT INTO "{{schema}}".task_catalog (id, version, task_count) VALUES (true, 0, 0);

-- Live engine processes. A member's lease is renewed only while it is live (NOT dead AND expires_at > now()); once
-- it has ended it cannot come back, and the process joins again as a new member.
CREATE TABLE "{{schema}}".task_members (
  id text PRIMARY KEY,
  joined_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  dead boolean NOT NULL DEFAULT false
);
CREATE INDEX task_members_live ON "{{schema}}".task_members (expires_at) WHERE NOT dead;

-- The shared catalogue of tasks.
CREATE TABLE "{{schema}}".tasks (
  id text PRIMARY KEY,
  definition bytea NOT NULL,
  hash text NOT NULL,
  retry integer NOT NULL,
  declared_at timestamptz NOT NULL DEFAULT now(),
  replaced_at timestamptz
);

-- Each task's claim (owner, epoch), live only while its owner's member row is, and its progress.
CREATE TABLE "{{schema}}".task_state (
  task_id text PRIMARY KEY REFERENCES "{{schema}}".tasks (id) ON DELETE CASCADE,
  owner text,
  epoch bigint NOT NULL DEFAULT 0,
  claimed_at timestamptz,
  latest_scheduled double precision NOT NULL,
  latest_completed double precision NOT NULL
);
CREATE INDEX task_state_owner ON "{{schema}}".task_state (owner) WHERE owner IS NOT NULL;
CREATE INDEX task_state_free ON "{{schema}}".task_state (task_id) WHERE owner IS NULL;

-- One row per (task, scheduled time): no scheduled time runs twice. A run is created only by inserting its row, in
-- the transaction that moves latest_scheduled (which never moves backward); finished rows behind latest_completed
-- go with their trimmed log entries.
CREATE TABLE "{{schema}}".task_runs (
  task_id text NOT NULL REFERENCES "{{schema}}".tasks (id) ON DELETE CASCADE,
  scheduled_for double precision NOT NULL,
  run_id text NOT NULL UNIQUE,
  run_at double precision NOT NULL,
  manual boolean NOT NULL,
  status text NOT NULL CHECK (status IN ('queued', 'scheduled', 'started', 'done')),
  epoch bigint NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  process text,
  queue_seq bigint,
  PRIMARY KEY (task_id, scheduled_for)
);
CREATE INDEX task_runs_live ON "{{schema}}".task_runs (task_id, queue_seq) WHERE status <> 'done';

-- The run log, newest first per task, trimmed to each task's runLogLimit.
CREATE TABLE "{{schema}}".task_run_log (
  run_id text PRIMARY KEY,
  task_id text NOT NULL REFERENCES "{{schema}}".tasks (id) ON DELETE CASCADE,
  seq bigint NOT NULL DEFAULT nextval('"{{schema}}".task_log_seq'),
  scheduled_for double precision NOT NULL,
  run_at double precision NOT NULL,
  manual boolean NOT NULL,
  status text NOT NULL,
  final_status text,
  attempts integer NOT NULL DEFAULT 0,
  processes jsonb NOT NULL DEFAULT '[]',
  error jsonb,
  value bytea,
  history jsonb NOT NULL DEFAULT '[]'
);
CREATE INDEX task_run_log_newest ON "{{schema}}".task_run_log (task_id, seq DESC);

-- ---------------------------------------------------------------------------------------------------------------
-- The evaluation broker: locks, refusals and notifications
-- ---------------------------------------------------------------------------------------------------------------

CREATE FUNCTION "{{schema}}".job_lock(p_namespace text, p_job text) RETURNS void LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock({{job_lock_space}}, hashtext(p_namespace || chr(31) || p_job))
$$;

CREATE FUNCTION "{{schema}}".job_try_lock(p_namespace text, p_job text) RETURNS boolean LANGUAGE sql AS $$
  SELECT pg_try_advisory_xact_lock({{job_lock_space}}, hashtext(p_namespace || chr(31) || p_job))
$$;

CREATE FUNCTION "{{schema}}".job_key(p_namespace text, p_job text) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
  SELECT hashtext(p_namespace || chr(31) || p_job)
$$;

-- Locks several jobs, in ascending key order (the lock order between transactions that lock more than one).
CREATE FUNCTION "{{schema}}".lock_jobs(p_namespaces text[], p_jobs text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_key integer;
BEGIN
  FOR v_key IN SELECT DISTINCT "{{schema}}".job_key(n, j) AS k FROM unnest(p_namespaces, p_jobs) AS t(n, j) ORDER BY k LOOP
    PERFORM pg_advisory_xact_lock({{job_lock_space}}, v_key);
  END LOOP;
END
$$;

-- Nomad's nackReenqueueDelay: none before any delivery, the initial delay after the first, then linear growth.
CREATE FUNCTION "{{schema}}".nack_delay_ms(p_deliveries integer, p_initial float8, p_subsequent float8) RETURNS float8
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_deliveries <= 0 THEN 0::float8 WHEN p_deliveries = 1 THEN p_initial ELSE (p_deliveries - 1) * p_subsequent END
$$;

-- Why a call that presents (id, token) is refused, or NULL when the token is the current delivery's.
CREATE FUNCTION "{{schema}}".refusal(r "{{schema}}".evals, p_token text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
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
CREATE FUNCTION "{{schema}}".lock_eval(p_id text) RETURNS "{{schema}}".evals LANGUAGE plpgsql AS $$
DECLARE
  r "{{schema}}".evals;
  v_namespace text;
  v_job text;
BEGIN
  LOOP
    SELECT e.namespace, e.job_id INTO v_namespace, v_job FROM "{{schema}}".evals e WHERE e.id = p_id;
    IF NOT FOUND THEN RETURN NULL; END IF;
    PERFORM "{{schema}}".job_lock(v_namespace, v_job);
    SELECT * INTO r FROM "{{schema}}".evals e WHERE e.id = p_id FOR UPDATE;
    IF NOT FOUND THEN RETURN NULL; END IF;
    -- The id was replaced by an evaluation of another job between the two reads: lock that job instead.
    IF r.namespace = v_namespace AND r.job_id = v_job THEN RETURN r; END IF;
  END LOOP;
END
$$;

-- The channel process p_origin alone listens on for outcomes (SchemaNames.processChannel in TypeScript).
CREATE FUNCTION "{{schema}}".outcome_channel(p_origin uuid) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT '{{schema}}_outcome_' || left(replace(p_origin::text, '-', ''), 12)
$$;

-- Tells each origin process which of its evaluations have an outcome now: {"origin", "ids"} on its own channel, or
-- the bare process id (look up everything awaited) when that would pass PostgreSQL's 8,000-byte payload limit.
CREATE FUNCTION "{{schema}}".notify_outcomes(p_ids text[], p_origins uuid[], p_actor uuid) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify("{{schema}}".outcome_channel(n.origin), CASE WHEN octet_length(n.payload) <= 7900 THEN n.payload ELSE n.origin::text END)
    FROM (SELECT o.origin, jsonb_build_object('origin', o.origin, 'ids', jsonb_agg(o.id))::text AS payload
            FROM unnest(p_ids, p_origins) AS o(id, origin)
           WHERE o.origin IS NOT NULL AND o.origin IS DISTINCT FROM p_actor
           GROUP BY o.origin) n;
END
$$;

-- Wakes one process standing as waiting for p_type (its id as the payload), or everyone ('').
CREATE FUNCTION "{{schema}}".notify_ready(p_type text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_holder uuid;
BEGIN
  IF p_type IS NOT NULL THEN
    SELECT w.holder INTO v_holder FROM "{{schema}}".waiting_dequeues w
     WHERE p_type = ANY(w.types) AND w.until > clock_timestamp()
     ORDER BY w.holder LIMIT 1;
  END IF;
  PERFORM pg_notify('{{schema}}_ready', coalesce(v_holder::text, ''));
END
$$;

CREATE FUNCTION "{{schema}}".promote(p_namespace text, p_job text, p_on_ack boolean, OUT promoted text, OUT canceled text[])
LANGUAGE plpgsql AS $$
DECLARE
  v_origins uuid[];
BEGIN
  SELECT e.id INTO promoted FROM "{{schema}}".evals e
   WHERE e.namespace = p_namespace AND e.job_id = p_job AND e.state = 'pending'
   ORDER BY e.priority DESC, e.modify_index DESC, e.seq DESC LIMIT 1 FOR UPDATE;
  IF promoted IS NULL THEN RETURN; END IF;
  UPDATE "{{schema}}".evals SET state = 'ready', holds_slot = true, ready_at = now() WHERE id = promoted;
  IF p_on_ack THEN
    WITH c AS (
      UPDATE "{{schema}}".evals e SET state = 'cancelable', settled_at = now(),
             outcome = jsonb_build_object('status', 'superseded', 'by', promoted)
       WHERE e.namespace = p_namespace AND e.job_id = p_job AND e.state = 'pending'
      RETURNING e.id, e.origin)
    SELECT array_agg(c.id), array_agg(c.origin) INTO canceled, v_origins FROM c;
    -- Their processes learn it now, not at their next poll.
    PERFORM "{{schema}}".notify_outcomes(canceled, v_origins, NULL);
  END IF;
  PERFORM pg_notify('{{schema}}_ready', '');
END
$$;

CREATE FUNCTION "{{schema}}".to_failed(r "{{schema}}".evals, p_error jsonb, p_actor uuid, OUT promoted text) LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "{{schema}}".evals SET state = 'ready', queue = '_failed', holds_slot = false, ready_at = now(), failure = p_error,
         settled_at = COALESCE(settled_at, now()),
         outcome = COALESCE(outcome, jsonb_build_object('status', 'failed', 'error', p_error))
   WHERE id = r.id;
  PERFORM pg_notify('{{schema}}_ready', '');
  IF r.holds_slot THEN
    SELECT p.promoted INTO promoted FROM "{{schema}}".promote(r.namespace, r.job_id, false) p;
  END IF;
  IF r.outcome IS NULL AND r.origin IS DISTINCT FROM p_actor AND r.origin IS NOT NULL THEN
    PERFORM "{{schema}}".notify_outcomes(ARRAY[r.id], ARRAY[r.origin], p_actor);
  END IF;
END
$$;

CREATE FUNCTION "{{schema}}".requeue(r "{{schema}}".evals, p_reason jsonb, p_timed_out boolean, p_limit integer, p_initial float8,
  p_subsequent float8, p_actor uuid, OUT failed boolean, OUT delay_ms float8, OUT promoted text) LANGUAGE plpgsql AS $$
DECLARE
  v_reason jsonb := COALESCE(p_reason, r.last_reason);
BEGIN
  failed := false;
  delay_ms := 0;
  UPDATE "{{schema}}".evals SET token = NULL, holder = NULL, lease_until = NULL, last_reason = v_reason,
         timed_out_token = CASE WHEN p_timed_out THEN r.token ELSE timed_out_token END
   WHERE id = r.id;
  IF r.queue = '_failed' THEN
    UPDATE "{{schema}}".evals SET state = 'ready', ready_at = now() WHERE id = r.id;
    PERFORM pg_notify('{{schema}}_ready', '');
  ELSIF r.deliveries >= p_limit THEN
    failed := true;
    SELECT f.promoted INTO promoted FROM "{{schema}}".to_failed(r, jsonb_build_object(
      'name', 'DeliveryLimitError', 'code', 'ERR_DELIVERY_LIMIT',
      'details', jsonb_build_object('evalId', r.id, 'deliveries', r.deliveries, 'limit', p_limit),
      'cause', v_reason), p_actor) f;
  ELSE
    delay_ms := "{{schema}}".nack_delay_ms(r.deliveries, p_initial, p_subsequent);
    IF delay_ms > 0 THEN
      -- It keeps its job's slot while it waits: the job stays serialized behind its own retry, as in Nomad.
      UPDATE "{{schema}}".evals SET state = 'waiting', due_at = now() + delay_ms * interval '1 millisecond' WHERE id = r.id;
    ELSE
      UPDATE "{{schema}}".evals SET state = 'ready', ready_at = now() WHERE id = r.id;
      PERFORM pg_notify('{{schema}}_ready', '');
    END IF;
  END IF;
END
$$;

-- ---------------------------------------------------------------------------------------------------------------
-- The evaluation broker: the calls a process makes
--
-- The per-call functions plan their statements once per session (plan_cache_mode = force_generic_plan): every
-- statement in them is an index look-up or an index-ordered scan whose shape does not depend on the values. A
-- function's SET lasts for the call, nested calls included.
-- ---------------------------------------------------------------------------------------------------------------

CREATE FUNCTION "{{schema}}".enqueue(p_ids text[], p_namespaces text[], p_jobs text[], p_types text[], p_priorities integer[],
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
    IF v_offer_ms IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "{{schema}}".evals e WHERE e.state = 'ready' AND e.queue = p_types[1]) THEN
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
        queue, holds_slot, ready_at, token, holder, lease_until, deliveries)
    SELECT i.id, i.namespace, i.job_id, i.type, i.priority, i.modify_index, i.create_index, i.body, p_origin,
        CASE WHEN v_token IS NULL THEN 'ready' ELSE 'unacked' END, i.type, true, now(),
        v_token, CASE WHEN v_token IS NOT NULL THEN v_offer_to END,
        CASE WHEN v_token IS NOT NULL THEN clock_timestamp() + v_offer_ms * interval '1 millisecond' END,
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
-- so concurrent dequeues never wait for each other nor take the same row. A fetch that leased fewer than it asked for
-- stands in waiting_dequeues for p_wait_ms (0: it does not), taking offers on p_offer_channel when given. The lease
-- commits without waiting for its WAL flush (docs/postgres.md says why that is safe).
CREATE FUNCTION "{{schema}}".lease_ready(p_types text[], p_max integer, p_lease_ms float8, p_holder uuid, p_wait_ms float8 DEFAULT 0, p_offer_channel text DEFAULT NULL)
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
      FROM unnest(p_types) AS t(queue)
      CROSS JOIN LATERAL (
        SELECT e.ctid, e.priority, e.create_index, e.seq FROM "{{schema}}".evals e
         WHERE e.state = 'ready' AND e.queue = t.queue
         ORDER BY e.priority DESC, e.create_index, e.seq
         LIMIT p_max FOR UPDATE SKIP LOCKED) c),
  picked AS MATERIALIZED (
    SELECT row_id FROM candidates ORDER BY priority DESC, rank, random() LIMIT p_max)
  UPDATE "{{schema}}".evals e
     SET state = 'unacked', token = gen_random_uuid()::text, holder = p_holder,
         lease_until = clock_timestamp() + p_lease_ms * interval '1 millisecond',
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

-- Gives a delivery back uncharged (fetched for a dequeue that went away before it was handed over).
CREATE FUNCTION "{{schema}}".give_back(p_id text, p_token text) RETURNS boolean LANGUAGE sql AS $$
  WITH g AS (
    UPDATE "{{schema}}".evals SET state = 'ready', token = NULL, holder = NULL, lease_until = NULL, ready_at = now(),
           deliveries = deliveries - CASE WHEN queue = '_failed' THEN 0 ELSE 1 END
     WHERE id = p_id AND token = p_token AND state = 'unacked'
    RETURNING id)
  SELECT count(*) > 0 FROM g
$$;

-- Acks a batch of deliveries with one UPDATE whose FROM reads each row's slot before the update; only jobs with
-- pending evaluations promote one. p_lease: refuse deliveries whose lease is over. Notifies the origins.
CREATE FUNCTION "{{schema}}".ack_rows(p_ids text[], p_tokens text[], p_values bytea[], p_indexes bigint[], p_attempts integer[],
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
    UPDATE "{{schema}}".evals e SET state = 'acked', holds_slot = false, lease_until = NULL, holder = NULL, settled_at = now(),
           outcome = COALESCE(e.outcome, jsonb_build_object('status', 'acked', 'index', x.idx, 'attempts', x.attempts,
             'deliveries', e.deliveries)),
           value = CASE WHEN e.outcome IS NULL THEN x.value ELSE e.value END
      FROM (SELECT x.*, before.holds_slot AS held_slot
              FROM unnest(p_ids, p_tokens, p_values, p_indexes, p_attempts) AS x(id, token, value, idx, attempts)
              JOIN "{{schema}}".evals before ON before.id = x.id) x
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
      SELECT DISTINCT e.namespace, e.job_id FROM "{{schema}}".evals e
        JOIN unnest(v_namespaces, v_jobs) AS j(namespace, job_id) ON e.namespace = j.namespace AND e.job_id = j.job_id
       WHERE e.state = 'pending'
    LOOP
      SELECT * INTO p FROM "{{schema}}".promote(v_promote.namespace, v_promote.job_id, true);
      id := NULL; deliveries := NULL; promoted := p.promoted; canceled := p.canceled;
      RETURN NEXT;
    END LOOP;
  END IF;
  IF v_origins IS NOT NULL THEN
    PERFORM pg_notify("{{schema}}".outcome_channel(n.origin), CASE WHEN octet_length(n.payload) <= 7900 THEN n.payload ELSE n.origin::text END)
      FROM (SELECT o.origin, jsonb_build_object('origin', o.origin, 'ids', jsonb_agg(o.id))::text AS payload
              FROM unnest(v_origins, v_settled) AS o(origin, id) GROUP BY o.origin) n;
  END IF;
END
$$;

-- Acks many deliveries at once, inside a plan commit that already holds their jobs' locks and their rows.
CREATE FUNCTION "{{schema}}".ack_fenced(p_ids text[], p_tokens text[], p_values bytea[], p_indexes bigint[],
  p_attempts integer[], p_actor uuid)
RETURNS TABLE (id text, deliveries integer, promoted text, canceled text[]) LANGUAGE sql
  SET plan_cache_mode = force_generic_plan AS $$
  SELECT * FROM "{{schema}}".ack_rows(p_ids, p_tokens, p_values, p_indexes, p_attempts, p_actor, false)
$$;

CREATE FUNCTION "{{schema}}".ack_many(p_ids text[], p_tokens text[], p_values bytea[], p_indexes bigint[],
  p_attempts integer[], p_namespaces text[], p_jobs text[], p_actor uuid)
RETURNS TABLE (id text, status text, deliveries integer, promoted text, canceled text[]) LANGUAGE plpgsql
  SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
  v_acked text[] := '{}';
  r record;
BEGIN
  PERFORM "{{schema}}".lock_jobs(p_namespaces, p_jobs);
  FOR r IN SELECT * FROM "{{schema}}".ack_rows(p_ids, p_tokens, p_values, p_indexes, p_attempts, p_actor, true) LOOP
    id := r.id; status := CASE WHEN r.id IS NULL THEN NULL ELSE 'ok' END; deliveries := r.deliveries;
    promoted := r.promoted; canceled := r.canceled;
    IF r.id IS NOT NULL THEN v_acked := v_acked || r.id; END IF;
    RETURN NEXT;
  END LOOP;
  IF cardinality(v_acked) = cardinality(p_ids) THEN RETURN; END IF;
  FOR r IN
    SELECT x.id, x.token, e AS row, (e.lease_until <= clock_timestamp()) AS expired
      FROM unnest(p_ids, p_tokens) AS x(id, token) LEFT JOIN "{{schema}}".evals e ON e.id = x.id
     WHERE NOT (x.id = ANY(v_acked))
  LOOP
    id := r.id; deliveries := NULL; promoted := NULL; canceled := NULL;
    status := coalesce("{{schema}}".refusal(r.row, r.token), CASE WHEN r.expired THEN 'expired' ELSE 'not_outstanding' END);
    RETURN NEXT;
  END LOOP;
END
$$;

CREATE FUNCTION "{{schema}}".ack(p_id text, p_token text, p_value bytea, p_index bigint, p_attempts integer, p_actor uuid,
  OUT status text, OUT deliveries integer, OUT promoted text, OUT canceled text[]) LANGUAGE plpgsql
  SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  r "{{schema}}".evals;
  p record;
BEGIN
  r := "{{schema}}".lock_eval(p_id);
  status := "{{schema}}".refusal(r, p_token);
  IF status IS NULL AND r.lease_until <= clock_timestamp() THEN status := 'expired'; END IF;
  IF status IS NOT NULL THEN RETURN; END IF;
  -- The token stays on the row: a caller whose connection broke mid-ack finds out by it whether the ack landed.
  UPDATE "{{schema}}".evals SET state = 'acked', holds_slot = false, lease_until = NULL, holder = NULL, settled_at = now(),
         outcome = COALESCE(outcome, jsonb_build_object('status', 'acked', 'index', p_index, 'attempts', p_attempts,
           'deliveries', r.deliveries)),
         value = CASE WHEN outcome IS NULL THEN p_value ELSE value END
   WHERE id = p_id;
  status := 'ok';
  deliveries := r.deliveries;
  IF r.holds_slot THEN
    SELECT * INTO p FROM "{{schema}}".promote(r.namespace, r.job_id, true);
    promoted := p.promoted;
    canceled := p.canceled;
  END IF;
  IF r.origin IS DISTINCT FROM p_actor AND r.origin IS NOT NULL THEN PERFORM "{{schema}}".notify_outcomes(ARRAY[r.id], ARRAY[r.origin], p_actor); END IF;
END
$$;

CREATE FUNCTION "{{schema}}".nack(p_id text, p_token text, p_reason jsonb, p_timed_out boolean, p_limit integer,
  p_initial float8, p_subsequent float8, p_actor uuid,
  OUT status text, OUT deliveries integer, OUT failed boolean, OUT delay_ms float8, OUT promoted text) LANGUAGE plpgsql
  SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  r "{{schema}}".evals;
  q record;
BEGIN
  r := "{{schema}}".lock_eval(p_id);
  status := "{{schema}}".refusal(r, p_token);
  IF status IS NOT NULL THEN RETURN; END IF;
  SELECT * INTO q FROM "{{schema}}".requeue(r, p_reason, p_timed_out, p_limit, p_initial, p_subsequent, p_actor);
  status := 'ok';
  deliveries := r.deliveries;
  failed := q.failed;
  delay_ms := q.delay_ms;
  promoted := q.promoted;
END
$$;

CREATE FUNCTION "{{schema}}".fail(p_id text, p_token text, p_reason jsonb, p_actor uuid,
  OUT status text, OUT deliveries integer, OUT promoted text) LANGUAGE plpgsql
  SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  r "{{schema}}".evals;
BEGIN
  r := "{{schema}}".lock_eval(p_id);
  status := "{{schema}}".refusal(r, p_token);
  IF status IS NOT NULL THEN RETURN; END IF;
  UPDATE "{{schema}}".evals SET token = NULL, holder = NULL, lease_until = NULL, last_reason = p_reason WHERE id = p_id;
  SELECT f.promoted INTO promoted FROM "{{schema}}".to_failed(r, p_reason, p_actor) f;
  status := 'ok';
  deliveries := r.deliveries;
END
$$;

CREATE FUNCTION "{{schema}}".remove(p_id text, p_token text, p_cause jsonb, p_actor uuid,
  OUT status text, OUT prior text, OUT promoted text) LANGUAGE plpgsql
  SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  r "{{schema}}".evals;
BEGIN
  r := "{{schema}}".lock_eval(p_id);
  IF r.id IS NULL OR r.state IN ('acked', 'removed') THEN status := 'absent'; RETURN; END IF;
  IF p_token IS NOT NULL AND p_token <> '' THEN
    status := "{{schema}}".refusal(r, p_token);
    IF status IS NOT NULL THEN RETURN; END IF;
  ELSIF r.state = 'unacked' THEN
    status := 'mismatch';
    RETURN;
  END IF;
  prior := CASE WHEN r.state = 'ready' AND r.queue = '_failed' THEN 'failed' ELSE r.state END;
  UPDATE "{{schema}}".evals SET state = 'removed', holds_slot = false, lease_until = NULL, holder = NULL, settled_at = now(),
         outcome = COALESCE(outcome, jsonb_build_object('status', 'removed', 'cause', p_cause))
   WHERE id = p_id;
  IF r.holds_slot THEN
    SELECT p.promoted INTO promoted FROM "{{schema}}".promote(r.namespace, r.job_id, false) p;
  END IF;
  IF r.outcome IS NULL AND r.origin IS DISTINCT FROM p_actor AND r.origin IS NOT NULL THEN
    PERFORM "{{schema}}".notify_outcomes(ARRAY[r.id], ARRAY[r.origin], p_actor);
  END IF;
  status := 'ok';
END
$$;

-- Every process runs this (no leader): leases that ran out are ended as nack timeouts, delays that are over admit
-- their evaluations. Bounded batches; rows another process is working on are skipped, not waited for.
CREATE FUNCTION "{{schema}}".reap(p_batch integer, p_limit integer, p_initial float8, p_subsequent float8, p_actor uuid)
RETURNS TABLE (id text, holder uuid, token text, deliveries integer, failed boolean, delay_ms float8, kind text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  r "{{schema}}".evals;
  q record;
  v_any_ready boolean := false;
BEGIN
  FOR r IN SELECT * FROM "{{schema}}".evals e WHERE e.state = 'unacked' AND e.lease_until <= now()
            ORDER BY e.lease_until LIMIT p_batch FOR UPDATE SKIP LOCKED LOOP
    IF NOT "{{schema}}".job_try_lock(r.namespace, r.job_id) THEN CONTINUE; END IF;
    SELECT * INTO q FROM "{{schema}}".requeue(r, jsonb_build_object('name', 'NackTimeoutReachedError',
      'code', 'ERR_NACK_TIMEOUT_REACHED', 'details', jsonb_build_object('evalId', r.id)),
      true, p_limit, p_initial, p_subsequent, p_actor);
    id := r.id; holder := r.holder; token := r.token; deliveries := r.deliveries; failed := q.failed;
    delay_ms := q.delay_ms; kind := 'lease';
    RETURN NEXT;
  END LOOP;
  FOR r IN SELECT * FROM "{{schema}}".evals e WHERE e.state = 'waiting' AND e.due_at <= now()
            ORDER BY e.due_at LIMIT p_batch FOR UPDATE SKIP LOCKED LOOP
    IF r.holds_slot THEN
      UPDATE "{{schema}}".evals SET state = 'ready', ready_at = now(), due_at = NULL WHERE id = r.id;
    ELSE
      IF NOT "{{schema}}".job_try_lock(r.namespace, r.job_id) THEN CONTINUE; END IF;
      PERFORM 1 FROM "{{schema}}".evals e WHERE e.namespace = r.namespace AND e.job_id = r.job_id AND e.holds_slot;
      IF FOUND THEN
        UPDATE "{{schema}}".evals SET state = 'pending', due_at = NULL WHERE id = r.id;
      ELSE
        UPDATE "{{schema}}".evals SET state = 'ready', holds_slot = true, ready_at = now(), due_at = NULL WHERE id = r.id;
      END IF;
    END IF;
    v_any_ready := true;
    id := r.id; holder := NULL; token := NULL; deliveries := r.deliveries; failed := false; delay_ms := 0; kind := 'due';
    RETURN NEXT;
  END LOOP;
  IF v_any_ready THEN PERFORM pg_notify('{{schema}}_ready', ''); END IF;
END
$$;

-- ---------------------------------------------------------------------------------------------------------------
-- The state store: plan commits
-- ---------------------------------------------------------------------------------------------------------------

-- A plan commit's records, log rows, counter and notification in one call. The counter moves only from p_from (the
-- index the committer locked and caught up to); answers false, writing nothing, when it was not there.
CREATE FUNCTION "{{schema}}".commit_writes(
  p_put_tbl text[], p_put_key text[], p_put_value bytea[], p_put_create bigint[], p_put_modify bigint[],
  p_del_tbl text[], p_del_key text[],
  p_log_index bigint[], p_log_plan uuid[], p_log_changes bytea[],
  p_from bigint, p_to bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "{{schema}}".state_counter SET index = p_to WHERE index = p_from;
  IF NOT FOUND THEN RETURN false; END IF;
  IF cardinality(p_put_tbl) > 0 THEN
    INSERT INTO "{{schema}}".state_records (tbl, key, value, create_index, modify_index)
    SELECT * FROM unnest(p_put_tbl, p_put_key, p_put_value, p_put_create, p_put_modify)
    ON CONFLICT (tbl, key) DO UPDATE SET value = EXCLUDED.value, create_index = EXCLUDED.create_index, modify_index = EXCLUDED.modify_index;
  END IF;
  IF cardinality(p_del_tbl) > 0 THEN
    DELETE FROM "{{schema}}".state_records r USING unnest(p_del_tbl, p_del_key) AS d(tbl, key) WHERE r.tbl = d.tbl AND r.key = d.key;
  END IF;
  INSERT INTO "{{schema}}".state_log (index, plan_id, changes) SELECT * FROM unnest(p_log_index, p_log_plan, p_log_changes);
  PERFORM pg_notify('{{schema}}_state', p_to::text);
  RETURN true;
END
$$;

-- The first row: the counter (locked) and the deliveries among p_ids that are still current (their rows locked,
-- after the jobs p_namespaces, p_jobs). Then up to p_limit log rows after p_after, one per row.
CREATE FUNCTION "{{schema}}".open_commit(p_after bigint, p_limit integer, p_namespaces text[], p_jobs text[], p_ids text[])
RETURNS TABLE (counter bigint, current_ids text[], current_tokens text[], index bigint, changes bytea) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_counter bigint;
  v_ids text[] := '{}';
  v_tokens text[] := '{}';
BEGIN
  SELECT c.index INTO v_counter FROM "{{schema}}".state_counter c FOR UPDATE;
  IF cardinality(p_ids) > 0 THEN
    IF cardinality(p_jobs) > 0 THEN PERFORM "{{schema}}".lock_jobs(p_namespaces, p_jobs); END IF;
    SELECT coalesce(array_agg(f.id) FILTER (WHERE f.current), '{}'), coalesce(array_agg(f.token) FILTER (WHERE f.current), '{}')
      INTO v_ids, v_tokens
      FROM (SELECT e.id, e.token, e.lease_until > clock_timestamp() AS current
              FROM "{{schema}}".evals e WHERE e.id = ANY(p_ids) AND e.state = 'unacked' ORDER BY e.id FOR UPDATE) f;
  END IF;
  RETURN QUERY SELECT v_counter, v_ids, v_tokens, NULL::bigint, NULL::bytea;
  RETURN QUERY
    SELECT NULL::bigint, NULL::text[], NULL::text[], l.index, l.changes FROM "{{schema}}".state_log l
     WHERE l.index > p_after AND l.index <= v_counter ORDER BY l.index LIMIT p_limit;
END
$$;

-- The first row says whether the writes were made (moved: the counter was at p_from); the rest are ack_fenced's.
-- No log rows: nothing is written and the counter stays. No acks: no rows after the first.
CREATE FUNCTION "{{schema}}".commit_batch(
  p_put_tbl text[], p_put_key text[], p_put_value bytea[], p_put_create bigint[], p_put_modify bigint[],
  p_del_tbl text[], p_del_key text[],
  p_log_index bigint[], p_log_plan uuid[], p_log_changes bytea[],
  p_from bigint, p_to bigint,
  p_ack_ids text[], p_ack_tokens text[], p_ack_values bytea[], p_ack_indexes bigint[], p_ack_attempts integer[],
  p_actor uuid)
RETURNS TABLE (moved boolean, id text, deliveries integer, promoted text, canceled text[]) LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  IF cardinality(p_log_index) > 0 AND NOT "{{schema}}".commit_writes(p_put_tbl, p_put_key, p_put_value, p_put_create, p_put_modify,
       p_del_tbl, p_del_key, p_log_index, p_log_plan, p_log_changes, p_from, p_to) THEN
    RETURN QUERY SELECT false, NULL::text, NULL::integer, NULL::text, NULL::text[];
    RETURN;
  END IF;
  RETURN QUERY SELECT true, NULL::text, NULL::integer, NULL::text, NULL::text[];
  IF cardinality(p_ack_ids) > 0 THEN
    RETURN QUERY SELECT NULL::boolean, a.id, a.deliveries, a.promoted, a.canceled
      FROM "{{schema}}".ack_fenced(p_ack_ids, p_ack_tokens, p_ack_values, p_ack_indexes, p_ack_attempts, p_actor) a;
  END IF;
END
$$;

-- ---------------------------------------------------------------------------------------------------------------
-- The task store
-- ---------------------------------------------------------------------------------------------------------------

-- The fence of every write about a run: the claim (task, epoch) is the member's and its lease is live. The claim row
-- stays locked until the write commits, so a takeover (which updates it) orders after the write.
CREATE FUNCTION "{{schema}}".task_fence(p_task text, p_epoch bigint, p_member text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM "{{schema}}".task_state WHERE task_id = p_task AND epoch = p_epoch AND owner = p_member FOR NO KEY UPDATE;
  IF NOT FOUND THEN RETURN false; END IF;
  PERFORM 1 FROM "{{schema}}".task_members WHERE id = p_member AND NOT dead AND expires_at > now();
  RETURN FOUND;
END $$;

CREATE FUNCTION "{{schema}}".task_log_trim(p_task text, p_limit integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE v_seq bigint;
BEGIN
  SELECT seq INTO v_seq FROM "{{schema}}".task_run_log WHERE task_id = p_task ORDER BY seq DESC OFFSET p_limit LIMIT 1;
  IF v_seq IS NULL THEN RETURN; END IF;
  WITH dropped AS (
    DELETE FROM "{{schema}}".task_run_log WHERE task_id = p_task AND final_status IS NOT NULL AND seq <= v_seq RETURNING run_id)
  DELETE FROM "{{schema}}".task_runs r USING dropped, "{{schema}}".task_state s
   WHERE r.run_id = dropped.run_id AND r.status = 'done' AND s.task_id = p_task AND r.scheduled_for <= s.latest_completed;
END $$;

CREATE FUNCTION "{{schema}}".task_log_insert(p_task text, p_run_id text, p_scheduled_for double precision, p_run_at double precision,
  p_manual boolean, p_when double precision, p_limit integer) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "{{schema}}".task_run_log (run_id, task_id, scheduled_for, run_at, manual, status, history)
    VALUES (p_run_id, p_task, p_scheduled_for, p_run_at, p_manual, 'scheduled',
            jsonb_build_array(jsonb_build_object('status', 'scheduled', 'when', p_when, 'attempt', 0)))
    ON CONFLICT (run_id) DO NOTHING;
  PERFORM "{{schema}}".task_log_trim(p_task, p_limit);
END $$;

CREATE FUNCTION "{{schema}}".task_log_final(p_run_id text, p_status text, p_when double precision, p_attempt integer, p_member text,
  p_error jsonb, p_value bytea) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "{{schema}}".task_run_log SET
    status = p_status,
    final_status = coalesce(final_status, p_status),
    attempts = greatest(attempts, p_attempt),
    error = coalesce(p_error, error),
    value = coalesce(p_value, value),
    history = history || jsonb_strip_nulls(jsonb_build_object('status', p_status, 'when', p_when, 'attempt', p_attempt,
      'process', p_member, 'error', p_error))
  WHERE run_id = p_run_id;
END $$;

-- A final status logged apart from the finish (a caller of finishRun that did not say how the run ended).
CREATE FUNCTION "{{schema}}".task_log_write(p_task text, p_epoch bigint, p_member text, p_run_id text, p_status text,
  p_when double precision, p_attempt integer, p_error jsonb, p_value bytea) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF NOT "{{schema}}".task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  PERFORM "{{schema}}".task_log_final(p_run_id, p_status, p_when, p_attempt, p_member, p_error, p_value);
  RETURN 'ok';
END $$;

-- The next scheduled run: compare-and-set of latest_scheduled, then the run row under its unique key.
-- 'stale': the claim is not current; 'moved': latest_scheduled was not p_expected (latest says what it is);
-- 'exists': a run for that time exists already (latest_scheduled moved past it all the same); 'created'.
CREATE FUNCTION "{{schema}}".task_create_run(p_task text, p_epoch bigint, p_member text, p_expected double precision,
  p_scheduled_for double precision, p_run_at double precision, p_run_id text, p_when double precision, p_limit integer)
  RETURNS TABLE (outcome text, latest double precision) LANGUAGE plpgsql AS $$
DECLARE v_latest double precision;
BEGIN
  IF NOT "{{schema}}".task_fence(p_task, p_epoch, p_member) THEN
    RETURN QUERY SELECT 'stale'::text, NULL::double precision;
    RETURN;
  END IF;
  UPDATE "{{schema}}".task_state SET latest_scheduled = greatest(latest_scheduled, p_scheduled_for)
    WHERE task_id = p_task AND latest_scheduled = p_expected RETURNING latest_scheduled INTO v_latest;
  IF NOT FOUND THEN
    SELECT s.latest_scheduled INTO v_latest FROM "{{schema}}".task_state s WHERE s.task_id = p_task;
    RETURN QUERY SELECT 'moved'::text, v_latest;
    RETURN;
  END IF;
  INSERT INTO "{{schema}}".task_runs (task_id, scheduled_for, run_id, run_at, manual, status, epoch)
    VALUES (p_task, p_scheduled_for, p_run_id, p_run_at, false, 'scheduled', p_epoch)
    ON CONFLICT (task_id, scheduled_for) DO NOTHING;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'exists'::text, v_latest;
    RETURN;
  END IF;
  PERFORM "{{schema}}".task_log_insert(p_task, p_run_id, p_scheduled_for, p_run_at, false, p_when, p_limit);
  RETURN QUERY SELECT 'created'::text, v_latest;
END $$;

-- The next scheduled run with its first attempt begun on p_member at p_when: task_create_run's outcomes, and on
-- 'created' the run row and its log entry as task_run_started would have left them for attempt 1.
CREATE FUNCTION "{{schema}}".task_create_started_run(p_task text, p_epoch bigint, p_member text, p_expected double precision,
  p_scheduled_for double precision, p_run_at double precision, p_run_id text, p_when double precision, p_limit integer)
  RETURNS TABLE (outcome text, latest double precision) LANGUAGE plpgsql AS $$
DECLARE v_latest double precision;
BEGIN
  -- task_fence's checks, with the compare-and-set as the claim row's lock (one write of the row, not a lock and then
  -- an update): the lease first, then the claim, locked by the update that moves latest_scheduled.
  PERFORM 1 FROM "{{schema}}".task_members WHERE id = p_member AND NOT dead AND expires_at > now();
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'stale'::text, NULL::double precision;
    RETURN;
  END IF;
  UPDATE "{{schema}}".task_state SET latest_scheduled = greatest(latest_scheduled, p_scheduled_for)
    WHERE task_id = p_task AND epoch = p_epoch AND owner = p_member AND latest_scheduled = p_expected
    RETURNING latest_scheduled INTO v_latest;
  IF NOT FOUND THEN
    IF NOT "{{schema}}".task_fence(p_task, p_epoch, p_member) THEN
      RETURN QUERY SELECT 'stale'::text, NULL::double precision;
      RETURN;
    END IF;
    SELECT s.latest_scheduled INTO v_latest FROM "{{schema}}".task_state s WHERE s.task_id = p_task;
    RETURN QUERY SELECT 'moved'::text, v_latest;
    RETURN;
  END IF;
  INSERT INTO "{{schema}}".task_runs (task_id, scheduled_for, run_id, run_at, manual, status, epoch, attempts, process)
    VALUES (p_task, p_scheduled_for, p_run_id, p_run_at, false, 'started', p_epoch, 1, p_member)
    ON CONFLICT (task_id, scheduled_for) DO NOTHING;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'exists'::text, v_latest;
    RETURN;
  END IF;
  INSERT INTO "{{schema}}".task_run_log (run_id, task_id, scheduled_for, run_at, manual, status, attempts, processes, history)
    VALUES (p_run_id, p_task, p_scheduled_for, p_run_at, false, 'started', 1, jsonb_build_array(p_member),
            jsonb_build_array(jsonb_build_object('status', 'scheduled', 'when', p_when, 'attempt', 0),
                              jsonb_build_object('status', 'started', 'when', p_when, 'attempt', 1, 'process', p_member)))
    ON CONFLICT (run_id) DO NOTHING;
  PERFORM "{{schema}}".task_log_trim(p_task, p_limit);
  RETURN QUERY SELECT 'created'::text, v_latest;
END $$;

-- The first attempt of a run made by task_create_started_run did not begin after all: the run is queued again with no
-- attempt (for whoever holds the claim next), and its log entry is as it was before the start. 'stale', 'gone', 'ok'.
CREATE FUNCTION "{{schema}}".task_unstart_run(p_task text, p_epoch bigint, p_member text, p_run_id text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF NOT "{{schema}}".task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  UPDATE "{{schema}}".task_runs SET status = 'queued', attempts = 0, process = NULL, queue_seq = nextval('"{{schema}}".task_queue_seq')
    WHERE task_id = p_task AND run_id = p_run_id AND epoch = p_epoch AND status = 'started' AND attempts = 1;
  IF NOT FOUND THEN RETURN 'gone'; END IF;
  UPDATE "{{schema}}".task_run_log SET status = 'scheduled', attempts = 0, processes = '[]'::jsonb,
    history = history - (jsonb_array_length(history) - 1)
    WHERE run_id = p_run_id AND history -> -1 ->> 'status' = 'started';
  RETURN 'ok';
END $$;

-- The oldest queued run (manual, or resumed after its process was lost), handed out.
CREATE FUNCTION "{{schema}}".task_take_queued(p_task text, p_epoch bigint, p_member text)
  RETURNS TABLE (outcome text, run_id text, scheduled_for double precision, run_at double precision, attempts integer, remaining bigint)
  LANGUAGE plpgsql AS $$
DECLARE v "{{schema}}".task_runs%ROWTYPE;
BEGIN
  IF NOT "{{schema}}".task_fence(p_task, p_epoch, p_member) THEN
    RETURN QUERY SELECT 'stale'::text, NULL::text, NULL::double precision, NULL::double precision, NULL::integer, NULL::bigint;
    RETURN;
  END IF;
  UPDATE "{{schema}}".task_runs r SET status = 'scheduled', epoch = p_epoch
    WHERE r.task_id = p_task AND r.scheduled_for = (
      SELECT q.scheduled_for FROM "{{schema}}".task_runs q WHERE q.task_id = p_task AND q.status = 'queued' ORDER BY q.queue_seq LIMIT 1)
    RETURNING r.* INTO v;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'none'::text, NULL::text, NULL::double precision, NULL::double precision, NULL::integer, 0::bigint;
    RETURN;
  END IF;
  RETURN QUERY SELECT 'taken'::text, v.run_id, v.scheduled_for, v.run_at, v.attempts,
    (SELECT count(*) FROM "{{schema}}".task_runs q WHERE q.task_id = p_task AND q.status = 'queued');
END $$;

-- A manual run under the same key: 'duplicate' while a run for that time lives, 'queued' otherwise.
CREATE FUNCTION "{{schema}}".task_force_run(p_task text, p_epoch bigint, p_member text, p_scheduled_for double precision,
  p_run_at double precision, p_run_id text, p_when double precision, p_limit integer) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF NOT "{{schema}}".task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  INSERT INTO "{{schema}}".task_runs AS r (task_id, scheduled_for, run_id, run_at, manual, status, epoch, queue_seq)
    VALUES (p_task, p_scheduled_for, p_run_id, p_run_at, true, 'queued', p_epoch, nextval('"{{schema}}".task_queue_seq'))
    ON CONFLICT (task_id, scheduled_for) DO UPDATE SET run_id = EXCLUDED.run_id, run_at = EXCLUDED.run_at, manual = true,
      status = 'queued', epoch = EXCLUDED.epoch, attempts = 0, process = NULL, queue_seq = EXCLUDED.queue_seq
    WHERE r.status = 'done';
  IF NOT FOUND THEN RETURN 'duplicate'; END IF;
  PERFORM "{{schema}}".task_log_insert(p_task, p_run_id, p_scheduled_for, p_run_at, true, p_when, p_limit);
  RETURN 'queued';
END $$;

-- An attempt starts on the member: 'stale', 'gone' (no live run of that id under this epoch) or 'ok'.
CREATE FUNCTION "{{schema}}".task_run_started(p_task text, p_epoch bigint, p_member text, p_run_id text, p_attempt integer,
  p_when double precision) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF NOT "{{schema}}".task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  UPDATE "{{schema}}".task_runs SET status = 'started', attempts = greatest(attempts, p_attempt), process = p_member
    WHERE task_id = p_task AND run_id = p_run_id AND epoch = p_epoch AND status IN ('scheduled', 'started');
  IF NOT FOUND THEN RETURN 'gone'; END IF;
  -- Once per attempt (a write retried after a lost answer adds nothing).
  UPDATE "{{schema}}".task_run_log SET status = 'started', attempts = greatest(attempts, p_attempt), processes = processes || to_jsonb(p_member),
    history = history || jsonb_build_object('status', 'started', 'when', p_when, 'attempt', p_attempt, 'process', p_member)
    WHERE run_id = p_run_id AND jsonb_array_length(processes) < p_attempt;
  RETURN 'ok';
END $$;

-- An attempt failed and the next one waits out its backoff (p_attempt is the one about to start).
CREATE FUNCTION "{{schema}}".task_run_retrying(p_task text, p_epoch bigint, p_member text, p_run_id text, p_attempt integer,
  p_when double precision, p_error jsonb) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF NOT "{{schema}}".task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  UPDATE "{{schema}}".task_runs SET status = 'scheduled'
    WHERE task_id = p_task AND run_id = p_run_id AND epoch = p_epoch AND status IN ('scheduled', 'started');
  IF NOT FOUND THEN RETURN 'gone'; END IF;
  UPDATE "{{schema}}".task_run_log SET status = 'scheduled', error = coalesce(p_error, error),
    history = history || jsonb_strip_nulls(jsonb_build_object('status', 'scheduled', 'when', p_when, 'attempt', p_attempt,
      'process', p_member, 'error', p_error))
    WHERE run_id = p_run_id;
  RETURN 'ok';
END $$;

-- A run ended: its row done, latest_completed moved (scheduled runs only), its final status logged when given.
-- Idempotent: finishing a run that is done already answers 'ok' and changes nothing.
CREATE FUNCTION "{{schema}}".task_finish_run(p_task text, p_epoch bigint, p_member text, p_run_id text, p_status text,
  p_when double precision, p_attempt integer, p_error jsonb, p_value bytea) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v_scheduled_for double precision; v_manual boolean;
BEGIN
  IF NOT "{{schema}}".task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  UPDATE "{{schema}}".task_runs SET status = 'done'
    WHERE task_id = p_task AND run_id = p_run_id AND epoch = p_epoch AND status <> 'done'
    RETURNING scheduled_for, manual INTO v_scheduled_for, v_manual;
  IF NOT FOUND THEN
    PERFORM 1 FROM "{{schema}}".task_runs WHERE task_id = p_task AND run_id = p_run_id AND status = 'done';
    RETURN CASE WHEN FOUND THEN 'ok' ELSE 'gone' END;
  END IF;
  IF NOT v_manual THEN
    UPDATE "{{schema}}".task_state SET latest_completed = greatest(latest_completed, v_scheduled_for) WHERE task_id = p_task;
  END IF;
  IF p_status IS NOT NULL THEN
    PERFORM "{{schema}}".task_log_final(p_run_id, p_status, p_when, p_attempt, p_member, p_error, p_value);
  END IF;
  RETURN 'ok';
END $$;

-- A run handed out here and given up before it began (its claim is handed over, or its scheduler stops): queued again,
-- for whoever holds the claim next (this member or another), so that its scheduled time still runs.
CREATE FUNCTION "{{schema}}".task_requeue_run(p_task text, p_epoch bigint, p_member text, p_run_id text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF NOT "{{schema}}".task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  UPDATE "{{schema}}".task_runs SET status = 'queued', queue_seq = nextval('"{{schema}}".task_queue_seq')
    WHERE task_id = p_task AND run_id = p_run_id AND epoch = p_epoch AND status = 'scheduled';
  RETURN CASE WHEN FOUND THEN 'ok' ELSE 'gone' END;
END $$;

-- Writes about runs, in the order given, each as its single function would make it; answers one row per write:
-- its position (from 1), its outcome, and for a creation the task's latest_scheduled as that function answers it.
-- p_kind: 'create-start' (p_expected, p_scheduled_for, p_run_at, p_when), 'start' (p_attempt, p_when) or 'finish'
-- (p_status, p_when, p_attempt, p_error, p_value; a null status logs nothing final).
CREATE FUNCTION "{{schema}}".task_run_writes(p_kind text[], p_task text[], p_epoch bigint[], p_member text[], p_run_id text[],
  p_expected double precision[], p_scheduled_for double precision[], p_run_at double precision[], p_when double precision[],
  p_attempt integer[], p_status text[], p_error jsonb[], p_value bytea[], p_limit integer)
  RETURNS TABLE (i integer, outcome text, latest double precision) LANGUAGE plpgsql AS $$
DECLARE k integer;
BEGIN
  FOR k IN 1 .. coalesce(cardinality(p_kind), 0) LOOP
    i := k;
    latest := NULL;
    CASE p_kind[k]
      WHEN 'create-start' THEN
        SELECT c.outcome, c.latest INTO outcome, latest FROM "{{schema}}".task_create_started_run(p_task[k], p_epoch[k], p_member[k],
          p_expected[k], p_scheduled_for[k], p_run_at[k], p_run_id[k], p_when[k], p_limit) c;
      WHEN 'start' THEN
        outcome := "{{schema}}".task_run_started(p_task[k], p_epoch[k], p_member[k], p_run_id[k], p_attempt[k], p_when[k]);
      WHEN 'finish' THEN
        outcome := "{{schema}}".task_finish_run(p_task[k], p_epoch[k], p_member[k], p_run_id[k], p_status[k], p_when[k],
          p_attempt[k], p_error[k], p_value[k]);
      ELSE
        RAISE EXCEPTION 'task_run_writes: unknown write kind %', p_kind[k] USING ERRCODE = '22023';
    END CASE;
    RETURN NEXT;
  END LOOP;
END $$;

-- The runs of tasks a member has just claimed that were live under an older claim (their process was lost, or
-- gave the task back with runs queued): handed out and never started, or between attempts, they are queued again;
-- an attempt in flight counts, and the run is queued again while the task's retry allows, else it fails with a
-- reason naming the lost process.
CREATE FUNCTION "{{schema}}".task_settle(p_tasks text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v record;
  v_error jsonb;
  v_when double precision := extract(epoch FROM now()) * 1000;
BEGIN
  FOR v IN
    SELECT r.task_id, r.scheduled_for, r.run_id, r.status, r.attempts, r.process, r.manual, t.retry
    FROM "{{schema}}".task_runs r JOIN "{{schema}}".tasks t ON t.id = r.task_id
    WHERE r.task_id = ANY (p_tasks) AND r.status IN ('scheduled', 'started')
    ORDER BY r.task_id, r.scheduled_for
    FOR UPDATE OF r
  LOOP
    IF v.status = 'scheduled' THEN
      UPDATE "{{schema}}".task_runs SET status = 'queued', queue_seq = nextval('"{{schema}}".task_queue_seq') WHERE run_id = v.run_id;
      CONTINUE;
    END IF;
    v_error := jsonb_build_object(
      'name', 'ThreadExitedError',
      'code', 'ERR_THREAD_EXITED',
      'message', format('Expected engine process %s to finish attempt %s of run %s of task %s, but that process was lost: its claim lease ended while the attempt ran',
        coalesce(v.process, '(unknown)'), v.attempts, v.run_id, v.task_id),
      'details', jsonb_build_object('process', v.process, 'attempt', v.attempts, 'runId', v.run_id, 'taskId', v.task_id));
    IF v.attempts <= v.retry THEN
      UPDATE "{{schema}}".task_runs SET status = 'queued', queue_seq = nextval('"{{schema}}".task_queue_seq') WHERE run_id = v.run_id;
      UPDATE "{{schema}}".task_run_log SET status = 'scheduled', error = v_error,
        history = history || jsonb_build_object('status', 'scheduled', 'when', v_when, 'attempt', v.attempts + 1, 'error', v_error)
        WHERE run_id = v.run_id;
    ELSE
      UPDATE "{{schema}}".task_runs SET status = 'done' WHERE run_id = v.run_id;
      IF NOT v.manual THEN
        UPDATE "{{schema}}".task_state SET latest_completed = greatest(latest_completed, v.scheduled_for) WHERE task_id = v.task_id;
      END IF;
      PERFORM "{{schema}}".task_log_final(v.run_id, 'failed', v_when, v.attempts, NULL, v_error, NULL);
    END IF;
  END LOOP;
END $$;

-- One round of a member: renew its lease (or join, when p_join), reap members whose lease ended (their claims are
-- freed), claim up to its fair share of free tasks (ceil(tasks / live members), at most p_max_claim now) and settle
-- their runs; answers what it claimed (each task's definition, claim, progress, queued runs and the times after its
-- latest_completed that have a run already), its share, the catalogue's version and when the next other lease ends.
-- {"lost": true} when the member's lease had ended: it must join again as a new member.
CREATE FUNCTION "{{schema}}".task_cycle(p_member text, p_ttl_ms integer, p_held integer, p_max_claim integer, p_join boolean)
  RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_expires timestamptz := now() + make_interval(secs => p_ttl_ms / 1000.0);
  v_claimed text[];
  v_rows jsonb := '[]'::jsonb;
  v_tasks bigint;
  v_members bigint;
  v_target bigint;
  v_want bigint;
  v_version bigint;
  v_next double precision;
BEGIN
  UPDATE "{{schema}}".task_members SET expires_at = v_expires WHERE id = p_member AND NOT dead AND expires_at > now();
  IF NOT FOUND THEN
    IF NOT p_join THEN RETURN jsonb_build_object('lost', true); END IF;
    INSERT INTO "{{schema}}".task_members (id, expires_at) VALUES (p_member, v_expires) ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN RETURN jsonb_build_object('lost', true); END IF;
  END IF;

  WITH expired AS (
    SELECT id FROM "{{schema}}".task_members WHERE NOT dead AND expires_at <= now() ORDER BY expires_at LIMIT 100 FOR UPDATE SKIP LOCKED
  ), reaped AS (
    UPDATE "{{schema}}".task_members m SET dead = true FROM expired WHERE m.id = expired.id RETURNING m.id
  )
  UPDATE "{{schema}}".task_state SET owner = NULL WHERE owner IN (SELECT id FROM reaped);
  DELETE FROM "{{schema}}".task_members WHERE dead AND expires_at < now() - interval '1 day';

  SELECT c.version, c.task_count INTO v_version, v_tasks FROM "{{schema}}".task_catalog c;
  SELECT count(*) INTO v_members FROM "{{schema}}".task_members WHERE NOT dead AND expires_at > now();
  v_target := ceil(v_tasks::numeric / greatest(v_members, 1));
  v_want := least(v_target - p_held, p_max_claim);
  IF v_want > 0 THEN
    WITH free AS (
      SELECT task_id FROM "{{schema}}".task_state WHERE owner IS NULL LIMIT v_want FOR UPDATE SKIP LOCKED
    ), claimed AS (
      UPDATE "{{schema}}".task_state s SET owner = p_member, epoch = nextval('"{{schema}}".task_epoch_seq'), claimed_at = now()
        FROM free WHERE s.task_id = free.task_id RETURNING s.task_id
    )
    SELECT array_agg(task_id ORDER BY task_id) INTO v_claimed FROM claimed;
    IF v_claimed IS NOT NULL THEN
      PERFORM "{{schema}}".task_settle(v_claimed);
      SELECT coalesce(jsonb_agg(jsonb_build_object(
          'id', t.id, 'definition', encode(t.definition, 'base64'), 'hash', t.hash, 'epoch', s.epoch,
          'latestScheduled', s.latest_scheduled, 'latestCompleted', s.latest_completed,
          'queued', (SELECT count(*) FROM "{{schema}}".task_runs r WHERE r.task_id = t.id AND r.status = 'queued'),
          'taken', (SELECT coalesce(jsonb_agg(r.scheduled_for), '[]'::jsonb) FROM "{{schema}}".task_runs r
                     WHERE r.task_id = t.id AND r.scheduled_for > s.latest_completed))), '[]'::jsonb)
        INTO v_rows
        FROM "{{schema}}".task_state s JOIN "{{schema}}".tasks t ON t.id = s.task_id WHERE s.task_id = ANY (v_claimed);
    END IF;
  END IF;

  SELECT extract(epoch FROM min(expires_at) - now()) * 1000 INTO v_next
    FROM "{{schema}}".task_members WHERE NOT dead AND id <> p_member;
  RETURN jsonb_build_object('lost', false, 'claimed', v_rows, 'target', v_target,
    'members', v_members, 'tasks', v_tasks, 'version', v_version, 'nextExpiryMs', v_next);
END $$;

-- Claims given back by their member (a hand-over, or its stop): free for the others at once.
CREATE FUNCTION "{{schema}}".task_give_back(p_member text, p_tasks text[], p_epochs bigint[]) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE v_count integer;
BEGIN
  UPDATE "{{schema}}".task_state s SET owner = NULL
    FROM unnest(p_tasks, p_epochs) AS g(task_id, epoch)
    WHERE s.task_id = g.task_id AND s.epoch = g.epoch AND s.owner = p_member;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  IF v_count > 0 THEN PERFORM pg_notify('{{schema}}_tasks', ''); END IF;
  RETURN v_count;
END $$;

-- A member leaves: whatever it still holds is freed and its lease ends now.
CREATE FUNCTION "{{schema}}".task_leave(p_member text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "{{schema}}".task_state SET owner = NULL WHERE owner = p_member;
  UPDATE "{{schema}}".task_members SET dead = true, expires_at = least(expires_at, now()) WHERE id = p_member;
  PERFORM pg_notify('{{schema}}_tasks', '');
END $$;

-- Declares a task: 'created', 'same' (nothing changed) or 'replaced' (a new definition from its next run on; p_meta,
-- when given, moves its progress forward only).
CREATE FUNCTION "{{schema}}".task_declare(p_id text, p_definition bytea, p_hash text, p_retry integer, p_start double precision,
  p_meta double precision) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO "{{schema}}".tasks (id, definition, hash, retry) VALUES (p_id, p_definition, p_hash, p_retry) ON CONFLICT (id) DO NOTHING;
  IF FOUND THEN
    INSERT INTO "{{schema}}".task_state (task_id, latest_scheduled, latest_completed) VALUES (p_id, p_start, p_start);
    UPDATE "{{schema}}".task_catalog SET version = version + 1, task_count = task_count + 1;
    PERFORM pg_notify('{{schema}}_tasks', p_id);
    RETURN 'created';
  END IF;
  PERFORM 1 FROM "{{schema}}".task_state WHERE task_id = p_id FOR NO KEY UPDATE;
  UPDATE "{{schema}}".tasks SET definition = p_definition, hash = p_hash, retry = p_retry, replaced_at = now()
    WHERE id = p_id AND hash <> p_hash;
  IF NOT FOUND THEN RETURN 'same'; END IF;
  IF p_meta IS NOT NULL THEN
    UPDATE "{{schema}}".task_state SET latest_scheduled = greatest(latest_scheduled, p_meta), latest_completed = greatest(latest_completed, p_meta)
      WHERE task_id = p_id;
  END IF;
  UPDATE "{{schema}}".task_catalog SET version = version + 1;
  PERFORM pg_notify('{{schema}}_tasks', p_id);
  RETURN 'replaced';
END $$;

-- Deletes a task everywhere (its claim, runs and log with it); false when there was none.
CREATE FUNCTION "{{schema}}".task_remove(p_id text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM "{{schema}}".task_state WHERE task_id = p_id FOR UPDATE;
  DELETE FROM "{{schema}}".tasks WHERE id = p_id;
  IF NOT FOUND THEN RETURN false; END IF;
  UPDATE "{{schema}}".task_catalog SET version = version + 1, task_count = task_count - 1;
  PERFORM pg_notify('{{schema}}_tasks', p_id);
  RETURN true;
END $$;
