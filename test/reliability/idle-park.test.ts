/**
 * The idle strategy (`idleSpinUs`): a thread out of work polls the board before it sleeps. It must deliver exactly
 * what the default mode delivers, leave nothing a scheduler left behind unrun, and stop polling as soon as the
 * engine stops, not when its polling window ends.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { acks, evaluation, fixture, started } from './helpers.js';

/** The longest polling window the option allows: a stop that waited for it would take a second. */
const SPIN_US = 1_000_000;

test('idleSpinUs: evaluations are served as in the default mode, one at a time and in bursts', { timeout: 30_000 }, async () => {
  for (const idleSpinUs of [0, 200, SPIN_US]) {
    const engine = await started({ threads: 2, workers: 16, idleSpinUs, schedulers: { noop: fixture('noop'), gated: fixture('gated') } });
    // One at a time: each arrives while the threads poll (or sleep, in the default mode).
    for (let i = 0; i < 20; i++) {
      const done = acks(engine, 1);
      engine.enqueue(evaluation(`one${i}`, 'noop'));
      assert.deepEqual(await done, [`one${i}`]);
    }
    // A burst, and a long item that a polling thread must not hold up the others for.
    const gate = newGate();
    const burst = acks(engine, 200, (id) => id.startsWith('b'));
    engine.enqueue(evaluation('long', 'gated', { gate }));
    await waitFor(gate, Gate.STARTED, 1);
    for (let i = 0; i < 200; i++) engine.enqueue(evaluation(`b${i}`, 'noop'));
    assert.equal((await burst).length, 200, `idleSpinUs ${idleSpinUs}: the burst while one thread is held`);
    const long = acks(engine, 1);
    set(gate, Gate.RELEASE, 1);
    assert.deepEqual(await long, ['long']);
    await engine.stop();
  }
});

test('idleSpinUs: what a scheduler leaves behind (a timer, a promise job) still runs on a polling thread', { timeout: 30_000 }, async () => {
  const engine = await started({ threads: 1, workers: 1, idleSpinUs: SPIN_US, schedulers: { leftover: fixture('leftover-timer'), noop: fixture('noop') } });
  const gate = newGate();
  const done = acks(engine, 1);
  engine.enqueue(evaluation('leaves-a-timer', 'leftover', { gate }));
  await done;
  // The thread is polling now, for up to a second: the timer the scheduler armed fires once it goes back to sleep.
  await waitFor(gate, Gate.RELEASE, 1);
  await engine.stop();
});

test('idleSpinUs: stop() ends the polling at once instead of waiting out the window', { timeout: 30_000 }, async () => {
  const engine = await started({ threads: 2, workers: 2, idleSpinUs: SPIN_US, schedulers: { noop: fixture('noop') } });
  const done = acks(engine, 2);
  engine.enqueue(evaluation('a', 'noop'));
  engine.enqueue(evaluation('b', 'noop'));
  await done;
  // Both threads are now polling for up to a second. Stopping reaches them through the board, not their event loop.
  const stopAt = performance.now();
  await engine.stop();
  const ms = performance.now() - stopAt;
  assert.ok(ms < SPIN_US / 1000 / 2, `stop() took ${Math.round(ms)} ms, at least half the ${SPIN_US / 1000} ms polling window`);
});
