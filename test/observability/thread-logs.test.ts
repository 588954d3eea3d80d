/**
 * Lines logged on pool threads go through the logger the user passed: its destination, level, `base`, redaction
 * and serializers; each line has every key once, and tickpool's components name themselves under one key.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { promisify } from 'node:util';
import { pino } from 'pino';
import { createEngine } from '../../src/engine/engine.js';
import { parseStrictJson } from '../helpers/strict-json.js';

const fixture = (name: string): URL => new URL(`../fixtures/${name}.js`, import.meta.url);
const scratch = mkdtempSync(join(tmpdir(), 'tickpool-thread-logs-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/**
 * The user's program, run as a child process: an engine whose logger is the user's pino logger on stderr (fd 2),
 * with `base` and redaction, running `loud` (which logs from a pool thread). Written here rather than kept with the
 * fixtures: the test runner imports every compiled file under test/.
 */
function writeApp(): string {
  const file = join(scratch, 'app.mjs');
  const pino = new URL('../../../node_modules/pino/pino.js', import.meta.url).href;
  const library = new URL('../../src/index.js', import.meta.url).href;
  writeFileSync(
    file,
    `import { pino } from ${JSON.stringify(pino)};
import { createEngine } from ${JSON.stringify(library)};
const logger = pino({ level: 'info', base: { app: 'mine' }, redact: ['secret'] }, pino.destination({ fd: 2, sync: true }));
const engine = createEngine({ threads: 1, workers: 1, logger, schedulers: { loud: ${JSON.stringify(fixture('loud').href)} } });
await engine.start();
const acked = new Promise((resolve) => engine.broker.events.on('broker:ack', () => resolve()));
engine.enqueue({ id: 'e1', jobId: 'j1', type: 'loud', priority: 50 });
await acked;
await engine.stop();
logger.info('main is done');
`,
  );
  return file;
}

type Line = Record<string, unknown>;

/** Every line parsed with duplicate keys refused; a line that is not one JSON object fails the test. */
function lines(text: string): Line[] {
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      const parsed = parseStrictJson(l);
      assert.ok(parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed), `a JSON object per line: ${l}`);
      return parsed as Line;
    });
}

test("a pool thread's ctx.logger writes through the user's logger: its stream, level, base, redaction, serializers", { timeout: 30_000 }, async () => {
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [writeApp()], { timeout: 25_000 });
  assert.equal(stdout, '', 'nothing on stdout: the user logs to stderr');
  const all = lines(stderr);
  const warn = all.find((l) => l['msg'] === 'from the pool thread');
  assert.ok(warn !== undefined, `the thread's line is on the user's stream:\n${stderr}`);
  assert.equal(warn['level'], 40);
  assert.equal(warn['app'], 'mine', "the user's base");
  assert.equal(warn['secret'], '[Redacted]', "the user's redaction");
  assert.equal(warn['thread'], 0, 'the thread that wrote it');
  assert.equal(warn['evalId'], 'e1', "ctx.logger's own bindings");
  assert.equal(warn['evaluation'], 'e1');
  assert.equal(warn['name'], undefined, 'no logger name of its own');
  assert.equal(all.some((l) => l['msg'] === 'a debug line'), false, "the user's level");
  const error = all.find((l) => l['msg'] === 'with an error');
  const err = error?.['err'] as { type?: unknown; message?: unknown; stack?: unknown } | undefined;
  assert.equal(err?.type, 'Error', "the user's err serializer");
  assert.equal(err?.message, 'boom');
  assert.match(String(err?.stack), /loud\.js/);
  const formatted = all.find((l) => l['msg'] === '3 nodes scored');
  assert.equal(formatted?.['step'], 'place', 'child bindings and message formatting');
  assert.ok(all.some((l) => l['msg'] === 'main is done'), "main's own lines on the same stream");
});

test('no line has a key twice, and components name themselves under one key, even on a logger that binds those keys', { timeout: 30_000 }, async () => {
  const written: string[] = [];
  const destination = { write: (chunk: string) => void written.push(chunk) };
  // An application that names its parts `component`, and binds a `thread` of its own, as the demo does.
  const logger = pino({ level: 'debug' }, destination).child({ component: 'app', thread: 'main' });
  const engine = createEngine({ threads: 1, workers: 1, logger, schedulers: { loud: fixture('loud') }, handlers: { h: fixture('noop') } });
  try {
    await engine.start();
    const acked = new Promise<void>((resolve) => engine.broker.events.on('broker:ack', () => resolve()));
    const ran = new Promise<void>((resolve) => engine.tasks.events.on('task:run:finish', () => resolve()));
    // A run log that fails makes the task scheduler log a warning per write (the scheduler logs only trouble).
    engine.tasks.runLog.updateRunState = () => {
      throw new Error('the run log is full');
    };
    engine.tasks.add({ id: 't', every: '1h', maxConcurrency: 1, handler: 'h' });
    await engine.tasks.forceRun('t');
    engine.enqueue({ id: 'e1', jobId: 'j1', type: 'loud', priority: 50 });
    await Promise.all([acked, ran]);
  } finally {
    await engine.stop();
  }
  const all = lines(written.join(''));
  const broker = all.filter((l) => l['tickpoolComponent'] === 'eval-broker');
  const tasks = all.filter((l) => l['tickpoolComponent'] === 'task-scheduler');
  assert.ok(broker.length > 0, 'broker lines');
  assert.ok(tasks.length > 0, 'task scheduler lines, named under the same key');
  for (const line of [...broker, ...tasks]) assert.equal(line['component'], 'app', "the application's own value is kept");
  const fromThread = all.find((l) => l['msg'] === 'from the pool thread');
  assert.equal(fromThread?.['thread'], 'main');
  assert.equal(fromThread?.['tickpoolThread'], 0);
});

test("a level change of the user's logger reaches the pool threads", { timeout: 30_000 }, async () => {
  const written: string[] = [];
  const logger = pino({ level: 'info' }, { write: (chunk: string) => void written.push(chunk) });
  const engine = createEngine({ threads: 1, workers: 1, logger, schedulers: { loud: fixture('loud') } });
  try {
    await engine.start();
    const acks: Array<() => void> = [];
    engine.broker.events.on('broker:ack', () => acks.shift()?.());
    const run = (id: string): Promise<void> => {
      const acked = new Promise<void>((resolve) => acks.push(resolve));
      engine.enqueue({ id, jobId: id, type: 'loud', priority: 50 });
      return acked;
    };
    await run('at-info');
    logger.level = 'debug';
    await run('at-debug');
  } finally {
    await engine.stop();
  }
  const debug = lines(written.join('')).filter((l) => l['msg'] === 'a debug line').map((l) => l['evalId']);
  assert.deepEqual(debug, ['at-debug']);
});
