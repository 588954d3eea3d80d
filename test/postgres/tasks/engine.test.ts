/**
 * `engine.tasks` on the PostgreSQL backend, with real pool threads: tasks declared into the shared catalogue (a
 * promise, waiting for the start when made before it), run on this process's threads, their runs in the shared log.
 */
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { after, describe, test } from 'node:test';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { InvalidOptionError, TaskNotFoundError } from '../../../src/errors.js';
import { createEngine } from '../../../src/index.js';
import { postgresBackend } from '../../../src/postgres/index.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from '../helpers.js';
import { waitFor } from './harness.js';

requireDatabaseInCI();

describe('engine.tasks on PostgreSQL', { skip: skipWithoutDatabase }, () => {
  const admin = skipWithoutDatabase === false ? adminPool() : undefined;
  const schemas: string[] = [];
  after(async () => {
    for (const schema of schemas) await dropSchema(admin!, schema);
    await admin?.end();
  });

  test('add resolves after the commit (waiting for the start), runs go to the pool, the shared log has their values', async () => {
    const schema = schemaName('eng');
    schemas.push(schema);
    const registry = new Registry();
    const engine = createEngine({
      backend: postgresBackend({ connectionString: databaseUrl!, schema, pollMs: 200 }),
      handlers: { value: new URL('./fixtures/value-handler.js', import.meta.url) },
      threads: 1,
      claimTtlMs: 3000,
      tickMs: 200,
      registry,
      logger: pino({ level: 'silent' }),
    });
    try {
      const added = engine.tasks.add({ id: 't', every: '200ms', maxConcurrency: 1, handler: 'value', payload: { n: 7 } });
      assert.ok(added instanceof Promise, 'a shared store declares asynchronously');
      await engine.start();
      const task = await added;
      assert.equal(task.id, 't');
      await waitFor('two runs logged', async () => (await engine.tasks.runLog.runs('t')).filter((r) => r.finalStatus === 'success').length >= 2);
      const runs = (await engine.tasks.runLog.runs('t')).filter((r) => r.finalStatus === 'success');
      assert.ok(runs[0]!.scheduledFor > runs[1]!.scheduledFor, 'newest first');
      assert.deepEqual(runs[0]!.value, { n: 7, scheduledFor: runs[0]!.scheduledFor });
      assert.ok(runs[0]!.processes![0]!.startsWith(`${hostname()}/${process.pid}/`), runs[0]!.processes![0]);
      const claims = await registry.getSingleMetric('tickpool_task_scheduler_claims_active')!.get();
      assert.equal(claims.values[0]?.value, 1, "this process's claims");

      // Declared again at the next start-up of the service: nothing changes.
      await engine.tasks.add({ id: 't', every: '200ms', maxConcurrency: 1, handler: 'value', payload: { n: 7 } });
      const { rows } = await admin!.query(`SELECT version::int FROM "${schema}".task_catalog`);
      assert.equal(rows[0].version, 1);

      await engine.tasks.remove('t');
      assert.equal(engine.tasks.taskStats('t'), undefined);
      await assert.rejects(engine.tasks.remove('t'), TaskNotFoundError);
    } finally {
      await engine.stop();
    }
    const { rows } = await admin!.query(`SELECT count(*)::int AS n FROM "${schema}".task_members WHERE NOT dead`);
    assert.equal(rows[0].n, 0, 'stop leaves the task store');
  });

  test('createEngine refuses a claimTtlMs whose half lease cannot hold cancelGraceMs', () => {
    assert.throws(
      () => createEngine({ backend: postgresBackend({ connectionString: databaseUrl!, schema: 'unused' }), claimTtlMs: 1000, cancelGraceMs: 1000 }),
      (error: unknown) => error instanceof InvalidOptionError && /claimTtlMs/.test(error.message),
    );
  });
});
