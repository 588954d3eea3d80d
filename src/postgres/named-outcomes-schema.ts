/**
 * Migration 9: every outcome notification names its evaluations. Migration 8 did it for ack batches; the other
 * ways an outcome is stored (a dead letter, a removal, a single ack) still sent the bare process id, which makes
 * the process look up every outcome it awaits, and a promotion that superseded pending evaluations sent nothing, so
 * their processes learned it only at their next poll (`pollMs`). They now all go through `notify_outcomes`, which
 * sends each origin `{"origin", "ids"}` (the bare id when the payload would pass PostgreSQL's 8,000 bytes).
 *
 * The four functions are version 1's with their notification replaced: their text is taken from version 1's and
 * changed at named places, each checked to occur exactly once, so that nothing else in them can differ.
 */
import { schemaV1 } from './schema-v1.js';
import { functionText, replacedOnce } from './sql-text.js';

const MAX_PAYLOAD_BYTES = 7_900;

/** Version 1's definition of function `name`, as CREATE OR REPLACE, with each `[from, to]` replaced once. */
function redefined(v1: string, S: string, name: string, replacements: readonly (readonly [string, string])[]): string {
  return replacedOnce(functionText(v1, S, name, 9), replacements, `migration 9: ${name}`);
}

export function namedOutcomesSchema(S: string, K: number, channel: (name: string) => string): string {
  const outcome = channel('outcome');
  const v1 = schemaV1(S, K, channel);
  const bareNotify = `PERFORM pg_notify('${outcome}', r.origin::text);`;
  const namedNotify = `PERFORM ${S}.notify_outcomes(ARRAY[r.id], ARRAY[r.origin], p_actor);`;
  return `
-- Tells each origin (other than p_actor) which of its evaluations have an outcome stored: p_ids[i] is p_origins[i]'s.
CREATE FUNCTION ${S}.notify_outcomes(p_ids text[], p_origins uuid[], p_actor uuid) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('${outcome}', CASE WHEN octet_length(n.payload) <= ${MAX_PAYLOAD_BYTES} THEN n.payload ELSE n.origin::text END)
    FROM (SELECT o.origin, jsonb_build_object('origin', o.origin, 'ids', jsonb_agg(o.id))::text AS payload
            FROM unnest(p_ids, p_origins) AS o(id, origin)
           WHERE o.origin IS NOT NULL AND o.origin IS DISTINCT FROM p_actor
           GROUP BY o.origin) n;
END
$$;

${redefined(v1, S, 'to_failed', [[bareNotify, namedNotify]])}
${redefined(v1, S, 'remove', [[bareNotify, namedNotify]])}
${redefined(v1, S, 'ack', [[bareNotify, namedNotify]])}
${redefined(v1, S, 'promote', [
  ['LANGUAGE plpgsql AS $$\nBEGIN', 'LANGUAGE plpgsql AS $$\nDECLARE\n  v_origins uuid[];\nBEGIN'],
  [
    '      RETURNING e.id)\n    SELECT array_agg(c.id) INTO canceled FROM c;',
    '      RETURNING e.id, e.origin)\n    SELECT array_agg(c.id), array_agg(c.origin) INTO canceled, v_origins FROM c;\n' +
      '    -- Their processes learn it now, not at their next poll.\n' +
      `    PERFORM ${S}.notify_outcomes(canceled, v_origins, NULL);`,
  ],
])}`;
}
