/**
 * Users of the in-memory engine never load `pg`: nothing reachable from the root entry point (nor from
 * `tickpool/broker`, `tickpool/tasks`) is PostgreSQL code, and only `src/postgres/` imports `pg`. Checked on the
 * import graph of the sources and, for the root entry, in a fresh process.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { importGraph, reachable } from '../architecture/import-graph.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

test('no module reachable from tickpool, tickpool/broker or tickpool/tasks is in src/postgres/', () => {
  const { graph } = importGraph(root, ['src']);
  const seen = reachable(graph, ['src/index.ts', 'src/broker/index.ts', 'src/tasks/index.ts']);
  assert.ok(seen.has('src/engine/engine.ts'), 'the graph was read');
  assert.deepEqual([...seen].filter((m) => m.startsWith('src/postgres/')), []);
});

test('only src/postgres/ imports pg', () => {
  const importers: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts') && /from 'pg'|import\('pg'\)/.test(readFileSync(path, 'utf8'))) importers.push(relative(root, path));
    }
  };
  walk(join(root, 'src'));
  assert.ok(importers.length > 0 && importers.every((p) => p.startsWith('src/postgres/')), importers.join(', '));
});

test('importing tickpool and creating an engine loads no pg module (a fresh process)', () => {
  const index = new URL('../../src/index.js', import.meta.url).href;
  // A loader hook would be heavier: the process lists the pg files it can see in its module registry instead.
  const script = `
    const { createEngine } = await import(${JSON.stringify(index)});
    const engine = createEngine({ threads: 1 });
    await engine.stop();
    const { createRequire } = await import('node:module');
    const loaded = Object.keys(createRequire(import.meta.url).cache).filter((p) => p.includes('/node_modules/pg'));
    process.stdout.write(JSON.stringify(loaded));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.deepEqual(JSON.parse(out), []);
});
