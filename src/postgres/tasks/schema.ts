/**
 * The task store's schema (migration 2): the shared catalogue of tasks, the members (live engine processes) whose
 * leases cover their claims, each task's claim and progress, one run row per (task, scheduled time), the run log,
 * and the functions that change them. `S` is the quoted schema name.
 *
 * Invariants the database itself keeps:
 * - A claim is (owner, epoch) on the task's `task_state` row; the epoch comes from a sequence, so no two claims ever
 *   share one, and a claim is live only while its owner's member row is (`NOT dead AND expires_at > now()`,
 *   database time). A member's lease is renewed only while it is live: once expired it cannot come back, and a
 *   process whose lease ended joins again as a new member.
 * - Fence: every write about a run (create, start, retry, finish, the latest scheduled and completed times) goes
 *   through `task_fence`, which checks the claim and its lease and locks the claim row until the write commits. A
 *   takeover updates that row first, so it orders after any write it did not refuse, and settles what it finds.
 * - No scheduled time twice: `task_runs` has one row per (task_id, scheduled_for); a run is created only by inserting
 *   that row, in the same transaction as the compare-and-set of `latest_scheduled`, which never moves backward.
 *   Manual runs take the same key: a live row refuses a second one, a finished row is reused.
 * - Lock order, to rule out deadlocks: a task's claim row (`task_state`) before its `tasks` row, its run rows and
 *   its log rows; the catalogue row last. Whoever takes claim rows of many tasks at once takes them with SKIP LOCKED.
 */
/**
 * The statement of `task_log_final` (a run's final status in the log, once: `final_status` keeps the first), with
 * the function's parameters: migration 2 wraps it in a SQL function, migration 3 in a PL/pgSQL one.
 */
export function logFinalStatement(S: string): string {
  return `UPDATE ${S}.task_run_log SET
    status = p_status,
    final_status = coalesce(final_status, p_status),
    attempts = greatest(attempts, p_attempt),
    error = coalesce(p_error, error),
    value = coalesce(p_value, value),
    history = history || jsonb_strip_nulls(jsonb_build_object('status', p_status, 'when', p_when, 'attempt', p_attempt,
      'process', p_member, 'error', p_error))
  WHERE run_id = p_run_id`;
}

export function tasksSchema(S: string, channel: (name: string) => string): string {
  const notify = channel('tasks');
  return `
CREATE SEQUENCE ${S}.task_epoch_seq;
CREATE SEQUENCE ${S}.task_log_seq;
CREATE SEQUENCE ${S}.task_queue_seq;

CREATE TABLE ${S}.task_catalog (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  version bigint NOT NULL,
  task_count bigint NOT NULL
);
INSERT INTO ${S}.task_catalog (id, version, task_count) VALUES (true, 0, 0);

CREATE TABLE ${S}.task_members (
  id text PRIMARY KEY,
  joined_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL,
  dead boolean NOT NULL DEFAULT false
);
CREATE INDEX task_members_live ON ${S}.task_members (expires_at) WHERE NOT dead;

CREATE TABLE ${S}.tasks (
  id text PRIMARY KEY,
  definition bytea NOT NULL,
  hash text NOT NULL,
  retry integer NOT NULL,
  declared_at timestamptz NOT NULL DEFAULT now(),
  replaced_at timestamptz
);

CREATE TABLE ${S}.task_state (
  task_id text PRIMARY KEY REFERENCES ${S}.tasks (id) ON DELETE CASCADE,
  owner text,
  epoch bigint NOT NULL DEFAULT 0,
  claimed_at timestamptz,
  latest_scheduled double precision NOT NULL,
  latest_completed double precision NOT NULL
);
CREATE INDEX task_state_owner ON ${S}.task_state (owner) WHERE owner IS NOT NULL;
CREATE INDEX task_state_free ON ${S}.task_state (task_id) WHERE owner IS NULL;

CREATE TABLE ${S}.task_runs (
  task_id text NOT NULL REFERENCES ${S}.tasks (id) ON DELETE CASCADE,
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
CREATE INDEX task_runs_live ON ${S}.task_runs (task_id, queue_seq) WHERE status <> 'done';

CREATE TABLE ${S}.task_run_log (
  run_id text PRIMARY KEY,
  task_id text NOT NULL REFERENCES ${S}.tasks (id) ON DELETE CASCADE,
  seq bigint NOT NULL DEFAULT nextval('${S}.task_log_seq'),
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
CREATE INDEX task_run_log_newest ON ${S}.task_run_log (task_id, seq DESC);

-- The fence of every write about a run: the claim (task, epoch) is the member's and its lease is live. The claim row
-- stays locked until the write commits, so a takeover (which updates it) orders after the write.
CREATE FUNCTION ${S}.task_fence(p_task text, p_epoch bigint, p_member text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM ${S}.task_state WHERE task_id = p_task AND epoch = p_epoch AND owner = p_member FOR NO KEY UPDATE;
  IF NOT FOUND THEN RETURN false; END IF;
  PERFORM 1 FROM ${S}.task_members WHERE id = p_member AND NOT dead AND expires_at > now();
  RETURN FOUND;
END $$;

-- A new entry in the run log, and the task's oldest ended entries beyond the newest p_limit dropped.
CREATE FUNCTION ${S}.task_log_insert(p_task text, p_run_id text, p_scheduled_for double precision, p_run_at double precision,
  p_manual boolean, p_when double precision, p_limit integer) RETURNS void LANGUAGE sql AS $$
  INSERT INTO ${S}.task_run_log (run_id, task_id, scheduled_for, run_at, manual, status, history)
    VALUES (p_run_id, p_task, p_scheduled_for, p_run_at, p_manual, 'scheduled',
            jsonb_build_array(jsonb_build_object('status', 'scheduled', 'when', p_when, 'attempt', 0)))
    ON CONFLICT (run_id) DO NOTHING;
  DELETE FROM ${S}.task_run_log WHERE task_id = p_task AND final_status IS NOT NULL AND seq <= (
    SELECT seq FROM ${S}.task_run_log WHERE task_id = p_task ORDER BY seq DESC OFFSET p_limit LIMIT 1);
$$;

-- A run's final status in the log (once: final_status keeps the first).
CREATE FUNCTION ${S}.task_log_final(p_run_id text, p_status text, p_when double precision, p_attempt integer, p_member text,
  p_error jsonb, p_value bytea) RETURNS void LANGUAGE sql AS $$
  ${logFinalStatement(S)};
$$;

-- The next scheduled run: compare-and-set of latest_scheduled, then the run row under its unique key.
-- 'stale': the claim is not current; 'moved': latest_scheduled was not p_expected (latest says what it is);
-- 'exists': a run for that time exists already (latest_scheduled moved past it all the same); 'created'.
CREATE FUNCTION ${S}.task_create_run(p_task text, p_epoch bigint, p_member text, p_expected double precision,
  p_scheduled_for double precision, p_run_at double precision, p_run_id text, p_when double precision, p_limit integer)
  RETURNS TABLE (outcome text, latest double precision) LANGUAGE plpgsql AS $$
DECLARE v_latest double precision;
BEGIN
  IF NOT ${S}.task_fence(p_task, p_epoch, p_member) THEN
    RETURN QUERY SELECT 'stale'::text, NULL::double precision;
    RETURN;
  END IF;
  UPDATE ${S}.task_state SET latest_scheduled = greatest(latest_scheduled, p_scheduled_for)
    WHERE task_id = p_task AND latest_scheduled = p_expected RETURNING latest_scheduled INTO v_latest;
  IF NOT FOUND THEN
    SELECT s.latest_scheduled INTO v_latest FROM ${S}.task_state s WHERE s.task_id = p_task;
    RETURN QUERY SELECT 'moved'::text, v_latest;
    RETURN;
  END IF;
  INSERT INTO ${S}.task_runs (task_id, scheduled_for, run_id, run_at, manual, status, epoch)
    VALUES (p_task, p_scheduled_for, p_run_id, p_run_at, false, 'scheduled', p_epoch)
    ON CONFLICT (task_id, scheduled_for) DO NOTHING;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'exists'::text, v_latest;
    RETURN;
  END IF;
  PERFORM ${S}.task_log_insert(p_task, p_run_id, p_scheduled_for, p_run_at, false, p_when, p_limit);
  RETURN QUERY SELECT 'created'::text, v_latest;
END $$;

-- The oldest queued run (manual, or resumed after its process was lost), handed out.
CREATE FUNCTION ${S}.task_take_queued(p_task text, p_epoch bigint, p_member text)
  RETURNS TABLE (outcome text, run_id text, scheduled_for double precision, run_at double precision, attempts integer, remaining bigint)
  LANGUAGE plpgsql AS $$
DECLARE v ${S}.task_runs%ROWTYPE;
BEGIN
  IF NOT ${S}.task_fence(p_task, p_epoch, p_member) THEN
    RETURN QUERY SELECT 'stale'::text, NULL::text, NULL::double precision, NULL::double precision, NULL::integer, NULL::bigint;
    RETURN;
  END IF;
  UPDATE ${S}.task_runs r SET status = 'scheduled', epoch = p_epoch
    WHERE r.task_id = p_task AND r.scheduled_for = (
      SELECT q.scheduled_for FROM ${S}.task_runs q WHERE q.task_id = p_task AND q.status = 'queued' ORDER BY q.queue_seq LIMIT 1)
    RETURNING r.* INTO v;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'none'::text, NULL::text, NULL::double precision, NULL::double precision, NULL::integer, 0::bigint;
    RETURN;
  END IF;
  RETURN QUERY SELECT 'taken'::text, v.run_id, v.scheduled_for, v.run_at, v.attempts,
    (SELECT count(*) FROM ${S}.task_runs q WHERE q.task_id = p_task AND q.status = 'queued');
END $$;

-- A manual run under the same key: 'duplicate' while a run for that time lives, 'queued' otherwise.
CREATE FUNCTION ${S}.task_force_run(p_task text, p_epoch bigint, p_member text, p_scheduled_for double precision,
  p_run_at double precision, p_run_id text, p_when double precision, p_limit integer) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF NOT ${S}.task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  INSERT INTO ${S}.task_runs AS r (task_id, scheduled_for, run_id, run_at, manual, status, epoch, queue_seq)
    VALUES (p_task, p_scheduled_for, p_run_id, p_run_at, true, 'queued', p_epoch, nextval('${S}.task_queue_seq'))
    ON CONFLICT (task_id, scheduled_for) DO UPDATE SET run_id = EXCLUDED.run_id, run_at = EXCLUDED.run_at, manual = true,
      status = 'queued', epoch = EXCLUDED.epoch, attempts = 0, process = NULL, queue_seq = EXCLUDED.queue_seq
    WHERE r.status = 'done';
  IF NOT FOUND THEN RETURN 'duplicate'; END IF;
  PERFORM ${S}.task_log_insert(p_task, p_run_id, p_scheduled_for, p_run_at, true, p_when, p_limit);
  RETURN 'queued';
END $$;

-- An attempt starts on the member: 'stale', 'gone' (no live run of that id under this epoch) or 'ok'.
CREATE FUNCTION ${S}.task_run_started(p_task text, p_epoch bigint, p_member text, p_run_id text, p_attempt integer,
  p_when double precision) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF NOT ${S}.task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  UPDATE ${S}.task_runs SET status = 'started', attempts = greatest(attempts, p_attempt), process = p_member
    WHERE task_id = p_task AND run_id = p_run_id AND epoch = p_epoch AND status IN ('scheduled', 'started');
  IF NOT FOUND THEN RETURN 'gone'; END IF;
  -- Once per attempt (a write retried after a lost answer adds nothing).
  UPDATE ${S}.task_run_log SET status = 'started', attempts = greatest(attempts, p_attempt), processes = processes || to_jsonb(p_member),
    history = history || jsonb_build_object('status', 'started', 'when', p_when, 'attempt', p_attempt, 'process', p_member)
    WHERE run_id = p_run_id AND jsonb_array_length(processes) < p_attempt;
  RETURN 'ok';
END $$;

-- An attempt failed and the next one waits out its backoff (p_attempt is the one about to start).
CREATE FUNCTION ${S}.task_run_retrying(p_task text, p_epoch bigint, p_member text, p_run_id text, p_attempt integer,
  p_when double precision, p_error jsonb) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF NOT ${S}.task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  UPDATE ${S}.task_runs SET status = 'scheduled'
    WHERE task_id = p_task AND run_id = p_run_id AND epoch = p_epoch AND status IN ('scheduled', 'started');
  IF NOT FOUND THEN RETURN 'gone'; END IF;
  UPDATE ${S}.task_run_log SET status = 'scheduled', error = coalesce(p_error, error),
    history = history || jsonb_strip_nulls(jsonb_build_object('status', 'scheduled', 'when', p_when, 'attempt', p_attempt,
      'process', p_member, 'error', p_error))
    WHERE run_id = p_run_id;
  RETURN 'ok';
END $$;

-- A run ended: its row done, latest_completed moved (scheduled runs only), its final status logged when given.
-- Idempotent: finishing a run that is done already answers 'ok' and changes nothing.
CREATE FUNCTION ${S}.task_finish_run(p_task text, p_epoch bigint, p_member text, p_run_id text, p_status text,
  p_when double precision, p_attempt integer, p_error jsonb, p_value bytea) RETURNS text LANGUAGE plpgsql AS $$
DECLARE v_scheduled_for double precision; v_manual boolean;
BEGIN
  IF NOT ${S}.task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  UPDATE ${S}.task_runs SET status = 'done'
    WHERE task_id = p_task AND run_id = p_run_id AND epoch = p_epoch AND status <> 'done'
    RETURNING scheduled_for, manual INTO v_scheduled_for, v_manual;
  IF NOT FOUND THEN
    PERFORM 1 FROM ${S}.task_runs WHERE task_id = p_task AND run_id = p_run_id AND status = 'done';
    RETURN CASE WHEN FOUND THEN 'ok' ELSE 'gone' END;
  END IF;
  IF NOT v_manual THEN
    UPDATE ${S}.task_state SET latest_completed = greatest(latest_completed, v_scheduled_for) WHERE task_id = p_task;
  END IF;
  IF p_status IS NOT NULL THEN
    PERFORM ${S}.task_log_final(p_run_id, p_status, p_when, p_attempt, p_member, p_error, p_value);
  END IF;
  RETURN 'ok';
END $$;

-- A run handed out here and given up before it began (its claim is handed over, or its scheduler stops): queued again,
-- for whoever holds the claim next (this member or another), so that its scheduled time still runs.
CREATE FUNCTION ${S}.task_requeue_run(p_task text, p_epoch bigint, p_member text, p_run_id text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF NOT ${S}.task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  UPDATE ${S}.task_runs SET status = 'queued', queue_seq = nextval('${S}.task_queue_seq')
    WHERE task_id = p_task AND run_id = p_run_id AND epoch = p_epoch AND status = 'scheduled';
  RETURN CASE WHEN FOUND THEN 'ok' ELSE 'gone' END;
END $$;

-- A final status logged apart from the finish (a caller of finishRun that did not say how the run ended).
CREATE FUNCTION ${S}.task_log_write(p_task text, p_epoch bigint, p_member text, p_run_id text, p_status text,
  p_when double precision, p_attempt integer, p_error jsonb, p_value bytea) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF NOT ${S}.task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  PERFORM ${S}.task_log_final(p_run_id, p_status, p_when, p_attempt, p_member, p_error, p_value);
  RETURN 'ok';
END $$;

-- The runs of tasks a member has just claimed that were live under an older claim (their process was lost, or
-- gave the task back with runs queued): handed out and never started, or between attempts, they are queued again;
-- an attempt in flight counts, and the run is queued again while the task's retry allows, else it fails with a
-- reason naming the lost process.
CREATE FUNCTION ${S}.task_settle(p_tasks text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v record;
  v_error jsonb;
  v_when double precision := extract(epoch FROM now()) * 1000;
BEGIN
  FOR v IN
    SELECT r.task_id, r.scheduled_for, r.run_id, r.status, r.attempts, r.process, r.manual, t.retry
    FROM ${S}.task_runs r JOIN ${S}.tasks t ON t.id = r.task_id
    WHERE r.task_id = ANY (p_tasks) AND r.status IN ('scheduled', 'started')
    ORDER BY r.task_id, r.scheduled_for
    FOR UPDATE OF r
  LOOP
    IF v.status = 'scheduled' THEN
      UPDATE ${S}.task_runs SET status = 'queued', queue_seq = nextval('${S}.task_queue_seq') WHERE run_id = v.run_id;
      CONTINUE;
    END IF;
    v_error := jsonb_build_object(
      'name', 'ThreadExitedError',
      'code', 'ERR_THREAD_EXITED',
      'message', format('Expected engine process %s to finish attempt %s of run %s of task %s, but that process was lost: its claim lease ended while the attempt ran',
        coalesce(v.process, '(unknown)'), v.attempts, v.run_id, v.task_id),
      'details', jsonb_build_object('process', v.process, 'attempt', v.attempts, 'runId', v.run_id, 'taskId', v.task_id));
    IF v.attempts <= v.retry THEN
      UPDATE ${S}.task_runs SET status = 'queued', queue_seq = nextval('${S}.task_queue_seq') WHERE run_id = v.run_id;
      UPDATE ${S}.task_run_log SET status = 'scheduled', error = v_error,
        history = history || jsonb_build_object('status', 'scheduled', 'when', v_when, 'attempt', v.attempts + 1, 'error', v_error)
        WHERE run_id = v.run_id;
    ELSE
      UPDATE ${S}.task_runs SET status = 'done' WHERE run_id = v.run_id;
      IF NOT v.manual THEN
        UPDATE ${S}.task_state SET latest_completed = greatest(latest_completed, v.scheduled_for) WHERE task_id = v.task_id;
      END IF;
      PERFORM ${S}.task_log_final(v.run_id, 'failed', v_when, v.attempts, NULL, v_error, NULL);
    END IF;
  END LOOP;
END $$;

-- One round of a member: renew its lease (or join, when p_join), reap members whose lease ended (their claims are
-- freed), claim up to its fair share of free tasks (ceil(tasks / live members), at most p_max_claim now) and settle
-- their runs; answers what it claimed (each task's definition, claim, progress, queued runs and the times after its
-- latest_completed that have a run already), its share, the catalogue's version and when the next other lease ends.
-- {"lost": true} when the member's lease had ended: it must join again as a new member.
CREATE FUNCTION ${S}.task_cycle(p_member text, p_ttl_ms integer, p_held integer, p_max_claim integer, p_join boolean)
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
  UPDATE ${S}.task_members SET expires_at = v_expires WHERE id = p_member AND NOT dead AND expires_at > now();
  IF NOT FOUND THEN
    IF NOT p_join THEN RETURN jsonb_build_object('lost', true); END IF;
    INSERT INTO ${S}.task_members (id, expires_at) VALUES (p_member, v_expires) ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN RETURN jsonb_build_object('lost', true); END IF;
  END IF;

  WITH expired AS (
    SELECT id FROM ${S}.task_members WHERE NOT dead AND expires_at <= now() ORDER BY expires_at LIMIT 100 FOR UPDATE SKIP LOCKED
  ), reaped AS (
    UPDATE ${S}.task_members m SET dead = true FROM expired WHERE m.id = expired.id RETURNING m.id
  )
  UPDATE ${S}.task_state SET owner = NULL WHERE owner IN (SELECT id FROM reaped);
  DELETE FROM ${S}.task_members WHERE dead AND expires_at < now() - interval '1 day';

  SELECT c.version, c.task_count INTO v_version, v_tasks FROM ${S}.task_catalog c;
  SELECT count(*) INTO v_members FROM ${S}.task_members WHERE NOT dead AND expires_at > now();
  v_target := ceil(v_tasks::numeric / greatest(v_members, 1));
  v_want := least(v_target - p_held, p_max_claim);
  IF v_want > 0 THEN
    WITH free AS (
      SELECT task_id FROM ${S}.task_state WHERE owner IS NULL LIMIT v_want FOR UPDATE SKIP LOCKED
    ), claimed AS (
      UPDATE ${S}.task_state s SET owner = p_member, epoch = nextval('${S}.task_epoch_seq'), claimed_at = now()
        FROM free WHERE s.task_id = free.task_id RETURNING s.task_id
    )
    SELECT array_agg(task_id ORDER BY task_id) INTO v_claimed FROM claimed;
    IF v_claimed IS NOT NULL THEN
      PERFORM ${S}.task_settle(v_claimed);
      SELECT coalesce(jsonb_agg(jsonb_build_object(
          'id', t.id, 'definition', encode(t.definition, 'base64'), 'hash', t.hash, 'epoch', s.epoch,
          'latestScheduled', s.latest_scheduled, 'latestCompleted', s.latest_completed,
          'queued', (SELECT count(*) FROM ${S}.task_runs r WHERE r.task_id = t.id AND r.status = 'queued'),
          'taken', (SELECT coalesce(jsonb_agg(r.scheduled_for), '[]'::jsonb) FROM ${S}.task_runs r
                     WHERE r.task_id = t.id AND r.scheduled_for > s.latest_completed))), '[]'::jsonb)
        INTO v_rows
        FROM ${S}.task_state s JOIN ${S}.tasks t ON t.id = s.task_id WHERE s.task_id = ANY (v_claimed);
    END IF;
  END IF;

  SELECT extract(epoch FROM min(expires_at) - now()) * 1000 INTO v_next
    FROM ${S}.task_members WHERE NOT dead AND id <> p_member;
  RETURN jsonb_build_object('lost', false, 'claimed', v_rows, 'target', v_target,
    'members', v_members, 'tasks', v_tasks, 'version', v_version, 'nextExpiryMs', v_next);
END $$;

-- Claims given back by their member (a hand-over, or its stop): free for the others at once.
CREATE FUNCTION ${S}.task_give_back(p_member text, p_tasks text[], p_epochs bigint[]) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE v_count integer;
BEGIN
  UPDATE ${S}.task_state s SET owner = NULL
    FROM unnest(p_tasks, p_epochs) AS g(task_id, epoch)
    WHERE s.task_id = g.task_id AND s.epoch = g.epoch AND s.owner = p_member;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  IF v_count > 0 THEN PERFORM pg_notify('${notify}', ''); END IF;
  RETURN v_count;
END $$;

-- A member leaves: whatever it still holds is freed and its lease ends now.
CREATE FUNCTION ${S}.task_leave(p_member text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  UPDATE ${S}.task_state SET owner = NULL WHERE owner = p_member;
  UPDATE ${S}.task_members SET dead = true, expires_at = least(expires_at, now()) WHERE id = p_member;
  PERFORM pg_notify('${notify}', '');
END $$;

-- Declares a task: 'created', 'same' (nothing changed) or 'replaced' (a new definition from its next run on; p_meta,
-- when given, moves its progress forward only).
CREATE FUNCTION ${S}.task_declare(p_id text, p_definition bytea, p_hash text, p_retry integer, p_start double precision,
  p_meta double precision) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO ${S}.tasks (id, definition, hash, retry) VALUES (p_id, p_definition, p_hash, p_retry) ON CONFLICT (id) DO NOTHING;
  IF FOUND THEN
    INSERT INTO ${S}.task_state (task_id, latest_scheduled, latest_completed) VALUES (p_id, p_start, p_start);
    UPDATE ${S}.task_catalog SET version = version + 1, task_count = task_count + 1;
    PERFORM pg_notify('${notify}', p_id);
    RETURN 'created';
  END IF;
  PERFORM 1 FROM ${S}.task_state WHERE task_id = p_id FOR NO KEY UPDATE;
  UPDATE ${S}.tasks SET definition = p_definition, hash = p_hash, retry = p_retry, replaced_at = now()
    WHERE id = p_id AND hash <> p_hash;
  IF NOT FOUND THEN RETURN 'same'; END IF;
  IF p_meta IS NOT NULL THEN
    UPDATE ${S}.task_state SET latest_scheduled = greatest(latest_scheduled, p_meta), latest_completed = greatest(latest_completed, p_meta)
      WHERE task_id = p_id;
  END IF;
  UPDATE ${S}.task_catalog SET version = version + 1;
  PERFORM pg_notify('${notify}', p_id);
  RETURN 'replaced';
END $$;

-- Deletes a task everywhere (its claim, runs and log with it); false when there was none.
CREATE FUNCTION ${S}.task_remove(p_id text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM ${S}.task_state WHERE task_id = p_id FOR UPDATE;
  DELETE FROM ${S}.tasks WHERE id = p_id;
  IF NOT FOUND THEN RETURN false; END IF;
  UPDATE ${S}.task_catalog SET version = version + 1, task_count = task_count - 1;
  PERFORM pg_notify('${notify}', p_id);
  RETURN true;
END $$;
`;
}
