-- What an operator sees of the task store and may do to it (engine.admin), for every process of the schema: the
-- live processes with their host, pid, thread count and last renewal, and tasks disabled for the whole cluster.
-- Placeholders as in 001_schema.sql.

-- Who a member is (recorded when it joins), its thread count and when it last renewed its lease (both at each renewal).
ALTER TABLE "{{schema}}".task_members ADD COLUMN host text, ADD COLUMN pid integer, ADD COLUMN threads integer,
  ADD COLUMN renewed_at timestamptz NOT NULL DEFAULT now();

-- A disabled task keeps its definition, claim-free: no member claims it, so no process creates runs of it. A member
-- that holds it when it is disabled hands it over (its runs in flight finish) and gives the claim back.
ALTER TABLE "{{schema}}".tasks ADD COLUMN disabled boolean NOT NULL DEFAULT false;
CREATE INDEX tasks_disabled ON "{{schema}}".tasks (id) WHERE disabled;

DROP FUNCTION "{{schema}}".task_cycle(text, integer, integer, integer, boolean);

-- One round of a member: renew its lease with its current thread count (or join, when p_join, recording its host,
-- pid and thread count), reap members whose lease ended (their claims are
-- freed), claim up to its fair share of free enabled tasks (ceil(enabled tasks / live members), at most p_max_claim now) and settle
-- their runs; answers what it claimed (each task's definition, claim, progress, queued runs and the times after its
-- latest_completed that have a run already), its share, the catalogue's version and when the next other lease ends.
-- {"lost": true} when the member's lease had ended: it must join again as a new member.
CREATE FUNCTION "{{schema}}".task_cycle(p_member text, p_ttl_ms integer, p_held integer, p_max_claim integer, p_join boolean,
  p_host text, p_pid integer, p_threads integer)
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
  UPDATE "{{schema}}".task_members SET expires_at = v_expires, renewed_at = now(), threads = coalesce(p_threads, threads) WHERE id = p_member AND NOT dead AND expires_at > now();
  IF NOT FOUND THEN
    IF NOT p_join THEN RETURN jsonb_build_object('lost', true); END IF;
    INSERT INTO "{{schema}}".task_members (id, expires_at, host, pid, threads) VALUES (p_member, v_expires, p_host, p_pid, p_threads)
      ON CONFLICT (id) DO NOTHING;
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
  v_tasks := v_tasks - (SELECT count(*) FROM "{{schema}}".tasks WHERE disabled);
  SELECT count(*) INTO v_members FROM "{{schema}}".task_members WHERE NOT dead AND expires_at > now();
  v_target := ceil(v_tasks::numeric / greatest(v_members, 1));
  v_want := least(v_target - p_held, p_max_claim);
  IF v_want > 0 THEN
    WITH free AS (
      SELECT s.task_id FROM "{{schema}}".task_state s JOIN "{{schema}}".tasks t ON t.id = s.task_id
       WHERE s.owner IS NULL AND NOT t.disabled LIMIT v_want FOR UPDATE OF s SKIP LOCKED
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

-- Disables a task for the whole cluster; false when there is none. Its claim stays with its holder, which sees the
-- catalogue's new version, lets its runs in flight finish and gives the claim back.
CREATE FUNCTION "{{schema}}".task_disable(p_id text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM "{{schema}}".task_state WHERE task_id = p_id FOR NO KEY UPDATE;
  PERFORM 1 FROM "{{schema}}".tasks WHERE id = p_id;
  IF NOT FOUND THEN RETURN false; END IF;
  UPDATE "{{schema}}".tasks SET disabled = true WHERE id = p_id AND NOT disabled;
  IF FOUND THEN
    UPDATE "{{schema}}".task_catalog SET version = version + 1;
    PERFORM pg_notify('{{schema}}_tasks', p_id);
  END IF;
  RETURN true;
END $$;

-- Enables a disabled task again from p_now on (the times it was disabled do not run); false when there is none.
CREATE FUNCTION "{{schema}}".task_enable(p_id text, p_now double precision) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM "{{schema}}".task_state WHERE task_id = p_id FOR NO KEY UPDATE;
  PERFORM 1 FROM "{{schema}}".tasks WHERE id = p_id;
  IF NOT FOUND THEN RETURN false; END IF;
  UPDATE "{{schema}}".tasks SET disabled = false WHERE id = p_id AND disabled;
  IF FOUND THEN
    UPDATE "{{schema}}".task_state SET latest_scheduled = greatest(latest_scheduled, p_now), latest_completed = greatest(latest_completed, p_now)
      WHERE task_id = p_id;
    UPDATE "{{schema}}".task_catalog SET version = version + 1;
    PERFORM pg_notify('{{schema}}_tasks', p_id);
  END IF;
  RETURN true;
END $$;
