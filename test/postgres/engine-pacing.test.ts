/**
 * The engine wires its pool's work ahead into the PostgreSQL broker's pacing (`BrokerBackend.paceBy`), with real
 * threads and a real PostgreSQL: what the broker reads is the predicted work queued behind the thread's running
 * item (counted up to a second), and nothing once the evaluations are done.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { pino } from 'pino';
import type { BackendFactory } from '../../src/backend/backend.js';
import { UNKNOWN_MS } from '../../src/pool/cost-model.js';
import { createEngine } from '../../src/index.js';
import { postgresBackend, type PostgresBackend } from '../../src/postgres/index.js';
import { holdChannel } from '../fixtures/channel-gated.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

test('the broker reads the pool\u2019s work ahead: the unstarted evaluations\u2019 predicted ms, then nothing', { skip: skipWithoutDatabase, timeout: 60_000 }, async () => {
  const schema = schemaName('pacing');
  const admin = adminPool();
  after(async () => {
    await dropSchema(admin, schema);
    await admin.end();
  });
  // The factory the engine is given, with the broker's `paceBy` watched: the engine must register its pool there.
  const inner = postgresBackend({ connectionString: databaseUrl!, schema });
  let workAheadMs: (() => number) | undefined;
  const watched: BackendFactory<PostgresBackend> = {
    name: inner.name,
    create: (context) => {
      const backend = inner.create(context);
      const paceBy = backend.broker.paceBy.bind(backend.broker);
      backend.broker.paceBy = (read) => {
        workAheadMs = read;
        paceBy(read);
      };
      return backend;
    },
  };
  const engine = createEngine({
    backend: watched,
    schedulers: { held: new URL('../fixtures/channel-gated.js', import.meta.url) },
    threads: 1,
    workers: 4,
    logger: pino({ level: 'warn' }),
  });
  assert.equal(typeof workAheadMs, 'function', 'the engine registered its pool with the broker');
  // Four evaluations of a kind never measured (each predicted at UNKNOWN_MS), on one thread: while the first is held
  // (through a channel: a payload crosses the database), the other three wait in the pool. The workers start paused
  // and resume once all four are stored, so that one fetch leases them all: the broker leases only for threads free
  // soon, and a held thread never is.
  const hold = holdChannel(`${schema}-hold`);
  await engine.start();
  try {
    assert.equal(workAheadMs!(), 0, 'idle: nothing ahead');
    let enqueued = 0;
    const allEnqueued = new Promise<void>((resolve) => engine.broker.events.on('broker:enqueue', () => ++enqueued === 4 && resolve()));
    let dequeued = 0;
    const allDequeued = new Promise<void>((resolve) => engine.broker.events.on('broker:dequeue', () => ++dequeued === 4 && resolve()));
    engine.pauseWorkers();
    const outcomes = Array.from({ length: 4 }, (_, i) => engine.run({ id: `s${i}`, type: 'held', payload: { channel: `${schema}-hold` } }));
    await allEnqueued;
    engine.resumeWorkers();
    await allDequeued;
    await new Promise((resolve) => setImmediate(resolve));
    await hold.started;
    // Three seconds are predicted; the engine's reader stops counting at one (enough for any round trip).
    assert.equal(engine.stats().pool.queued, 3);
    assert.ok(workAheadMs!() >= UNKNOWN_MS, `at least a second ahead, read ${workAheadMs!()} ms`);
    hold.release();
    for (const outcome of await Promise.all(outcomes)) assert.equal(outcome.status, 'acked');
    assert.equal(workAheadMs!(), 0, 'all done: nothing ahead');
  } finally {
    hold.release();
    await engine.stop();
    hold.close();
  }
});
