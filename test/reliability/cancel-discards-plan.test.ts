/**
 * A canceled delivery's plan never commits. `engine.cancel(id)` and `stop()` past its grace cancel the delivery in
 * hand: whatever its scheduler returns afterwards (here a plan, from code that loops until `ctx.canceled` and then
 * hands back what it has) is discarded, and the delivery is given back, not charged to the delivery limit. A
 * cancel: the evaluation is ready again at once and redelivered; a stop: it is back in the broker.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Gate, newGate, waitFor } from '../fixtures/gates.js';
import { evaluation, fixture, started } from './helpers.js';

test('engine.cancel(): the plan returned after the cancel never commits; the delivery is given back uncharged and redelivered', async () => {
  // deliveryLimit 1: a cancel charged to the limit would send the evaluation to `_failed` instead of a redelivery.
  const engine = await started({ threads: 1, schedulers: { work: fixture('plan-after-cancel') }, tables: ['t'], broker: { deliveryLimit: 1 } });
  const gate = newGate();
  const givenBack: number[] = [];
  engine.broker.events.on('broker:give-back', ({ deliveries }) => givenBack.push(deliveries));
  const outcome = engine.run<number>(evaluation('c1', 'work', { gate, key: 'k' }));
  await waitFor(gate, Gate.STARTED, 1);
  assert.equal(engine.cancel('c1'), true);
  const acked = await outcome;
  assert.equal(Atomics.load(gate, Gate.SAW_CANCEL), 1, 'the first attempt saw its cancel and returned a plan');
  assert.equal(acked.value, 2, 'the value is the redelivery’s: the canceled attempt’s was dropped with its plan');
  assert.equal(acked.deliveries, 1, 'the canceled delivery is not counted');
  assert.deepEqual(givenBack, [0]);
  const record = engine.state.snapshot().get<number>('t', 'k');
  assert.equal(record?.value, 2, 'only the redelivery’s plan committed');
  assert.equal(engine.state.index, 1, 'one commit in all');
  assert.equal(engine.broker.stats().totalFailed, 0);
});

test('stop() past its grace: the plan returned after the cancel never commits, and the evaluation is back in the broker uncharged', async () => {
  const engine = await started({ threads: 1, schedulers: { work: fixture('plan-after-cancel') }, tables: ['t'] });
  const gate = newGate();
  const handle = engine.enqueue(evaluation('s1', 'work', { gate, key: 'k' }));
  handle.done.catch(() => undefined);
  await waitFor(gate, Gate.STARTED, 1);
  let requeued = -1;
  engine.events.on('engine:stop', (event) => (requeued = event.requeued));
  await engine.stop({ graceMs: 0 });
  assert.equal(Atomics.load(gate, Gate.SAW_CANCEL), 1, 'the attempt saw its cancel and returned a plan');
  assert.equal(engine.state.snapshot().get('t', 'k'), undefined, 'its plan did not commit');
  assert.equal(engine.state.index, 0);
  assert.deepEqual(engine.broker.inspect('s1'), { state: 'ready', queue: 'work', deliveries: 0, holdsJobSlot: true });
  assert.equal(requeued, 1);
});
