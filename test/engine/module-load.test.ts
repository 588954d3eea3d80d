/**
 * A registered module that cannot be loaded is found at `start()`, not evaluation by evaluation: `start()` rejects
 * with a `ModuleLoadError` naming the module and carrying the load error, and the engine is stopped. A thread
 * started later that cannot load a module is reported the same way (`engine:module-error`, and a log line).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { createEngine, EngineState, type Engine } from '../../src/engine/engine.js';
import { ModuleLoadError } from '../../src/errors.js';

const fixture = (name: string): URL => new URL(`../fixtures/${name}.js`, import.meta.url);
const logger = pino({ level: 'silent' });
const scratch = mkdtempSync(join(tmpdir(), 'tickpool-module-load-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/**
 * `start()`'s rejection, which must come (an engine that started is stopped and fails the test). Nothing is ever
 * enqueued, so the error can only come from the threads' load at start, not from evaluations that failed.
 */
async function startFailure(engine: Engine): Promise<ModuleLoadError> {
  try {
    await engine.start();
  } catch (error) {
    assert.ok(error instanceof ModuleLoadError, `a ModuleLoadError, got ${String(error)}`);
    assert.equal(error.code, 'ERR_MODULE_LOAD');
    assert.equal(engine.status, EngineState.STOPPED, 'the engine is stopped');
    return error;
  }
  await engine.stop();
  assert.fail('start() resolved although a registered module cannot be loaded');
}

test('start() rejects naming a scheduler module whose import throws, with the import error as cause', async () => {
  // Written here rather than kept with the fixtures: the test runner imports every compiled file under test/.
  const file = join(scratch, 'throws-at-import.mjs');
  writeFileSync(file, "throw new Error('this module is broken at import');\n");
  const url = pathToFileURL(file);
  const error = await startFailure(createEngine({ threads: 2, logger, schedulers: { noop: fixture('noop'), broken: url } }));
  assert.match(error.message, /scheduler module of "broken"/);
  assert.ok(error.message.includes(url.href), error.message);
  assert.match(error.message, /this module is broken at import/);
  assert.match(String((error.cause as Error | undefined)?.message), /this module is broken at import/);
  assert.deepEqual({ ...error.details, threadIndex: 0 }, { kind: 'scheduler', name: 'broken', url: url.href, exportName: 'default', threadIndex: 0 });
});

test('start() rejects for a module with a syntax error, and for one whose file type the threads cannot load', async () => {
  const syntax = join(scratch, 'syntax.mjs');
  writeFileSync(syntax, 'export default async function (evaluation) { return evaluation.\n');
  const a = await startFailure(createEngine({ threads: 1, logger, schedulers: { typo: syntax } }));
  assert.match(a.message, /"typo"/);
  assert.match(a.message, /SyntaxError|Unexpected/);
  // Plain Node (no TypeScript loader on main) cannot import a .ts file: said at start, with Node's own reason.
  const ts = join(scratch, 'scheduler.ts');
  writeFileSync(ts, 'export default async function (evaluation: unknown): Promise<undefined> { return undefined; }\n');
  const b = await startFailure(createEngine({ threads: 1, logger, schedulers: { typed: pathToFileURL(ts) } }));
  assert.match(b.message, /"typed"/);
  assert.match(b.message, /Unknown file extension "\.ts"/);
});

test('start() rejects for a task handler module that exports no function under its export name', async () => {
  const error = await startFailure(createEngine({ threads: 1, logger, handlers: { nightly: { module: fixture('no-function'), export: 'default' } } }));
  assert.match(error.message, /handler module of "nightly"/);
  assert.match(error.message, /a module exporting a function as `default`/);
  assert.equal(error.details?.['kind'], 'handler');
});

test('a thread started later that cannot load a module is reported with the same error', { timeout: 20_000 }, async (t) => {
  const engine = createEngine({ threads: 1, workers: 1, logger, schedulers: { deploy: fixture('breaks-when-told') } });
  await engine.start();
  t.after(() => {
    delete process.env['TICKPOOL_TEST_BREAK_IMPORT'];
    return engine.stop({ graceMs: 100 });
  });
  const reported = new Promise<{ threadIndex: number; error: ModuleLoadError }>((resolve) => engine.events.on('engine:module-error', resolve));
  // Threads are created with a copy of the environment: the replacement of the thread that exits sees the flag.
  process.env['TICKPOOL_TEST_BREAK_IMPORT'] = '1';
  engine.enqueue({ id: 'exit', jobId: 'exit', type: 'deploy', priority: 50, payload: { exit: true } });
  const { threadIndex, error } = await reported;
  assert.equal(threadIndex, 0);
  assert.ok(error instanceof ModuleLoadError);
  assert.match(error.message, /scheduler module of "deploy"/);
  assert.match(error.message, /broken for threads started from now on/);
  assert.equal(engine.status, EngineState.RUNNING, 'a running engine keeps running');
});
