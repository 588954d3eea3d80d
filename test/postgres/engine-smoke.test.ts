import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { createEngine } from '../../src/index.js';
import { postgresBackend } from '../../src/postgres/index.js';
import { pino } from 'pino';
import { adminPool, databaseUrl, dropSchema, schemaName, skipWithoutDatabase } from './helpers.js';

test('engine smoke', { skip: skipWithoutDatabase }, async () => {
  const schema = schemaName();
  const admin = adminPool();
  after(async () => { await dropSchema(admin, schema); await admin.end(); });
  const engine = createEngine({
    backend: postgresBackend({ connectionString: databaseUrl!, schema }),
    schedulers: { create: new URL('./fixtures/create-record.js', import.meta.url) },
    tables: ['records'],
    threads: 2,
    logger: pino({ level: 'warn' }),
  });
  await engine.start();
  try {
    const outcomes = await Promise.all(Array.from({ length: 200 }, (_, i) => engine.run({ type: 'create', payload: { key: `k${i}` } })));
    assert.equal(outcomes.length, 200);
    console.log(outcomes[0], engine.state.index, await engine.broker.stats());
    const { rows } = await admin.query(`SELECT count(*)::int AS n FROM "${schema}".state_records`);
    assert.equal(rows[0].n, 200);
  } finally {
    await engine.stop();
  }
});
