/**
 * Migration 5: the `evals_live` index (state, queue of every evaluation not yet acked or removed) is dropped. It
 * served only the broker's stats, and every state it covered has a partial index of its own (`evals_ready`,
 * `evals_pending`, `evals_leases`, `evals_due`, `evals_settled`), which the stats now read state by state. A state
 * change rewrites the row into every index whose predicate the new row meets, so the index cost one insertion on
 * each enqueue and each lease: a quarter of the index writes on those paths.
 */
export function dropLiveIndexSchema(S: string): string {
  return `DROP INDEX IF EXISTS ${S}.evals_live;\n`;
}
