/**
 * Migration 10, second part: the broker's per-call functions plan their statements once per session.
 *
 * A PL/pgSQL statement is planned for its parameters ("custom") until the server judges a parameter-free plan no
 * dearer. For `lease_ready` and `enqueue` called one row at a time it never does, so every call re-planned its
 * statements: 0.17–0.18 ms of planning for each of the two, the largest part of their server time at idle (measured
 * with `pg_stat_statements.track_planning`). Every statement in them is an index look-up or an index-ordered scan
 * whose shape does not depend on the values, so the generic plan is the one the custom planner picked anyway.
 *
 * A function's `SET` lasts for the call, nested calls included (`ack_rows`, `promote`, `lock_jobs`,
 * `notify_outcomes`). A later `CREATE OR REPLACE` of one of these functions drops its `SET`: such a migration has to
 * run this one's statement for it again.
 */
export const GENERIC_PLAN_FUNCTIONS: readonly string[] = Object.freeze([
  'enqueue',
  'lease_ready',
  'ack',
  'ack_many',
  'ack_fenced',
  'nack',
  'fail',
  'remove',
]);

/** `schema` is the schema's name as given (a validated lowercase identifier), here a string literal. */
export function genericPlansSchema(schema: string): string {
  const names = GENERIC_PLAN_FUNCTIONS.map((n) => `'${n}'`).join(', ');
  const literal = `'${schema}'`;
  return `
DO $$
DECLARE
  f regprocedure;
BEGIN
  FOR f IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = ${literal} AND p.proname IN (${names})
  LOOP
    EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan', f);
  END LOOP;
END
$$;
`;
}
