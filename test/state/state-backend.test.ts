/**
 * What `StateStore` and `PlanApplier` add as the in-memory `StateBackend` and `PlanBackend`: `waitForIndex`, and a
 * plan commit fenced by its delivery (checked when the plan is applied, not only when it is submitted).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EvalBroker } from '../../src/broker/eval-broker.js';
import { ManualClock } from '../../src/clock.js';
import { AbortedError, InvalidOptionError, TickpoolError } from '../../src/errors.js';
import { PlanApplier } from '../../src/state/plan-applier.js';
import { StateStore } from '../../src/state/state-store.js';
import { captureLogger } from './helpers.js';

const quiet = captureLogger().logger;

function hasCode(expected: string): (error: unknown) => boolean {
  return (error: unknown) => error instanceof TickpoolError && error.code === expected;
}

test('waitForIndex answers at once, without a promise, when the store is there already', () => {
  const store = new StateStore({ tables: ['t'] });
  assert.equal(store.waitForIndex(0), undefined);
  store.write((txn) => txn.put('t', 'k', 1));
  assert.equal(store.waitForIndex(1), undefined);
  assert.equal(store.waitForIndex(0), undefined);
});

test('waitForIndex resolves with the commit that reaches the index, not before', async () => {
  const store = new StateStore({ tables: ['t'] });
  let reached = false;
  const waiting = store.waitForIndex(2)!.then(() => (reached = true));
  store.write((txn) => txn.put('t', 'a', 1));
  await Promise.resolve();
  assert.equal(reached, false, 'index 1 is not 2');
  store.write((txn) => txn.put('t', 'b', 1));
  await waiting;
  assert.equal(reached, true);
});

test('waitForIndex rejects with AbortedError when its signal aborts, and refuses bad arguments', async () => {
  const store = new StateStore({ tables: ['t'] });
  const controller = new AbortController();
  const waiting = store.waitForIndex(5, controller.signal)!;
  controller.abort('gave up');
  await assert.rejects(waiting, (error: unknown) => error instanceof AbortedError && error.cause === 'gave up');
  const aborted = AbortSignal.abort('already');
  await assert.rejects(store.waitForIndex(5, aborted)!, (error: unknown) => error instanceof AbortedError && error.cause === 'already');
  for (const bad of [-1, 1.5, Number.NaN, '1']) assert.throws(() => store.waitForIndex(bad as number), hasCode('ERR_INVALID_ARGUMENT'));
  assert.throws(() => store.waitForIndex(1, {} as AbortSignal), hasCode('ERR_INVALID_ARGUMENT'));
});

function fenced(): { clock: ManualClock; broker: EvalBroker; store: StateStore; applier: PlanApplier } {
  const clock = new ManualClock(0);
  const broker = new EvalBroker({ clock, logger: quiet, nackTimeoutMs: 1000, initialNackDelayMs: 0 });
  const store = new StateStore({ tables: ['t'] });
  const applier = new PlanApplier({ state: store, logger: quiet, clock, fence: broker });
  return { clock, broker, store, applier };
}

const write = (key: string) => ({ writes: [{ table: 't', key, value: key, readIndex: 0 }] });

test("a plan submitted with its delivery commits while that delivery is current", async () => {
  const { broker, store, applier } = fenced();
  broker.enqueue({ id: 'e1', type: 'service' });
  const d = broker.tryDequeue(['service'])!;
  const result = await applier.submit(write('k'), { evaluationId: 'e1', token: d.token });
  assert.equal(result.index, 1);
  assert.equal(result.acked, undefined, 'the in-memory applier leaves the ack to the worker');
  assert.equal(store.snapshot().get('t', 'k')?.value, 'k');
});

test('a plan whose delivery stopped being current after it was submitted commits nothing; the next plan still applies', async () => {
  const { clock, broker, store, applier } = fenced();
  broker.enqueue({ id: 'e1', type: 'service' });
  const stale = broker.tryDequeue(['service'])!;
  broker.enqueue({ id: 'e2', type: 'service' });
  const current = broker.tryDequeue(['service'])!;
  // Both queued in this tick: the applier runs after the lease of e1 has ended below.
  const refused = applier.submit(write('a'), { evaluationId: 'e1', token: stale.token });
  const applied = applier.submit(write('b'), { evaluationId: 'e2', token: current.token });
  broker.keepLeases({ leaseProgress: (id) => id === 'e2' });
  clock.advance(1000);
  await assert.rejects(refused, hasCode('ERR_NACK_TIMEOUT_REACHED'));
  assert.equal((await applied).index, 1);
  assert.equal(store.snapshot().get('t', 'a'), undefined, 'the stale plan wrote nothing');
  assert.equal(store.index, 1);
});

test('the fence refuses a wrong token and an evaluation that is not outstanding; a plan without a delivery is not fenced', async () => {
  const { broker, store, applier } = fenced();
  broker.enqueue({ id: 'e1', type: 'service' });
  broker.tryDequeue(['service']);
  await assert.rejects(applier.submit(write('a'), { evaluationId: 'e1', token: 'forged' }), hasCode('ERR_TOKEN_MISMATCH'));
  await assert.rejects(applier.submit(write('a'), { evaluationId: 'gone', token: 't' }), hasCode('ERR_EVAL_NOT_OUTSTANDING'));
  assert.equal((await applier.submit(write('free'))).index, 1);
  assert.equal(store.index, 1);
});

test('a malformed delivery rejects the submission and queues nothing; a malformed fence is an option error', async () => {
  const { applier } = fenced();
  for (const bad of [null, 'e1', { evaluationId: '', token: 't' }, { evaluationId: 'e1' }, { evaluationId: 'e1', token: 7 }]) {
    await assert.rejects(applier.submit(write('a'), bad as never), hasCode('ERR_INVALID_ARGUMENT'));
  }
  assert.equal(applier.depth, 0);
  const state = new StateStore({ tables: ['t'] });
  assert.throws(() => new PlanApplier({ state, logger: quiet, fence: {} as never }), (e: unknown) => e instanceof InvalidOptionError && /`fence`/.test(e.message));
});

test('without a fence, a delivery is carried but not checked (an applier of its own, outside any broker)', async () => {
  const state = new StateStore({ tables: ['t'] });
  const applier = new PlanApplier({ state, logger: quiet });
  assert.equal((await applier.submit(write('a'), { evaluationId: 'e1', token: 'whatever' })).index, 1);
});
