/**
 * One bad member must never fail its batch. The entries refuse what the database cannot hold (`storable-key.ts`,
 * the time bounds of `wait`/`waitUntil`, values with shared memory); and should the server still refuse something a
 * batch carries (a data exception or a program limit: SQLSTATE class 22 or 54), the batch is split and committed in
 * halves, so that only the member that causes it is refused. The second part makes the server's refusal with a
 * pool that refuses any statement carrying the string 'poison', as PostgreSQL refuses a value it cannot hold.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { Registry } from 'prom-client';
import { EvalBroker } from '../../src/broker/eval-broker.js';
import { openBackend, silentLogger } from './backend-harness.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

const count = async (admin: pg.Pool, sql: string): Promise<number> => (await admin.query<{ n: number }>(sql)).rows[0]!.n;

test('a due time past the last a Date holds is refused at enqueue in both backends; the evaluations enqueued with it are admitted', { skip: skipWithoutDatabase, timeout: 30_000 }, async () => {
  const schema = schemaName('isolation');
  const admin = adminPool();
  const backend = await openBackend({ schema });
  const memory = new EvalBroker({ logger: silentLogger, registry: new Registry(), knownTypes: ['service'] });
  try {
    const handles = [];
    for (let i = 0; i < 20; i++) {
      handles.push(backend.broker.enqueue({ id: `ok${i}`, type: 'service', ...(i === 5 ? { waitUntil: -1e15 } : {}) }));
      if (i === 10) {
        for (const broker of [backend.broker, memory]) {
          assert.throws(() => broker.enqueue({ id: 'far', type: 'service', waitUntil: 1e20 }), (e: unknown) => (e as { code?: unknown }).code === 'ERR_INVALID_EVALUATION' && /waitUntil/.test((e as Error).message));
          assert.throws(() => broker.enqueue({ id: 'long', type: 'service', wait: 1e300 }), (e: unknown) => (e as { code?: unknown }).code === 'ERR_INVALID_EVALUATION' && /wait/.test((e as Error).message));
        }
      }
    }
    await Promise.all(handles.map((h) => h.accepted));
    // A due time long past is due now, as in memory.
    assert.equal(await count(admin, `SELECT count(*)::int AS n FROM "${schema}".evals WHERE state = 'ready'`), 20);
  } finally {
    await backend.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});

/** Refuses, as the server refuses a value it cannot hold, every enqueue and plan commit that carries 'poison'. */
class PoisonPool extends pg.Pool {
  static refuses(text: unknown, values: unknown): boolean {
    return typeof text === 'string' && /\.(enqueue|commit_batch)\(/.test(text) && JSON.stringify(values ?? []).includes('"poison"');
  }

  static refusal(): Error {
    return Object.assign(new Error('invalid input (the test refuses "poison")'), { code: '22P05' });
  }

  override query(...args: unknown[]): never {
    if (PoisonPool.refuses(args[0], args[1])) return Promise.reject(PoisonPool.refusal()) as never;
    return (super.query as (...a: unknown[]) => never)(...args);
  }

  override connect(...args: unknown[]): never {
    // With a callback: the pool's own `query` checking a client out (refused above already).
    if (args.length > 0) return (super.connect as (...a: unknown[]) => never)(...args);
    const connected = (super.connect as () => Promise<pg.PoolClient>)();
    return connected.then((client) => {
      if (!poisoned.has(client)) {
        poisoned.add(client);
        const query = client.query.bind(client) as (...a: unknown[]) => unknown;
        (client as { query: unknown }).query = (...a: unknown[]) => (PoisonPool.refuses(a[0], a[1]) ? Promise.reject(PoisonPool.refusal()) : query(...a));
      }
      return client;
    }) as never;
  }
}
const poisoned = new WeakSet<object>();

test('a batch the server refuses for one member is split: only that member is refused, the others are admitted and committed', { skip: skipWithoutDatabase, timeout: 30_000 }, async () => {
  const schema = schemaName('isolation');
  const admin = adminPool();
  const pool = new PoisonPool({ connectionString: databaseUrl, max: 4 });
  const backend = await openBackend({ schema, pool, tables: ['records'] });
  try {
    // One turn of enqueues: one admitting statement, which the server refuses for 'poison'.
    const handles = Array.from({ length: 21 }, (_, i) => backend.broker.enqueue({ id: i === 13 ? 'poison' : `e${i}`, type: 'service' }));
    const admitted = await Promise.allSettled(handles.map((h) => h.accepted));
    assert.deepEqual(admitted.map((s) => s.status).filter((s) => s === 'rejected').length, 1);
    assert.equal(admitted[13]!.status, 'rejected');
    assert.equal(((admitted[13] as PromiseRejectedResult).reason as { code?: unknown }).code, '22P05');
    assert.equal(await count(admin, `SELECT count(*)::int AS n FROM "${schema}".evals`), 20);

    // One turn of plans: one commit batch, which the server refuses for the plan writing 'poison'.
    const plans = Array.from({ length: 9 }, (_, i) => backend.plans.submit({ writes: [{ table: 'records', key: i === 4 ? 'poison' : `r${i}`, value: i, readIndex: 0 }] }));
    const committed = await Promise.allSettled(plans);
    assert.deepEqual(committed.map((s) => s.status), committed.map((_, i) => (i === 4 ? 'rejected' : 'fulfilled')));
    assert.equal(await count(admin, `SELECT count(*)::int AS n FROM "${schema}".state_records`), 8);
    assert.equal(await count(admin, `SELECT count(*)::int AS n FROM "${schema}".state_log`), 8, 'one log row per committed plan, no gap');
  } finally {
    await backend.close();
    await pool.end();
    await dropSchema(admin, schema);
    await admin.end();
  }
});

test('a value with shared memory in a plan\'s ack or an ack is refused alone, typed; the plans and acks of its batch go through', { skip: skipWithoutDatabase, timeout: 30_000 }, async () => {
  const schema = schemaName('isolation');
  const admin = adminPool();
  const backend = await openBackend({ schema, tables: ['records'] });
  try {
    for (let i = 0; i < 6; i++) await backend.broker.enqueue({ id: `e${i}`, type: 'service' }).accepted;
    const deliveries = [];
    for (let i = 0; i < 6; i++) deliveries.push((await backend.broker.dequeue(['service'], 10_000))!);
    const shared = new SharedArrayBuffer(8);
    // Three plans acking their deliveries in one commit batch, the second with a value that cannot be stored.
    const plans = deliveries.slice(0, 3).map((d, i) =>
      backend.plans.submit(
        { writes: [{ table: 'records', key: `r${i}`, value: i, readIndex: 0 }] },
        { evaluationId: d.evaluation.id, token: d.token, ack: { value: i === 1 ? { shared } : i, attempts: 1 } },
      ),
    );
    const committed = await Promise.allSettled(plans);
    assert.deepEqual(committed.map((s) => s.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.equal(((committed[1] as PromiseRejectedResult).reason as { code?: unknown }).code, 'ERR_INVALID_PLAN');
    // Three acks of one turn, the second with such a value: refused at the call, the others acked.
    const acks = deliveries.slice(3).map((d, i) => {
      try {
        return backend.broker.ack(d.evaluation.id, d.token, { value: i === 1 ? shared : i });
      } catch (error) {
        return Promise.reject(error);
      }
    });
    const acked = await Promise.allSettled(acks);
    assert.deepEqual(acked.map((s) => s.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.equal(((acked[1] as PromiseRejectedResult).reason as { code?: unknown }).code, 'ERR_INVALID_ARGUMENT');
    assert.equal(await count(admin, `SELECT count(*)::int AS n FROM "${schema}".evals WHERE state = 'acked'`), 4);
  } finally {
    await backend.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});
