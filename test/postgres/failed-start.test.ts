/**
 * A start that cannot use the database: `start()` rejects with `ERR_BACKEND_UNAVAILABLE` (the driver's reason in its
 * message and `cause`), and the release that follows says nothing more. A process that never opened holds no
 * delivery, never stood as waiting and was offered nothing, so its close has nothing to give back or withdraw; trying
 * anyway only fails again and buries the one error that matters under warnings of its own.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { createEngine } from '../../src/index.js';
import { postgresBackend } from '../../src/postgres/index.js';
import { databaseUrl, requireDatabaseInCI, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

/** Starts an engine on `connectionString`: the error start() rejects with, and what was logged at warn or above. */
async function failedStart(connectionString: string): Promise<{ error: { code?: unknown; message?: unknown }; loud: string[] }> {
  const lines: { level: number; msg: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line !== '') lines.push(JSON.parse(line) as { level: number; msg: string });
      done();
    },
  });
  const engine = createEngine({
    backend: postgresBackend({ connectionString, schema: 'tickpool' }),
    schedulers: { create: new URL('./fixtures/create-record.js', import.meta.url) },
    tables: ['records'],
    threads: 1,
    logger: pino({ level: 'debug' }, sink),
  });
  const error = await engine.start().then(
    () => assert.fail('Expected start() to reject'),
    (e: unknown) => e as { code?: unknown; message?: unknown },
  );
  return { error, loud: lines.filter((l) => l.level >= pino.levels.values.warn!).map((l) => l.msg) };
}

/** `databaseUrl` with one part replaced. */
function withUrl(change: (url: URL) => void): string {
  const url = new URL(databaseUrl!);
  change(url);
  return url.toString();
}

test('an unreachable database: start() rejects with ERR_BACKEND_UNAVAILABLE, and nothing is logged at warn or above', async () => {
  // Port 1 on loopback: nothing listens there, so the connection is refused at once. Needs no database.
  const { error, loud } = await failedStart('postgres://u:p@127.0.0.1:1/none');
  assert.equal(error.code, 'ERR_BACKEND_UNAVAILABLE');
  assert.deepEqual(loud, []);
});

test('a wrong password: start() rejects with ERR_BACKEND_UNAVAILABLE naming the refusal, and nothing is logged at warn or above', { skip: skipWithoutDatabase }, async () => {
  const { error, loud } = await failedStart(withUrl((url) => (url.password = 'not-the-password')));
  assert.equal(error.code, 'ERR_BACKEND_UNAVAILABLE');
  assert.match(String(error.message), /password authentication failed/);
  assert.deepEqual(loud, []);
});

test('a database that does not exist: start() rejects with ERR_BACKEND_UNAVAILABLE naming it', { skip: skipWithoutDatabase }, async () => {
  const { error, loud } = await failedStart(withUrl((url) => (url.pathname = '/tickpool_no_such_database')));
  assert.equal(error.code, 'ERR_BACKEND_UNAVAILABLE');
  assert.match(String(error.message), /tickpool_no_such_database/);
  assert.deepEqual(loud, []);
});
