/**
 * A start that cannot reach the database: `start()` rejects with the typed error, and the release that follows says
 * nothing more. A process that never opened holds no delivery, never stood as waiting and was offered nothing, so
 * its close has nothing to give back or withdraw; trying anyway only fails again and buries the one error that
 * matters under warnings of its own. Needs no database: nothing listens on port 1 of loopback.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { createEngine } from '../../src/index.js';
import { postgresBackend } from '../../src/postgres/index.js';

test('an unreachable database: start() rejects with ERR_BACKEND_UNAVAILABLE, and nothing is logged at warn or above', async () => {
  const lines: { level: number; msg: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') lines.push(JSON.parse(line) as { level: number; msg: string });
      done();
    },
  });
  const engine = createEngine({
    backend: postgresBackend({ connectionString: 'postgres://u:p@127.0.0.1:1/none', schema: 'tickpool' }),
    schedulers: { create: new URL('./fixtures/create-record.js', import.meta.url) },
    tables: ['records'],
    threads: 1,
    logger: pino({ level: 'debug' }, sink),
  });
  await assert.rejects(engine.start(), (e: { code?: unknown }) => e.code === 'ERR_BACKEND_UNAVAILABLE');
  const loud = lines.filter((l) => l.level >= pino.levels.values.warn!);
  assert.deepEqual(loud.map((l) => l.msg), []);
});
