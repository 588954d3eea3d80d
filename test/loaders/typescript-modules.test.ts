/**
 * Schedulers and task handlers written in TypeScript load on the pool threads however the main thread loads its
 * own TypeScript: each case runs a `.ts` main with `.ts` modules in a child process, the way a user runs it.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
// Compiled tests live in <outDir>/test/loaders/: the repository root is three levels up.
const root = new URL('../../../', import.meta.url);
const library = new URL('dist/src/index.js', root).href;
const tsxCli = fileURLToPath(new URL('node_modules/tsx/dist/cli.mjs', root));
const tsxLoader = new URL('node_modules/tsx/dist/loader.mjs', root).href;

const app = mkdtempSync(join(tmpdir(), 'tickpool-ts-app-'));
after(() => rmSync(app, { recursive: true, force: true }));
writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'ts-app', private: true, type: 'module' }));
// Type annotations and an interface: none of this parses as JavaScript.
writeFileSync(
  join(app, 'scheduler.ts'),
  `import type { Scheduler } from ${JSON.stringify(library)};
interface Words { readonly text: string }
const count = (text: string): number => text.split(/\\s+/).filter(Boolean).length;
export default (async (evaluation, ctx) => {
  const current = ctx.snapshot.get<number>('words', evaluation.jobId);
  return { writes: [{ table: 'words', key: evaluation.jobId, value: (current?.value ?? 0) + count(evaluation.payload.text), readIndex: current?.modifyIndex ?? 0 }] };
}) satisfies Scheduler<Words>;
`,
);
writeFileSync(
  join(app, 'handler.ts'),
  `export default async function rollup(run: { readonly payload: { readonly n: number } }): Promise<number> {
  const doubled: number = run.payload.n * 2;
  return doubled;
}
`,
);
writeFileSync(
  join(app, 'main.ts'),
  `import { createEngine } from ${JSON.stringify(library)};
const engine = createEngine({
  threads: 2,
  schedulers: { count: './scheduler.ts' },
  handlers: { rollup: './handler.ts' },
  tables: ['words'],
  broker: { deliveryLimit: 1 },
});
await engine.start();
const failed: string[] = [];
engine.broker.events.on('broker:failed', ({ reason }) => failed.push(String(reason)));
const acked = new Promise<void>((done) => engine.broker.events.on('broker:ack', () => done()));
const ran = new Promise<unknown>((done) => engine.tasks.events.on('task:run:finish', ({ status, value }) => done(status + ' ' + String(value))));
engine.tasks.add({ id: 'rollup', every: '1h', maxConcurrency: 1, handler: 'rollup', payload: { n: 21 } });
await engine.tasks.forceRun('rollup');
engine.enqueue({ id: 'e1', jobId: 'a', type: 'count', priority: 50, payload: { text: 'to be or not to be' } });
await Promise.race([acked, new Promise((done) => setTimeout(done, 10_000).unref())]);
const words: number | undefined = engine.state.snapshot().get<number>('words', 'a')?.value;
console.log(JSON.stringify({ words, task: await ran, failed }));
await engine.stop();
`,
);

async function runMain(args: readonly string[]): Promise<unknown> {
  const { stdout } = await run(process.execPath, [...args, 'main.ts'], { cwd: app, timeout: 30_000 });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as unknown;
}

const expected = { words: 6, task: 'success 42', failed: [] };

test('under the tsx CLI (`tsx main.ts`), .ts schedulers and handlers load on the pool threads', { timeout: 40_000 }, async () => {
  assert.deepEqual(await runMain([tsxCli]), expected);
});

test("under `node --import tsx`, .ts schedulers and handlers load on the pool threads", { timeout: 40_000 }, async () => {
  assert.deepEqual(await runMain(['--import', tsxLoader]), expected);
});

// Node's own type stripping (22.6+, a flag until 23.6): the threads inherit the flag with main's execArgv.
const stripTypes = process.allowedNodeEnvironmentFlags.has('--experimental-strip-types');
test(
  "under Node's --experimental-strip-types, .ts schedulers and handlers load on the pool threads",
  { timeout: 40_000, skip: stripTypes ? false : `Node ${process.version} has no --experimental-strip-types` },
  async () => {
    assert.deepEqual(await runMain(['--experimental-strip-types', '--no-warnings']), expected);
  },
);
