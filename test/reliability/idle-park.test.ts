/**
 * The idle hand-off: a thread out of work parks on its park word and main wakes it for the next item. Items that come
 * one at a time (each to a parked pool) and in a burst while a thread is held are all served, and polling instead of
 * parking is not an option: on 2 cores it was never 2× faster than Piscina's idle hand-off, so the engine has none.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createEngine, InvalidOptionError } from '../../src/index.js';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { acks, evaluation, fixture, started } from './helpers.js';

test('a parked pool serves evaluations one at a time and in bursts while a thread is held', { timeout: 30_000 }, async () => {
  const engine = await started({ threads: 2, workers: 16, schedulers: { noop: fixture('noop'), gated: fixture('gated') } });
  // One at a time: each arrives once both threads have parked.
  for (let i = 0; i < 20; i++) {
    const done = acks(engine, 1);
    engine.enqueue(evaluation(`one${i}`, 'noop'));
    assert.deepEqual(await done, [`one${i}`]);
  }
  // A burst, and a long item the other thread must not wait for.
  const gate = newGate();
  const burst = acks(engine, 200, (id) => id.startsWith('b'));
  engine.enqueue(evaluation('long', 'gated', { gate }));
  await waitFor(gate, Gate.STARTED, 1);
  for (let i = 0; i < 200; i++) engine.enqueue(evaluation(`b${i}`, 'noop'));
  assert.equal((await burst).length, 200, 'the burst while one thread is held');
  const long = acks(engine, 1);
  set(gate, Gate.RELEASE, 1);
  assert.deepEqual(await long, ['long']);
  await engine.stop();
});

test('idleSpinUs is not an option: a typed error names it and the known ones', () => {
  assert.throws(
    () => createEngine({ idleSpinUs: 200 } as never),
    (error: unknown) => error instanceof InvalidOptionError && error.code === 'ERR_INVALID_OPTION' && error.message.includes('idleSpinUs') && error.message.includes('idleTimeoutMs'),
  );
});
