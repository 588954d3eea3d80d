import { after, test } from 'node:test';
import { createEngine } from '../../src/index.js';
import { postgresBackend } from '../../src/postgres/index.js';
import { pino } from 'pino';
import { adminPool, databaseUrl, dropSchema, schemaName, skipWithoutDatabase } from './helpers.js';

test('perf probe', { skip: skipWithoutDatabase || process.env['PROBE'] === undefined }, async () => {
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
  const trace = new Map<string, [number, number]>();
  (globalThis as any).__trace = (op: string, ms: number) => { const t = trace.get(op) ?? [0, 0]; t[0]++; t[1] += ms; trace.set(op, t); };
  await engine.start();
  try {
    const n = Number(process.env['PROBE']);
    const t0 = Date.now();
    const hs = Array.from({ length: n }, (_, i) => engine.enqueue({ type: 'create', payload: { key: `k${i}` } }));
    await Promise.all(hs.map((h) => h.accepted));
    const t1 = Date.now();
    await Promise.all(hs.map((h) => h.done));
    const t2 = Date.now();
    const { rows } = await admin.query(`SELECT count(DISTINCT committed_at)::int AS txns, count(*)::int AS n FROM "${schema}".state_log`);
    console.log([...trace].sort((a, b) => b[1][1] - a[1][1]).slice(0, 20).map(([k, [n, ms]]) => `${k} n=${n} ms=${Math.round(ms)}`).join('\n'));
    console.log({ enqueueMs: t1 - t0, runMs: t2 - t1, perSec: Math.round(n / ((t2 - t1) / 1000)), ...rows[0] });
  } finally {
    await engine.stop();
  }
});
