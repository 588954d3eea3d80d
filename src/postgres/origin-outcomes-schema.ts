/**
 * Migration 13: an outcome notification goes to the channel of the process the evaluation was enqueued in, not to
 * the schema's outcome channel that every process listens on. Each ack batch woke every process (its listening
 * backend, then the process, which parsed enough of the payload to see it named another): with three worker
 * processes and a front, four wake-ups on two cores for one process's news. `outcome_channel(origin)` is the
 * origin's `SchemaNames.processChannel('outcome', …)`, which its `PgBroker` listens on; the payload still names the
 * origin, which the process checks.
 *
 * `ack_rows` (migration 8's) and `notify_outcomes` (migration 9's, which the other ways an outcome is stored call)
 * are the two places that notify; each is given its new channel at the one place it names the old. A process of the
 * release before listens on the shared channel only: its awaited outcomes settle at its poll (`pollMs`) until it is
 * replaced.
 */
import { namedOutcomesSchema } from './named-outcomes-schema.js';
import { outcomeIdsSchema } from './outcome-ids-schema.js';
import { functionText, replacedOnce } from './sql-text.js';

export function originOutcomesSchema(S: string, K: number, channel: (name: string) => string): string {
  const outcome = channel('outcome');
  const shared = `PERFORM pg_notify('${outcome}', CASE WHEN octet_length(n.payload)`;
  const own = `PERFORM pg_notify(${S}.outcome_channel(n.origin), CASE WHEN octet_length(n.payload)`;
  const ackRows = replacedOnce(functionText(outcomeIdsSchema(S, channel), S, 'ack_rows', 13), [[shared, own]], 'migration 13: ack_rows');
  const notifyOutcomes = replacedOnce(functionText(namedOutcomesSchema(S, K, channel), S, 'notify_outcomes', 13), [[shared, own]], 'migration 13: notify_outcomes');
  return `
CREATE FUNCTION ${S}.outcome_channel(p_origin uuid) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT '${outcome}_' || left(replace(p_origin::text, '-', ''), 12)
$$;
${ackRows}
${notifyOutcomes}`;
}
