/**
 * The shape of the import graph of `src/` and `bench/`: no cycles (runtime or type-only: a type in the wrong file
 * shows as one), and code that runs on pool threads imports only what is meant to cross: `src/thread/**` may import
 * `protocol/`, `slots/`, the replica (`state/replica.ts` and what it needs), `errors` and `clock`, and what they
 * import; `src/protocol/**` imports no main-thread code.
 */
import assert from 'node:assert/strict';
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
  assert.ok(graph.has('src/thread/entry.ts') && graph.has('src/engine.ts') && graph.has('bench/run.ts'));
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
