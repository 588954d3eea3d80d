/**
 * Migration 3 of the task store: the writes about runs of one process go to the database together, a new run is
 * created with its first attempt begun, and the run log's helpers keep their plans. `S` is the quoted schema name.
 *
 * - `task_run_writes` carries any number of writes in one statement, so in one transaction and one round trip, in
 *   the order given: 'create-start' (`task_create_started_run`), 'start' (`task_run_started`) and 'finish'
 *   (`task_finish_run`), each with its own fence and outcome, as if sent alone. The caller orders them by task, so
 *   that two batches take claim rows in one order and cannot deadlock each other.
 * - `task_create_started_run` is `task_create_run` followed by `task_run_started` for attempt 1, in one write: the
 *   scheduler begins a new run's first attempt as soon as the run exists, so the two writes always came in a row.
 *   `task_unstart_run` takes that start back when the attempt did not begin after all (the run was canceled first):
 *   the run is queued again with no attempt, and its log entry loses the start, as if it had never been written.
 * - The run log's helpers become PL/pgSQL (`task_log_trim` is the trim both creations share): a SQL function called
 *   from PL/pgSQL is parsed and planned again at every call, a PL/pgSQL one keeps its plans for the session.
 */
import { logFinalStatement } from './schema.js';

export function runWritesSchema(S: string): string {
  return `
-- The task's ended log entries beyond its newest p_limit entries dropped.
CREATE FUNCTION ${S}.task_log_trim(p_task text, p_limit integer) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM ${S}.task_run_log WHERE task_id = p_task AND final_status IS NOT NULL AND seq <= (
    SELECT seq FROM ${S}.task_run_log WHERE task_id = p_task ORDER BY seq DESC OFFSET p_limit LIMIT 1);
END $$;

CREATE OR REPLACE FUNCTION ${S}.task_log_insert(p_task text, p_run_id text, p_scheduled_for double precision, p_run_at double precision,
  p_manual boolean, p_when double precision, p_limit integer) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO ${S}.task_run_log (run_id, task_id, scheduled_for, run_at, manual, status, history)
    VALUES (p_run_id, p_task, p_scheduled_for, p_run_at, p_manual, 'scheduled',
            jsonb_build_array(jsonb_build_object('status', 'scheduled', 'when', p_when, 'attempt', 0)))
    ON CONFLICT (run_id) DO NOTHING;
  PERFORM ${S}.task_log_trim(p_task, p_limit);
END $$;

CREATE OR REPLACE FUNCTION ${S}.task_log_final(p_run_id text, p_status text, p_when double precision, p_attempt integer, p_member text,
  p_error jsonb, p_value bytea) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  ${logFinalStatement(S)};
END $$;

-- The next scheduled run with its first attempt begun on p_member at p_when: task_create_run's outcomes, and on
-- 'created' the run row and its log entry as task_run_started would have left them for attempt 1.
CREATE FUNCTION ${S}.task_create_started_run(p_task text, p_epoch bigint, p_member text, p_expected double precision,
  p_scheduled_for double precision, p_run_at double precision, p_run_id text, p_when double precision, p_limit integer)
  RETURNS TABLE (outcome text, latest double precision) LANGUAGE plpgsql AS $$
DECLARE v_latest double precision;
BEGIN
  -- task_fence's checks, with the compare-and-set as the claim row's lock (one write of the row, not a lock and then
  -- an update): the lease first, then the claim, locked by the update that moves latest_scheduled.
  PERFORM 1 FROM ${S}.task_members WHERE id = p_member AND NOT dead AND expires_at > now();
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'stale'::text, NULL::double precision;
    RETURN;
  END IF;
  UPDATE ${S}.task_state SET latest_scheduled = greatest(latest_scheduled, p_scheduled_for)
    WHERE task_id = p_task AND epoch = p_epoch AND owner = p_member AND latest_scheduled = p_expected
    RETURNING latest_scheduled INTO v_latest;
  IF NOT FOUND THEN
    IF NOT ${S}.task_fence(p_task, p_epoch, p_member) THEN
      RETURN QUERY SELECT 'stale'::text, NULL::double precision;
      RETURN;
    END IF;
    SELECT s.latest_scheduled INTO v_latest FROM ${S}.task_state s WHERE s.task_id = p_task;
    RETURN QUERY SELECT 'moved'::text, v_latest;
    RETURN;
  END IF;
  INSERT INTO ${S}.task_runs (task_id, scheduled_for, run_id, run_at, manual, status, epoch, attempts, process)
    VALUES (p_task, p_scheduled_for, p_run_id, p_run_at, false, 'started', p_epoch, 1, p_member)
    ON CONFLICT (task_id, scheduled_for) DO NOTHING;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'exists'::text, v_latest;
    RETURN;
  END IF;
  INSERT INTO ${S}.task_run_log (run_id, task_id, scheduled_for, run_at, manual, status, attempts, processes, history)
    VALUES (p_run_id, p_task, p_scheduled_for, p_run_at, false, 'started', 1, jsonb_build_array(p_member),
            jsonb_build_array(jsonb_build_object('status', 'scheduled', 'when', p_when, 'attempt', 0),
                              jsonb_build_object('status', 'started', 'when', p_when, 'attempt', 1, 'process', p_member)))
    ON CONFLICT (run_id) DO NOTHING;
  PERFORM ${S}.task_log_trim(p_task, p_limit);
  RETURN QUERY SELECT 'created'::text, v_latest;
END $$;

-- The first attempt of a run made by task_create_started_run did not begin after all: the run is queued again with no
-- attempt (for whoever holds the claim next), and its log entry is as it was before the start. 'stale', 'gone', 'ok'.
CREATE FUNCTION ${S}.task_unstart_run(p_task text, p_epoch bigint, p_member text, p_run_id text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  IF NOT ${S}.task_fence(p_task, p_epoch, p_member) THEN RETURN 'stale'; END IF;
  UPDATE ${S}.task_runs SET status = 'queued', attempts = 0, process = NULL, queue_seq = nextval('${S}.task_queue_seq')
    WHERE task_id = p_task AND run_id = p_run_id AND epoch = p_epoch AND status = 'started' AND attempts = 1;
  IF NOT FOUND THEN RETURN 'gone'; END IF;
  UPDATE ${S}.task_run_log SET status = 'scheduled', attempts = 0, processes = '[]'::jsonb,
    history = history - (jsonb_array_length(history) - 1)
    WHERE run_id = p_run_id AND history -> -1 ->> 'status' = 'started';
  RETURN 'ok';
END $$;

-- Writes about runs, in the order given, each as its single function would make it; answers one row per write:
-- its position (from 1), its outcome, and for a creation the task's latest_scheduled as that function answers it.
-- p_kind: 'create-start' (p_expected, p_scheduled_for, p_run_at, p_when), 'start' (p_attempt, p_when) or 'finish'
-- (p_status, p_when, p_attempt, p_error, p_value; a null status logs nothing final).
CREATE FUNCTION ${S}.task_run_writes(p_kind text[], p_task text[], p_epoch bigint[], p_member text[], p_run_id text[],
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
        SELECT c.outcome, c.latest INTO outcome, latest FROM ${S}.task_create_started_run(p_task[k], p_epoch[k], p_member[k],
          p_expected[k], p_scheduled_for[k], p_run_at[k], p_run_id[k], p_when[k], p_limit) c;
      WHEN 'start' THEN
        outcome := ${S}.task_run_started(p_task[k], p_epoch[k], p_member[k], p_run_id[k], p_attempt[k], p_when[k]);
      WHEN 'finish' THEN
        outcome := ${S}.task_finish_run(p_task[k], p_epoch[k], p_member[k], p_run_id[k], p_status[k], p_when[k],
          p_attempt[k], p_error[k], p_value[k]);
      ELSE
        RAISE EXCEPTION 'task_run_writes: unknown write kind %', p_kind[k] USING ERRCODE = '22023';
    END CASE;
    RETURN NEXT;
  END LOOP;
END $$;
`;
}
