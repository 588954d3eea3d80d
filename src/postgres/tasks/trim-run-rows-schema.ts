/**
 * Migration 7: a task's finished run rows go with its trimmed log entries. `task_runs` keeps one row per
 * (task, scheduled time) so that no scheduled time runs twice, and its finished rows were never deleted: at 1,000
 * runs a second, 86 million rows a day.
 *
 * Now `task_log_trim`, which both creations call, deletes the `task_runs` rows of the log entries it drops, when those
 * runs are done and their time is at or before the task's `latest_completed`. A scheduler (this one, or the one that
 * takes the claim over) only creates runs after `latest_completed`, where every row is kept, so the unique key still
 * refuses every time it guarded; a manual run of an older time finds no row and inserts one, as it reused a finished
 * row before. A task keeps at most its `runLogLimit` finished rows behind `latest_completed`. Finishing a run twice
 * still answers 'ok' while its row is kept; one whose row is gone answers 'gone', as an unknown run does. The
 * finished rows whose log entries were trimmed before this migration go once, here.
 */
export function trimRunRowsSchema(S: string): string {
  return `
CREATE OR REPLACE FUNCTION ${S}.task_log_trim(p_task text, p_limit integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE v_seq bigint;
BEGIN
  SELECT seq INTO v_seq FROM ${S}.task_run_log WHERE task_id = p_task ORDER BY seq DESC OFFSET p_limit LIMIT 1;
  IF v_seq IS NULL THEN RETURN; END IF;
  WITH dropped AS (
    DELETE FROM ${S}.task_run_log WHERE task_id = p_task AND final_status IS NOT NULL AND seq <= v_seq RETURNING run_id)
  DELETE FROM ${S}.task_runs r USING dropped, ${S}.task_state s
   WHERE r.run_id = dropped.run_id AND r.status = 'done' AND s.task_id = p_task AND r.scheduled_for <= s.latest_completed;
END $$;

DELETE FROM ${S}.task_runs r USING ${S}.task_state s
 WHERE r.status = 'done' AND s.task_id = r.task_id AND r.scheduled_for <= s.latest_completed
   AND NOT EXISTS (SELECT 1 FROM ${S}.task_run_log l WHERE l.run_id = r.run_id);
`;
}
