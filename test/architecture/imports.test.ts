/**
 * The shape of the import graph of `src/` and `bench/`: no cycles (runtime or type-only: a type in the wrong file
 * shows as one), and code that runs on pool threads imports only what is meant to cross: `src/thread/**` may import
 * `protocol/`, `slots/`, the replica (`state/replica.ts` and what it needs), `errors` and `clock`, and what they
 * import; `src/protocol/**` imports no main-thread code. `src/` is built in floors, and no module imports from a
 * floor above its own; `src/backend/` holds only the interfaces the backends implement.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { fenceBreaks, importCycles, importGraph, type ImportGraph } from './import-graph.js';

// Compiled tests live in <outDir>/test/architecture/: the repository root (with the sources) is three levels up.
const root = fileURLToPath(new URL('../../../', import.meta.url));
const { graph, unresolved } = importGraph(root, ['src', 'bench']);

const isThread = (m: string): boolean => m.startsWith('src/thread/');
const isProtocol = (m: string): boolean => m.startsWith('src/protocol/');
const THREAD_ALLOWED = (m: string): boolean =>
  isProtocol(m) || m.startsWith('src/slots/') || m === 'src/state/replica.ts' || m === 'src/errors.ts' || m === 'src/clock.ts';
const PROTOCOL_ALLOWED = (m: string): boolean =>
  m.startsWith('src/slots/') || m === 'src/state/types.ts' || m === 'src/errors.ts' || m === 'src/clock.ts';

test('the graph is read: every relative import resolves, and the thread entry and the engine are in it', () => {
  assert.deepEqual(unresolved, []);
  assert.ok(graph.has('src/thread/entry.ts') && graph.has('src/engine/engine.ts') && graph.has('bench/run.ts'));
  assert.deepEqual(graph.get('src/thread/piscina-entry.cts'), ['src/thread/entry.ts', 'src/thread/entry.ts'], 'the CommonJS file Piscina loads, type and value import');
  assert.ok((graph.get('src/thread/thread-loop.ts') ?? []).includes('src/state/replica.ts'), 'type and value imports both count');
});

test('src/ and bench/ have no import cycle, type-only imports included', () => {
  assert.deepEqual(importCycles(graph), []);
});

test('thread code imports only protocol/, slots/, the replica, errors and clock; protocol/ imports no main-thread code', () => {
  assert.deepEqual(fenceBreaks(graph, isThread, THREAD_ALLOWED), []);
  assert.deepEqual(fenceBreaks(graph, isProtocol, PROTOCOL_ALLOWED), []);
});

/**
 * The floors of `src/`, lowest first (a path ending in `/` is a folder): what everything uses; the parts and the
 * interfaces between them; the backends that implement those interfaces; the engine that wires it all; the entry.
 */
const FLOORS: readonly (readonly string[])[] = [
  ['src/errors.ts', 'src/clock.ts', 'src/option-checks.ts', 'src/payload-size.ts', 'src/storable-key.ts', 'src/backoff.ts', 'src/slots/'],
  ['src/events.ts', 'src/observability/', 'src/protocol/', 'src/backend/', 'src/broker/', 'src/state/', 'src/tasks/', 'src/pool/', 'src/thread/'],
  ['src/memory/', 'src/postgres/'],
  ['src/engine/'],
  ['src/index.ts', 'src/admin/', 'src/dashboard/'],
];
const floorOf = (m: string): number => FLOORS.findIndex((floor) => floor.some((p) => (p.endsWith('/') ? m.startsWith(p) : m === p)));

test('every module of src/ is on a floor, and none imports from a floor above its own', () => {
  const srcModules = [...graph.keys()].filter((m) => m.startsWith('src/'));
  assert.deepEqual(srcModules.filter((m) => floorOf(m) < 0), []);
  const upward = srcModules.flatMap((m) => (graph.get(m) ?? []).filter((to) => floorOf(to) > floorOf(m)).map((to) => `${m} → ${to}`));
  assert.deepEqual(upward, []);
});

test('src/backend/ holds only interfaces: type-only imports and exports, no code', () => {
  const dir = new URL('../../../src/backend/', import.meta.url);
  const code = readdirSync(dir).flatMap((file) =>
    readFileSync(new URL(file, dir), 'utf8')
      .split('\n')
      .filter((line) => /^(import (?!type )|export (?!(interface|type) ))/.test(line))
      .map((line) => `${file}: ${line}`),
  );
  assert.deepEqual(code, []);
});

const fixture = (edges: Record<string, string[]>): ImportGraph => new Map(Object.entries(edges));

test('importCycles finds two-module, longer and self cycles, and nothing in a DAG', () => {
  assert.deepEqual(importCycles(fixture({ a: ['b'], b: ['c'], c: [] })), []);
  assert.deepEqual(importCycles(fixture({ a: ['b'], b: ['a'], c: ['c'], d: ['e'], e: ['f'], f: ['d', 'a'] })), [['a', 'b'], ['c'], ['d', 'e', 'f']]);
});

test('fenceBreaks allows the roots and what they import, and names each import past them', () => {
  const g = fixture({
    't/a': ['t/b', 'p/m', 'r'],
    't/b': ['v', 'main'],
    'p/m': [],
    r: ['v'],
    v: [],
    main: ['p/m'],
  });
  const inside = (m: string): boolean => m.startsWith('t/');
  assert.deepEqual(fenceBreaks(g, inside, (m) => m.startsWith('p/') || m === 'r'), ['t/b → main']);
  assert.deepEqual(fenceBreaks(g, inside, (m) => m.startsWith('p/') || m === 'r' || m === 'main'), []);
});
