/**
 * The order of a delivery to a waiting dequeue: the consumer's callback gets the evaluation first (the engine posts
 * it to an idle thread from there), then, in the same synchronous turn, the broker records the delivery: its wait
 * histogram, its log line, `broker:dequeue`, and last its nack deadline, read from the clock as it is after the
 * listeners ran.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ev, harness } from './helpers.js';

test('a waiting dequeue is handed the evaluation before broker:dequeue, and both before enqueue returns', () => {
  const { broker } = harness();
  const order: string[] = [];
  broker.events.on('broker:dequeue', ({ evaluation }) => order.push(`event ${evaluation.id}`));
  broker.dequeueWith(['service'], 60_000, undefined, (error, delivery) => {
    assert.equal(error, undefined);
    // The token and the job slot exist already: the consumer may act on the delivery at once.
    assert.equal(broker.outstanding(delivery!.evaluation.id), delivery!.token);
    order.push(`callback ${delivery!.evaluation.id}`);
  });
  broker.enqueue(ev('job', { id: 'a' }));
  order.push('enqueue returned');
  assert.deepEqual(order, ['callback a', 'event a', 'enqueue returned']);
});

test('the nack deadline is armed after broker:dequeue: a ManualClock advanced inside the listener moves it too', () => {
  const { broker, clock } = harness({ nackTimeoutMs: 100 });
  const timedOut: number[] = [];
  broker.events.on('broker:nack', ({ timedOut: t }) => t && timedOut.push(clock.now()));
  broker.events.on('broker:dequeue', () => clock.advance(50));
  const start = clock.now();
  broker.dequeueWith(['service'], 60_000, undefined, () => undefined);
  broker.enqueue(ev('job', { id: 'a' }));
  clock.advance(99); // start + 149: the deadline counts from start + 50
  assert.deepEqual(timedOut, []);
  clock.advance(1);
  assert.deepEqual(timedOut, [start + 150]);
});

test('a delivery the consumer ends inside its callback gets no deadline', () => {
  const { broker, clock } = harness({ nackTimeoutMs: 100 });
  let nacks = 0;
  broker.events.on('broker:nack', () => nacks++);
  broker.dequeueWith(['service'], 60_000, undefined, (_error, delivery) => broker.ack(delivery!.evaluation.id, delivery!.token));
  broker.enqueue(ev('job', { id: 'a' }));
  clock.advance(1_000);
  assert.equal(nacks, 0);
  assert.equal(broker.inspect('a'), undefined, 'acked and gone');
  assert.equal(broker.stats().totalUnacked, 0);
});
