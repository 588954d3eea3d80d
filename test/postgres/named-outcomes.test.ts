/**
 * Every way an outcome is stored in another process names its evaluations to the process that awaits them, against
 * a real PostgreSQL: a dead letter, a removal, a single ack and a supersession each make the awaiting process look
 * up those evaluations alone, at once, not every outcome it awaits, and not at its next poll (which is set far off).
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { Pool, type QueryConfig } from 'pg';
import type { Backend } from '../../src/backend/backend.js';
import type { EvaluationOutcome } from '../../src/broker/outcome-waiters.js';
import { InvalidPlanError } from '../../src/errors.js';
import { openBackend } from './backend-harness.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

/** The ids of each outcome look-up the backend sends through `pool`, recorded once it has answered. */
function recordLookUps(pool: Pool, lookUps: string[][]): void {
  const query = pool.query.bind(pool) as (text: string | QueryConfig, values?: unknown[]) => Promise<unknown>;
  (pool as { query: unknown }).query = async (text: string | QueryConfig, values?: unknown[]) => {
    const sql = typeof text === 'string' ? text : text.text;
    const result = await query(text, values);
    if (sql.includes('outcome IS NOT NULL') && sql.includes('ANY(')) lookUps.push([...((values?.[0] as string[]) ?? [])]);
    return result;
  };
}

/** How `done` settled: the status, or the error's code. */
const settledAs = (done: Promise<EvaluationOutcome>): Promise<string> =>
  done.then(
    (outcome) => outcome.status,
    (error: unknown) => (error as { code?: string }).code ?? String(error),
  );

describe('outcomes named to the process that awaits them, on PostgreSQL', { skip: skipWithoutDatabase }, () => {
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

  test('a dead letter, a removal, a single ack and a supersession each look up their own evaluations, at once', { timeout: 60_000 }, async () => {
    schema = schemaName('named');
    admin = adminPool();
    pool = new Pool({ connectionString: databaseUrl, max: 4 });
    const lookUps: string[][] = [];
    recordLookUps(pool, lookUps);
    // No poll during the test: every look-up after the first reads comes from a notification.
    const front = await openBackend({ schema, pool, pollMs: 600_000 });
    backends.push(front);
    const worker = await openBackend({ schema, pollMs: 600_000 });
    backends.push(worker);
    const other = await openBackend({ schema, pollMs: 600_000 });
    backends.push(other);

    const enqueue = (id: string, jobId = `job-${id}`) => front.broker.enqueue({ id, jobId, type: 'service' });
    // Awaited throughout and never settled: a bare notification would look it up too.
    const bystanders = ['by1', 'by2', 'by3'].map((id) => enqueue(id, 'job-bystanders'));
    const handles = [enqueue('dead'), enqueue('gone'), enqueue('single'), enqueue('first', 'job-s'), enqueue('older', 'job-s'), enqueue('newer', 'job-s')];
    await Promise.all([...bystanders, ...handles].map((h) => h.accepted));
    const done = new Map(handles.map((h) => [h.id, settledAs(h.done)]));
    for (const h of bystanders) h.done.catch(() => undefined);
    // Reading `done` looks each one up once; wait for those first reads to answer.
    await new Promise<void>((resolve) => {
      const check = (): void => (['dead', 'gone', 'single', 'first', 'older', 'newer'].every((id) => lookUps.flat().includes(id)) ? resolve() : void setImmediate(check));
      check();
    });

    /** Runs `event`, waits until `settled` have settled, and answers the ids looked up meanwhile. */
    async function lookedUpFor(event: () => Promise<unknown>, settled: readonly string[]): Promise<string[]> {
      lookUps.length = 0;
      await event();
      await Promise.all(settled.map((id) => done.get(id)));
      return [...new Set(lookUps.flat())].sort();
    }

    // The worker takes every ready evaluation (one per job: `older` and `newer` wait pending behind `first`, two of
    // the bystanders behind the third) and holds them unacked.
    const held = (await worker.broker.dequeueMany(['service'], 20, 0)).map((d) => d.evaluation.id).sort();
    assert.deepEqual(held, ['by1', 'dead', 'first', 'gone', 'single']);
    const tokenOf = async (id: string): Promise<string> => (await worker.broker.outstanding(id))!;

    assert.deepEqual(await lookedUpFor(async () => worker.broker.fail('dead', await tokenOf('dead'), new InvalidPlanError('plan', 'a plan', 1)), ['dead']), ['dead']);
    assert.equal(await done.get('dead'), 'ERR_INVALID_PLAN');

    assert.deepEqual(await lookedUpFor(async () => worker.broker.remove('gone', await tokenOf('gone')), ['gone']), ['gone']);
    assert.equal(await done.get('gone'), 'ERR_ABORTED');

    // Acked by a process that did not dequeue it: the single ack.
    assert.deepEqual(await lookedUpFor(async () => other.broker.ack('single', await tokenOf('single')), ['single']), ['single']);
    assert.equal(await done.get('single'), 'acked');

    // The ack of `first` promotes the newest pending evaluation of its job and supersedes the older one.
    assert.deepEqual(await lookedUpFor(async () => worker.broker.ack('first', await tokenOf('first')), ['first', 'older']), ['first', 'older']);
    assert.equal(await done.get('first'), 'acked');
    assert.equal(await done.get('older'), 'ERR_SUPERSEDED');
  });
});
