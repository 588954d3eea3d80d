/**
 * The dispatcher and the thread loop together, on real threads: when results travel, how cancel reaches an item
 * waiting for an index, what a hostile throw or an uncloneable item costs, and how the pool shrinks when idle.
 * Main's clock is manual; the threads are driven through shared-memory gates; nothing sleeps.
 */
import assert from 'node:assert/strict';
import { BroadcastChannel } from 'node:worker_threads';
import { test } from 'node:test';
import { InvalidEvaluationError, InvalidTaskError } from '../../src/errors.js';
import { ThreadPhase } from '../../src/slots/slot-layout.js';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { HOLD_BOOT_CHANNEL } from '../fixtures/held-boot.js';
import { POOL_DEFAULTS, countStops, poolHarness, until, within } from './helpers.js';


test('results of short items are sent before a long item starts, not after it', async (t) => {
  const h = poolHarness({ minThreads: 1, maxThreads: 1 });
  const { pool } = h;
  await pool.start();
  t.after(() => pool.stop({ force: true }));
  const blocker = newGate();
  const long = newGate();
  t.after(() => set(long, Gate.RELEASE, 1));
  const first = h.evaluate('gated', { gate: blocker }).outcome;
  await waitFor(blocker, Gate.STARTED, 1);
  // Waiting for the one thread, in this order: two quick items, then a long one.
  const a = h.evaluate('noop').outcome;
  const b = h.evaluate('noop').outcome;
  const c = h.evaluate('gated', { gate: long }).outcome;
  assert.equal(pool.stats().queued, 3, 'all three wait for the thread');
  set(blocker, Gate.RELEASE, 1);
  assert.equal((await first).status, 'ok');
  const [ra, rb] = await within(Promise.all([a, b]), 'the two quick results while the long item runs');
  assert.equal(ra.status, 'ok');
  assert.equal(rb.status, 'ok');
  await waitFor(long, Gate.STARTED, 1);
  assert.equal(pool.stats().inflight, 1, 'only the long item is still out');
  set(long, Gate.RELEASE, 1);
  assert.equal((await c).status, 'ok');
});

test('outcomes of short items share a wake-up of main; an item not predicted short rings for the ones before it', async (t) => {
  const h = poolHarness({ minThreads: 1, maxThreads: 1 });
  const { pool } = h;
  await pool.start();
  t.after(() => pool.stop({ force: true }));
  const work = { ms: 0.2 };
  // The pool learns what the item costs (a kind never measured is predicted long).
  assert.equal((await h.evaluate('spin', work).outcome).status, 'ok');
  const blocker = newGate();
  const first = h.evaluate('gated', { gate: blocker }).outcome;
  await waitFor(blocker, Gate.STARTED, 1);
  // A hundred items of 0.2 ms queue behind the blocker; released, the thread runs them back to back, each one longer
  // than main takes to read an outcome.
  const quick = Array.from({ length: 100 }, () => h.evaluate('spin', work).outcome);
  const before = pool.stats().doorbells;
  set(blocker, Gate.RELEASE, 1);
  assert.equal((await first).status, 'ok');
  for (const outcome of await Promise.all(quick)) assert.equal(outcome.status, 'ok');
  const rings = pool.stats().doorbells - before;
  // A ring per outcome would be about 100; with outcomes waiting up to RING_HOLD_MS for company, about a fifth.
  assert.ok(rings >= 1 && rings <= 50, `101 outcomes woke main ${rings} times`);
});

test('the pool numbers its own record of an item: frozen items run, and nothing is written into them', async (t) => {
  const h = poolHarness({ minThreads: 1, maxThreads: 1 });
  const { pool, slots } = h;
  await pool.start();
  t.after(() => pool.stop({ force: true }));
  const runOnce = async (): Promise<string> => {
    const slot = slots.allocate(1);
    const generation = slots.claim(slot);
    const item = Object.freeze({ kind: 'run' as const, slot, generation, attempt: 1, run: Object.freeze({ taskId: 't', runId: 'r', scheduledFor: 0, runAt: 0 }), handler: 'noop', payload: null });
    const outcome = await pool.dispatch(item);
    slots.finish(slot, generation);
    assert.deepEqual(Object.keys(item).sort(), ['attempt', 'generation', 'handler', 'kind', 'payload', 'run', 'slot'], 'no seq written');
    return outcome.status;
  };
  assert.deepEqual(await Promise.all([runOnce(), runOnce()]), ['ok', 'ok']);
});

test('a canceled result is sent at once, also after a run of tiny items and ahead of a long one', async (t) => {
  const h = poolHarness({ minThreads: 1, maxThreads: 1 });
  const { pool, clock } = h;
  await pool.start();
  t.after(() => pool.stop({ force: true }));
  const blocker = newGate();
  const coop = newGate();
  const long = newGate();
  t.after(() => set(long, Gate.RELEASE, 1));
  const first = h.evaluate('gated', { gate: blocker }).outcome;
  await waitFor(blocker, Gate.STARTED, 1);
  // Waiting for the one thread: many tiny items, an item canceled while it runs (it honours cancel), one canceled
  // before it starts (it settles at once), and a long item that must not hold their results.
  const tiny = Array.from({ length: 300 }, () => h.evaluate('noop').outcome);
  const honours = h.evaluate('gated', { gate: coop });
  const skipped = h.evaluate('gated', { gate: newGate() });
  const c = h.evaluate('gated', { gate: long }).outcome;
  assert.equal(pool.cancel(skipped.slot, skipped.generation), true);
  assert.equal((await within(skipped.outcome, 'the item canceled before it started to settle')).status, 'canceled');
  set(blocker, Gate.RELEASE, 1);
  await first;
  await waitFor(coop, Gate.STARTED, 1);
  assert.equal(pool.cancel(honours.slot, honours.generation), true);
  assert.equal((await within(honours.outcome, 'the result of the item canceled while it ran')).status, 'canceled');
  for (const outcome of await Promise.all(tiny)) assert.equal(outcome.status, 'ok');
  assert.equal((await within(skipped.outcome, 'the result of the item canceled before it started')).status, 'canceled');
  await waitFor(long, Gate.STARTED, 1);
  // Their results are in, so their slots moved on: the grace periods end without terminating the thread under `c`.
  clock.advance(POOL_DEFAULTS.cancelGraceMs);
  set(long, Gate.RELEASE, 1);
  assert.equal((await c).status, 'ok');
  assert.equal(pool.stats().threadExits, 0);
});

test('cancel ends a wait for the replica index with a canceled outcome, not a terminated thread', async (t) => {
  const h = poolHarness({ minThreads: 1, maxThreads: 1 });
  const { pool, slots, exits } = h;
  await pool.start();
  t.after(() => pool.stop({ force: true }));
  // The store is at index 0: the thread waits for index 5 before it runs the scheduler.
  const waiting = h.evaluate('noop', undefined, { minIndex: 5 });
  await until(() => slots.phase(waiting.slot) === ThreadPhase.WAITING_FOR_INDEX, 'the thread to wait for the index');
  assert.equal(pool.cancel(waiting.slot, waiting.generation), true);
  // The grace timer is on the manual clock and never fires here: only the thread can end this item.
  assert.equal((await within(waiting.outcome, 'a canceled outcome')).status, 'canceled');
  assert.deepEqual(exits, []);
  assert.equal((await h.evaluate('noop').outcome).status, 'ok', 'the thread still serves');
});

test('a thrown value whose inspection throws fails its item, not the thread', async (t) => {
  const h = poolHarness({ minThreads: 1, maxThreads: 1 });
  const { pool, exits } = h;
  await pool.start();
  t.after(() => pool.stop({ force: true }));
  for (const kind of ['retryable-getter', 'code-getter', 'proxy']) {
    const outcome = await h.evaluate('hostile', { kind }).outcome;
    assert.equal(outcome.status, 'error', kind);
    if (outcome.status !== 'error') continue;
    assert.equal(outcome.retryable, false, kind);
    assert.equal(outcome.error.code, 'ERR_USER_CODE', kind);
    assert.match(outcome.error.message, /reading what it threw threw: .*exploded/, kind);
  }
  assert.deepEqual(exits, [], 'no thread died');
  assert.equal((await h.evaluate('noop').outcome).status, 'ok');
});

test('an item that cannot be sent to a thread fails with the typed error of the input it came from', async (t) => {
  const h = poolHarness({ minThreads: 1, maxThreads: 1 });
  await h.pool.start();
  t.after(() => h.pool.stop({ force: true }));
  const evaluation = await h.evaluate('noop', { callback: () => 1 }).outcome;
  assert.equal(evaluation.status, 'error');
  if (evaluation.status === 'error') {
    assert.ok(evaluation.error instanceof InvalidEvaluationError);
    assert.equal(evaluation.error.code, 'ERR_INVALID_EVALUATION');
    assert.equal(evaluation.retryable, false);
    assert.match(evaluation.error.message, /Expected `evaluation "e0"` to be a structured-cloneable value/);
    assert.ok(evaluation.error.cause instanceof Error, 'the clone error is the cause');
  }
  const run = await h.run('noop', { callback: () => 1 }).outcome;
  assert.equal(run.status, 'error');
  if (run.status === 'error') {
    assert.ok(run.error instanceof InvalidTaskError);
    assert.equal(run.error.code, 'ERR_INVALID_TASK');
    assert.equal(run.retryable, false);
  }
  assert.equal((await h.evaluate('noop').outcome).status, 'ok', 'the pool still serves');
});

test('idle threads shrink the pool down to minThreads, never below', async (t) => {
  const h = poolHarness({ minThreads: 1, maxThreads: 3 });
  const { pool, clock } = h;
  await pool.start();
  t.after(() => pool.stop({ force: true }));
  const gates = [newGate(), newGate(), newGate()];
  t.after(() => gates.forEach((g) => set(g, Gate.RELEASE, 1)));
  // One item per thread at most: three blocked items grow the pool to three threads.
  const items = gates.map((gate) => h.evaluate('gated', { gate }).outcome);
  for (const gate of gates) await waitFor(gate, Gate.STARTED, 1);
  assert.equal(pool.threadCount, 3);
  for (const gate of gates) set(gate, Gate.RELEASE, 1);
  for (const item of items) assert.equal((await item).status, 'ok');
  // All three are parked: the pool's idle check sees each one parked twice in a row, idleTimeoutMs apart, with
  // nothing taken in between, and stops all but minThreads of them.
  await until(() => pool.stats().perThread.every((p) => p.parked), 'all three threads to park');
  const stops = countStops();
  t.after(() => stops.restore());
  clock.advance(POOL_DEFAULTS.idleTimeoutMs);
  clock.advance(POOL_DEFAULTS.idleTimeoutMs);
  assert.equal(stops.count, 2, 'two threads asked to stop, the last one kept');
  await until(() => pool.threadCount === 1, 'the stopped threads to end');
  assert.equal((await h.evaluate('noop').outcome).status, 'ok');
  assert.equal(pool.threadCount, 1);
});

test('commits do not wake idle threads nor keep them alive: the change log waits until an item needs it', async (t) => {
  const h = poolHarness({ minThreads: 1, maxThreads: 2 });
  const { pool, clock, state } = h;
  await pool.start();
  t.after(() => pool.stop({ force: true }));
  const gates = [newGate(), newGate()];
  t.after(() => gates.forEach((g) => set(g, Gate.RELEASE, 1)));
  const items = gates.map((gate) => h.evaluate('gated', { gate }).outcome);
  for (const gate of gates) await waitFor(gate, Gate.STARTED, 1);
  assert.equal(pool.threadCount, 2);
  for (const gate of gates) set(gate, Gate.RELEASE, 1);
  for (const item of items) assert.equal((await item).status, 'ok');
  await until(() => pool.stats().perThread.every((p) => p.parked), 'both threads to park');
  // A commit while both are parked: it goes into the change log, and no thread is woken for it.
  state.write((txn) => txn.put('t', 'k', 1));
  assert.ok(pool.stats().perThread.every((p) => p.parked), 'still parked');
  const stops = countStops();
  t.after(() => stops.restore());
  clock.advance(POOL_DEFAULTS.idleTimeoutMs);
  clock.advance(POOL_DEFAULTS.idleTimeoutMs);
  assert.equal(stops.count, 1, 'the thread above minThreads is asked to stop');
  await until(() => pool.threadCount === 1, 'the pool to shrink to minThreads');
  // The thread that stays applies the commit before the next item it runs.
  assert.equal((await h.evaluate('noop', undefined, { minIndex: 1 }).outcome).status, 'ok');
  assert.equal(pool.stats().perThread[0]?.appliedIndex, 1);
});

test('threads that grew the pool but found no work go idle too', async (t) => {
  const h = poolHarness({ minThreads: 1, maxThreads: 3 });
  const { pool, clock } = h;
  await pool.start();
  t.after(() => pool.stop({ force: true }));
  // Threads made from now on hold their boot until the test says go.
  process.env['TICKPOOL_TEST_HOLD_BOOT'] = '1';
  const channel = new BroadcastChannel(HOLD_BOOT_CHANNEL);
  t.after(() => {
    delete process.env['TICKPOOL_TEST_HOLD_BOOT'];
    channel.close();
  });
  let holding = 0;
  let onHolding: (() => void) | undefined;
  channel.onmessage = (event) => {
    if ((event as MessageEvent).data === 'holding') holding++;
    onHolding?.();
  };
  const held = (count: number): Promise<void> =>
    within(
      new Promise<void>((resolve) => {
        onHolding = () => {
          if (holding >= count) resolve();
        };
        onHolding();
      }),
      `${count} threads holding their boot`,
    );
  const blocker = newGate();
  t.after(() => set(blocker, Gate.RELEASE, 1));
  const first = h.evaluate('gated', { gate: blocker }).outcome;
  await waitFor(blocker, Gate.STARTED, 1);
  // Each item waiting behind the blocked thread grows the pool by one thread, which holds its boot.
  const second = h.evaluate('noop').outcome;
  await held(1);
  const third = h.evaluate('noop').outcome;
  await held(2);
  assert.equal(pool.threadCount, 3);
  // The backlog drains on the first thread before the new ones are ready.
  set(blocker, Gate.RELEASE, 1);
  for (const item of [first, second, third]) assert.equal((await item).status, 'ok');
  channel.postMessage('go');
  // Ready as main sees it (the idle check looks only at threads whose ready message it read), and parked.
  await until(() => pool.stats().perThread.length === 3 && pool.stats().perThread.every((p) => p.ready && p.parked), 'the late threads to be ready and park');
  const stops = countStops();
  t.after(() => stops.restore());
  clock.advance(POOL_DEFAULTS.idleTimeoutMs);
  clock.advance(POOL_DEFAULTS.idleTimeoutMs);
  assert.equal(stops.count, 2);
  await until(() => pool.threadCount === 1, 'the pool to shrink back to minThreads');
});

test('dispatchWith: outcomes are told after the pool is done with their message, never inside the call; one that throws stops no other; one told may dispatch again', async (t) => {
  const h = poolHarness({ minThreads: 1, maxThreads: 1 });
  const { pool, slots } = h;
  await pool.start();
  t.after(() => pool.stop({ force: true }));
  const item = (): { kind: 'run'; slot: number; generation: number; attempt: number; run: { taskId: string; runId: string; scheduledFor: number; runAt: number }; handler: string; payload: null } => {
    const slot = slots.allocate(1);
    return { kind: 'run', slot, generation: slots.claim(slot), attempt: 1, run: { taskId: 't', runId: 'r', scheduledFor: 0, runAt: 0 }, handler: 'noop', payload: null };
  };
  const told: string[] = [];
  let settledWhenTold = 0;
  let last!: () => void;
  const allTold = new Promise<void>((resolve) => (last = resolve));
  const blocker = newGate();
  const first = h.evaluate('gated', { gate: blocker }).outcome;
  await waitFor(blocker, Gate.STARTED, 1);
  // Waiting behind the blocker: their results come back in one drain.
  const a = item();
  const b = item();
  pool.dispatchWith(a, undefined, (outcome) => {
    slots.finish(a.slot, a.generation);
    told.push(`a ${outcome.status}`);
    settledWhenTold = pool.stats().settled;
    throw new Error('a dispatcher that throws');
  });
  pool.dispatchWith(b, undefined, (outcome) => {
    slots.finish(b.slot, b.generation);
    told.push(`b ${outcome.status}`);
    // From inside an outcome: the pool is consistent, and the new item runs.
    const c = item();
    pool.dispatchWith(c, undefined, (again) => {
      slots.finish(c.slot, c.generation);
      told.push(`c ${again.status}`);
      last();
    });
    told.push('c dispatched');
  });
  set(blocker, Gate.RELEASE, 1);
  await first;
  await within(allTold, 'every outcome told');
  assert.deepEqual(told, ['a ok', 'b ok', 'c dispatched', 'c ok']);
  assert.ok(settledWhenTold >= 2, `a was told after the pool settled it (the blocker and a at least: ${settledWhenTold})`);
  await pool.stop();
  let late = false;
  pool.dispatchWith(item(), undefined, () => (late = true));
  assert.equal(late, false, 'a stopped pool answers, but not inside the call');
  await new Promise<void>((resolve) => queueMicrotask(resolve));
  assert.equal(late, true);
});
