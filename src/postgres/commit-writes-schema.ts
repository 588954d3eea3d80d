/**
 * Migration 6: a plan commit's writes in one call. The committer holds the state counter's row lock, which every
 * commit of the cluster waits for, from its catch-up to COMMIT; each statement it sends in that stretch is a round
 * trip the whole cluster waits through. `commit_writes` does the records, the log rows, the counter and the
 * notification in one: the counter moves only from `p_from` (the index the committer locked and caught up to), and
 * the function answers false, writing nothing that counts, when it was not there (the caller rolls back).
 */
export function commitWritesSchema(S: string, channel: (name: string) => string): string {
  const state = channel('state');
  return `
CREATE FUNCTION ${S}.commit_writes(
  p_put_tbl text[], p_put_key text[], p_put_value bytea[], p_put_create bigint[], p_put_modify bigint[],
  p_del_tbl text[], p_del_key text[],
  p_log_index bigint[], p_log_plan uuid[], p_log_changes bytea[],
  p_from bigint, p_to bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  UPDATE ${S}.state_counter SET index = p_to WHERE index = p_from;
  IF NOT FOUND THEN RETURN false; END IF;
  IF cardinality(p_put_tbl) > 0 THEN
    INSERT INTO ${S}.state_records (tbl, key, value, create_index, modify_index)
    SELECT * FROM unnest(p_put_tbl, p_put_key, p_put_value, p_put_create, p_put_modify)
    ON CONFLICT (tbl, key) DO UPDATE SET value = EXCLUDED.value, create_index = EXCLUDED.create_index, modify_index = EXCLUDED.modify_index;
  END IF;
  IF cardinality(p_del_tbl) > 0 THEN
    DELETE FROM ${S}.state_records r USING unnest(p_del_tbl, p_del_key) AS d(tbl, key) WHERE r.tbl = d.tbl AND r.key = d.key;
  END IF;
  INSERT INTO ${S}.state_log (index, plan_id, changes) SELECT * FROM unnest(p_log_index, p_log_plan, p_log_changes);
  PERFORM pg_notify('${state}', p_to::text);
  RETURN true;
END
$$;
`;
}
