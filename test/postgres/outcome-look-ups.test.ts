/**
 * Outcomes awaited in one process and settled in another, against a real PostgreSQL: the ack's notification names
 * the evaluations it settled, and the awaiting process looks up those alone, not every outcome it awaits.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { Pool, type QueryConfig } from 'pg';
import type { Backend } from '../../src/backend/backend.js';
import type { EvaluationOutcome } from '../../src/broker/outcome-waiters.js';
import { openBackend } from './backend-harness.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

/** The ids of each outcome look-up the backend sends through `pool`, recorded when the look-up has answered. */
function recordLookUps(pool: Pool, lookUps: string[][], answered: () => void): void {
  const query = pool.query.bind(pool) as (text: string | QueryConfig, values?: unknown[]) => Promise<unknown>;
  (pool as { query: unknown }).query = async (text: string | QueryConfig, values?: unknown[]) => {
    const sql = typeof text === 'string' ? text : text.text;
    const result = await query(text, values);
    if (sql.includes('outcome IS NOT NULL') && sql.includes('ANY(')) {
      lookUps.push([...((values?.[0] as string[]) ?? [])]);
      answered();
    }
    return result;
  };
}

describe('outcomes settled in another process, on PostgreSQL', { skip: skipWithoutDatabase }, () => {
  let schema = '';
  let admin: Pool;
  let pool: Pool;
  const backends: Backend[] = [];
  afterEach(async () => {
    for (const b of backends.splice(0)) await b.close();
    await pool.end();
    await dropSchema(admin, schema);
    await admin.end();
  });

  test('an ack batch settles the outcomes it names: the awaiting process looks up those, not all it awaits', { timeout: 60_000 }, async () => {
    schema = schemaName('lookups');
    admin = adminPool();
    pool = new Pool({ connectionString: databaseUrl, max: 4 });
    const lookUps: string[][] = [];
    let onAnswer = (): void => undefined;
    recordLookUps(pool, lookUps, () => onAnswer());
    // No poll during the test: every look-up comes from a `done` read or a notification.
    const front = await openBackend({ schema, pool, pollMs: 600_000 });
    backends.push(front);
    const worker = await openBackend({ schema, pollMs: 600_000 });
    backends.push(worker);

    const ids = Array.from({ length: 100 }, (_, i) => `e${i}`);
    const handles = ids.map((id) => front.broker.enqueue({ id, jobId: `job-${id}`, type: 'service' }));
    await Promise.all(handles.map((h) => h.accepted));
    const done = new Map<string, Promise<EvaluationOutcome>>(handles.map((h) => [h.id, h.done]));
    for (const d of done.values()) d.catch(() => undefined);
    // Reading `done` looks each one up once (none is settled yet).
    const seen = (): Set<string> => new Set(lookUps.flat());
    await new Promise<void>((resolve) => {
      onAnswer = () => seen().size === ids.length && resolve();
      onAnswer();
    });
    assert.ok(lookUps.flat().length <= 2 * ids.length, `each awaited id looked up about once, but ${lookUps.flat().length} ids were sent`);

    lookUps.length = 0;
    const deliveries = await worker.broker.dequeueMany(['service'], 5, 0);
    assert.equal(deliveries.length, 5);
    await Promise.all(deliveries.map((d) => worker.broker.ack(d.evaluation.id, d.token)));
    const acked = deliveries.map((d) => d.evaluation.id).sort();
    for (const id of acked) assert.equal((await done.get(id))!.status, 'acked');

    const named = [...seen()].sort();
    assert.deepEqual(named, acked, 'the look-ups after the ack named the acked evaluations only');
    assert.ok(lookUps.flat().length <= 2 * acked.length, `${lookUps.flat().length} ids looked up for ${acked.length} settled`);
  });
});
