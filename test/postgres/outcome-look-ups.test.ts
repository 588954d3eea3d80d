/**
 * Outcomes awaited in one process and settled in another, against a real PostgreSQL: every notification that an
 * outcome was stored (an ack batch, a dead letter, a removal, a single ack, a supersession) names its evaluations,
 * and the awaiting process looks up those alone, at once: not every outcome it awaits, and not at its next poll.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { Pool } from 'pg';
import type { Backend } from '../../src/backend/backend.js';
import type { EvaluationOutcome } from '../../src/broker/outcome-waiters.js';
import { InvalidPlanError } from '../../src/errors.js';
import { openBackend } from './backend-harness.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { recordLookUps } from './look-up-recorder.js';

requireDatabaseInCI();

/** How `done` settled: the status, or the error's code. */
const settledAs = (done: Promise<EvaluationOutcome>): Promise<string> =>
  done.then(
    (outcome) => outcome.status,
    (error: unknown) => (error as { code?: string }).code ?? String(error),
  );

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
