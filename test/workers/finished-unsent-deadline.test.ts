/**
 * On real threads: a delivery whose scheduler has returned, its result still in the outbox of a thread that a long
 * item now blocks, is not nack-timed out. Its thread coalesces results of tiny items, so the result of a tiny
 * evaluation A waits there while the long evaluation B after it runs; A's slot reads RUNNING with phase FINISHED.
 *
 * How the test puts A's result there, with gates and a manual broker clock (nothing sleeps):
 * 1. teach the pool that B's kind is cheap (so B is sent behind A rather than held on main) and run tiny items until
 *    the thread coalesces their results;
 * 2. block the thread between items (`blocks-thread-after`), then enqueue a few tiny evaluations, A and B: they
 *    all wait on its port;
 * 3. unblock it: it runs the tiny ones and A, holding their results (the tiny ones in front of A make its estimate
 *    tiny whatever the blocker's own run cost), pulls B and starts it, and B holds the thread (`STARTED`);
 * 4. move the broker's clock on by two nack timeouts (B heartbeats in lock-step, so it shows progress): A's first
 *    deadline finds it started, the second one a nack timeout after that. A must not be timed out.
 * Whether the thread held A's result is its own call (a tiny item on a loaded machine may not look tiny): an attempt
 * in which A was acked before step 4 proves nothing and is made again, with fresh gates and a fresh kind for B.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { ManualClock } from '../../src/clock.js';
import { createEngine } from '../../src/engine.js';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { until } from '../pool/helpers.js';

const fixture = (name: string): URL => new URL(`../fixtures/${name}.js`, import.meta.url);
const NACK_TIMEOUT_MS = 200;
const ATTEMPTS = 5;
/** Tiny items run before each attempt, so that the thread's running estimate calls its items tiny. */
const WARM_UP = 40;
/** Tiny evaluations sent to the blocked thread in front of A. */
const IN_FRONT = 6;

test('a delivery whose result waits in a blocked thread\'s outbox is not nack-timed out', { timeout: 120_000 }, async (t) => {
  const clock = new ManualClock(0);
  // B's kind, one per attempt: a kind the pool has seen run only cheaply, so that it sends B behind A.
  const longKinds = Object.fromEntries(Array.from({ length: ATTEMPTS }, (_, i) => [`long${i}`, fixture('lockstep-heartbeat')]));
  const engine = createEngine({
    clock,
    threads: 1,
    // One per evaluation sent to the blocked thread: the tiny ones, A and B.
    workers: IN_FRONT + 2,
    // The thread goes back to its event loop when out of work, so a blocker scheduled there runs before new work.
    idleSpinUs: 0,
    logger: pino({ level: 'silent' }),
    cancelGraceMs: 600_000,
    schedulers: { noop: fixture('noop'), blocker: fixture('blocks-thread-after'), ...longKinds },
    broker: { nackTimeoutMs: NACK_TIMEOUT_MS, deliveryLimit: 3, initialNackDelayMs: 0, subsequentNackDelayMs: 0 },
  });
  const gates: Int32Array[] = [];
  const gate = (): Int32Array => {
    const g = newGate();
    gates.push(g);
    return g;
  };
  t.after(async () => {
    for (const g of gates) set(g, Gate.RELEASE, 1);
    await engine.stop({ graceMs: 100 });
  });
  const timeouts: string[] = [];
  const deliveries = new Map<string, number>();
  engine.broker.events.on('broker:nack', ({ evaluation, timedOut }) => timedOut && timeouts.push(evaluation.id));
  engine.broker.events.on('broker:dequeue', ({ evaluation }) => deliveries.set(evaluation.id, (deliveries.get(evaluation.id) ?? 0) + 1));
  await engine.start();

  let exercised: string | undefined;
  for (let attempt = 0; attempt < ATTEMPTS && exercised === undefined; attempt++) {
    const kind = `long${attempt}`;
    const taught = gate();
    set(taught, Gate.RELEASE, 1);
    await engine.run({ id: `teach${attempt}`, type: kind, payload: { gate: taught } });
    // The blocker too, released: its first runs are slow (code not yet optimized), which would not look tiny.
    for (let i = 0; i < 3; i++) await engine.run({ id: `blocker-warm${attempt}-${i}`, type: 'blocker', payload: { gate: taught } });
    for (let i = 0; i < WARM_UP; i++) await engine.run({ id: `warm${attempt}-${i}`, type: 'noop' });

    const blocker = gate();
    await engine.run({ id: `blocker${attempt}`, type: 'blocker', payload: { gate: blocker } });
    await waitFor(blocker, Gate.STARTED, 1);
    const a = `a${attempt}`;
    let aAcked = false;
    const off = engine.broker.events.on('broker:ack', ({ evaluation }) => {
      if (evaluation.id === a) aAcked = true;
    });
    const b = gate();
    const inFront = Array.from({ length: IN_FRONT }, (_, i) => engine.run({ id: `front${attempt}-${i}`, type: 'noop' }));
    const aDone = engine.run({ id: a, type: 'noop' });
    const bDone = engine.run({ id: `b${attempt}`, type: kind, payload: { gate: b } });
    await until(() => {
      const { queued, inflight } = engine.stats().pool;
      return queued === 0 && inflight === IN_FRONT + 2;
    }, 'the tiny evaluations, A and B to be sent to the blocked thread');

    set(blocker, Gate.RELEASE, 1);
    await waitFor(b, Gate.STARTED, 1);
    if (!aAcked) {
      exercised = a;
      // Everything sent to the thread was dequeued at the clock's present time: one nack timeout on, the deadlines
      // are due and the worker counts A's from its start; one more, and A would be late had it shown no progress.
      for (let tick = 1; tick <= 2; tick++) {
        set(b, Gate.TICK, tick);
        await waitFor(b, Gate.BEAT, tick);
        clock.advance(NACK_TIMEOUT_MS);
      }
      assert.deepEqual(timeouts, [], 'no finished delivery was timed out while its result waited behind B');
    }
    set(b, Gate.RELEASE, 1);
    await Promise.all([...inFront, aDone, bDone]);
    off();
  }
  assert.ok(exercised !== undefined, `in ${ATTEMPTS} attempts the thread never held A's result behind B`);
  assert.equal(deliveries.get(exercised), 1, 'delivered once');
  assert.deepEqual(timeouts, []);
});
