/**
 * A task's payload crosses to a pool thread by structured clone on every run. One that cannot is rejected when the
 * task is validated (`InvalidTaskError` naming `payload`), as `engine.enqueue` rejects such an evaluation payload,
 * instead of being accepted and failing every run with a generic error.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { InvalidTaskError } from '../../src/errors.js';
import { MemoryDesiredState } from '../../src/tasks/memory-desired-state.js';
import { validateTask } from '../../src/tasks/task.js';
import { engineTasks } from './engine-tasks-harness.js';
import { harness } from './fixtures.js';

const base = { id: 't', every: '10s', maxConcurrency: 1, handler: 'h' };

class WithPrivate {
  #secret = 1;
  get secret(): number {
    return this.#secret;
  }
}

const uncloneable: ReadonlyArray<[string, unknown]> = [
  ['a function', () => 1],
  ['a symbol', Symbol('s')],
  ['an object holding a function', { f: () => 1 }],
  ['a function deep inside a Map', new Map([['k', [{ deep: { f: () => 1 } }]]])],
  ['a WeakMap', new WeakMap()],
  ['a Promise', Promise.resolve(1)],
  ['an array holding a symbol', [1, 2, Symbol('x')]],
];

function isPayloadError(error: unknown): boolean {
  assert.ok(error instanceof InvalidTaskError, `expected InvalidTaskError, got ${String(error)}`);
  assert.equal(error.code, 'ERR_INVALID_TASK');
  assert.equal(error.details?.['name'], 'payload');
  assert.match(error.message, /^Expected `payload` to be a structured-cloneable value, got /);
  return true;
}

test('validateTask rejects a payload that cannot be structured-cloned', () => {
  for (const [what, payload] of uncloneable) {
    assert.throws(() => validateTask({ ...base, payload }), isPayloadError, what);
  }
});

test('putTask, claimTask and engine.tasks.add reject it before anything is stored or claimed', () => {
  const payload = { f: () => 1 };
  const store = new MemoryDesiredState({ clock: new ManualClock(0) });
  assert.throws(() => store.putTask({ ...base, payload }), isPayloadError);
  assert.equal(store.size, 0);

  const h = harness(0);
  assert.throws(() => h.scheduler.claimTask({ ...base, payload }), isPayloadError);
  assert.equal(h.scheduler.stats().claimedTasks, 0);

  const e = engineTasks();
  assert.throws(() => e.tasks.add({ ...base, payload }), isPayloadError);
  assert.equal(e.tasks.desiredState.size, 0);
  assert.equal(e.tasks.stats().claimedTasks, 0);
  assert.equal(e.slots.allocated, 0);
});

test('payloads that survive structured clone are accepted and kept as given', () => {
  const shared = new Int32Array(new SharedArrayBuffer(8));
  const big = { rows: Array.from({ length: 500 }, (_, i) => ({ i, name: `row ${i}` })) };
  const deep = { a: { b: { c: { d: { e: { f: { g: { h: { i: { j: 'deep' } } } } } } } } } };
  const cloneable: ReadonlyArray<[string, unknown]> = [
    ['undefined', undefined],
    ['null', null],
    ['a string', 'x'],
    ['a bigint', 10n],
    ['plain data', { n: 1, s: 'a', list: [1, 'b', null, true] }],
    ['a view over shared memory', { gate: shared }],
    ['a Map and a Set', { m: new Map([[1, 'a']]), s: new Set([1]) }],
    ['a Date and a RegExp', [new Date(0), /x/g]],
    ['an ArrayBuffer', new Uint8Array([1, 2, 3])],
    ['an Error', new Error('boom')],
    ['more than the quick walk vouches for', big],
    ['deeper than the quick walk goes', deep],
    ['a class instance (cloned as a plain object)', new WithPrivate()],
  ];
  for (const [what, payload] of cloneable) {
    const task = validateTask({ ...base, payload });
    assert.equal(task.payload, payload, what);
  }
});
