import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { getEventListeners } from 'node:events';
import { FAILED_QUEUE } from '../../src/broker/evaluation.js';
import { DeliveryLimitError, NackTimeoutReachedError, TickpoolError, UnknownSchedulerError } from '../../src/errors.js';
import { code, ev, harness, seeded, settled } from './helpers.js';

describe('enqueue, dequeue, ack', () => {
  test('a cycle moves an evaluation ready → unacked → gone, with a fresh token per delivery', () => {
    const { broker } = harness();
    assert.equal(broker.enabled, true, 'a new broker starts enabled');
    const e = ev('job');
    broker.enqueue(e);
    assert.equal(broker.stats().totalReady, 1);
    assert.deepEqual(broker.inspect(e.id), { state: 'ready', queue: 'service', deliveries: 0, holdsJobSlot: true });
    const d = broker.tryDequeue(['service'])!;
    assert.equal(d.evaluation, e, 'the caller’s object, not a copy');
    assert.equal(typeof d.token, 'string');
    assert.equal(broker.outstanding(e.id), d.token);
    assert.deepEqual({ ...broker.stats(), byScheduler: undefined }, { totalReady: 0, totalUnacked: 1, totalPending: 0, totalWaiting: 0, totalCancelable: 0, totalFailed: 0, byScheduler: undefined });
    assert.deepEqual(broker.stats().byScheduler, { service: { ready: 0, unacked: 1 } });
    broker.ack(e.id, d.token);
    assert.equal(broker.outstanding(e.id), undefined);
    assert.equal(broker.inspect(e.id), undefined);
    assert.equal(broker.stats().totalUnacked, 0);
  });

  test('a known id enqueued again is a no-op in every state', () => {
    const { broker, clock } = harness();
    const e = ev('job', { id: 'same' });
    broker.enqueue(e);
    broker.enqueue({ ...e, priority: 99 });
    assert.equal(broker.stats().totalReady, 1);
    const d = broker.tryDequeue(['service'])!;
    broker.enqueue(e);
    assert.equal(broker.stats().totalReady, 0, 'not re-added while unacked');
    broker.nack(e.id, d.token);
    assert.equal(broker.inspect(e.id)?.state, 'waiting');
    broker.enqueue(e);
    assert.equal(broker.stats().totalWaiting, 1);
    clock.advance(1000);
    assert.equal(broker.stats().totalReady, 1);
  });

  test('an acked id may be enqueued again as new work', () => {
    const { broker } = harness();
    const e = ev('job', { id: 'again' });
    broker.enqueue(e);
    const d = broker.tryDequeue(['service'])!;
    broker.ack(e.id, d.token);
    broker.enqueue(e);
    assert.equal(broker.inspect('again')?.deliveries, 0);
  });

  test('bad input throws a typed error and changes nothing', () => {
    const { broker } = harness();
    broker.enqueue(ev('job'));
    const before = broker.stats();
    assert.throws(() => broker.enqueue({ id: 'x', jobId: 'j', type: 'service', priority: 0 }), code('ERR_INVALID_EVALUATION', /priority/));
    assert.throws(() => broker.enqueue({ id: 'x', jobId: 5, type: 'service', priority: 5 } as never), code('ERR_INVALID_EVALUATION', /jobId/));
    assert.throws(() => broker.enqueue({ id: 'x', jobId: 'j', type: 'service', priority: 5, payload: { f: () => 1 } }), code('ERR_INVALID_EVALUATION', /payload/));
    assert.throws(() => broker.tryDequeue([]), code('ERR_INVALID_ARGUMENT', /`types`/));
    assert.throws(() => broker.tryDequeue(['service', ''] as never), code('ERR_INVALID_ARGUMENT', /`types\[1\]`/));
    assert.throws(() => broker.ack('', 't'), code('ERR_INVALID_ARGUMENT', /`id`/));
    assert.throws(() => broker.ack('x', 5 as never), code('ERR_INVALID_ARGUMENT', /`token`/));
    assert.deepEqual(broker.stats(), before);
  });

  test('dequeue rejects bad arguments instead of throwing synchronously', async () => {
    const { broker } = harness();
    await assert.rejects(broker.dequeue('service' as never, 10), code('ERR_INVALID_ARGUMENT', /`types`/));
    await assert.rejects(broker.dequeue(['service'], -1), code('ERR_INVALID_ARGUMENT', /`timeoutMs`/));
    await assert.rejects(broker.dequeue(['service'], 10, {} as never), code('ERR_INVALID_ARGUMENT', /`signal`/));
  });
});

describe('ready order', () => {
  test('higher priority first across jobs; FIFO by createIndex, else by enqueue order', () => {
    const { broker } = harness();
    broker.enqueue(ev('a', { id: 'low', priority: 10 }));
    broker.enqueue(ev('b', { id: 'late-index', priority: 50, createIndex: 9 }));
    broker.enqueue(ev('c', { id: 'early-index', priority: 50, createIndex: 3 }));
    broker.enqueue(ev('d', { id: 'high', priority: 90 }));
    broker.enqueue(ev('e', { id: 'fifo-1', priority: 20 }));
    broker.enqueue(ev('f', { id: 'fifo-2', priority: 20 }));
    const order: string[] = [];
    for (let d = broker.tryDequeue(['service']); d !== undefined; d = broker.tryDequeue(['service'])) order.push(d.evaluation.id);
    assert.deepEqual(order, ['high', 'early-index', 'late-index', 'fifo-1', 'fifo-2', 'low']);
  });

  test('across types the heap roots are compared (not the last slot, Nomad’s Peek bug)', () => {
    const { broker } = harness();
    broker.enqueue(ev('a1', { id: 'a90', type: 'a', priority: 90 }));
    broker.enqueue(ev('a2', { id: 'a10', type: 'a', priority: 10 }));
    broker.enqueue(ev('a3', { id: 'a20', type: 'a', priority: 20 }));
    broker.enqueue(ev('b1', { id: 'b50', type: 'b', priority: 50 }));
    const order: string[] = [];
    for (let d = broker.tryDequeue(['a', 'b']); d !== undefined; d = broker.tryDequeue(['a', 'b'])) order.push(d.evaluation.id);
    assert.deepEqual(order, ['a90', 'b50', 'a20', 'a10']);
  });

  test('equal priorities between types are broken by the injected random source', () => {
    for (const [random, expected] of [
      [() => 0, 'a'],
      [() => 0.999, 'b'],
    ] as const) {
      const { broker } = harness({ random });
      broker.enqueue(ev('ja', { type: 'a', priority: 50 }));
      broker.enqueue(ev('jb', { type: 'b', priority: 50 }));
      assert.equal(broker.tryDequeue(['a', 'b'])!.evaluation.type, expected);
    }
  });

  test('fairness: with a random tie-break both types are served', () => {
    const { broker } = harness({ random: seeded(42) });
    for (let i = 0; i < 200; i++) {
      broker.enqueue(ev(`a${i}`, { type: 'a', priority: 50 }));
      broker.enqueue(ev(`b${i}`, { type: 'b', priority: 50 }));
    }
    const served = { a: 0, b: 0 };
    for (let i = 0; i < 200; i++) {
      const d = broker.tryDequeue(['a', 'b'])!;
      served[d.evaluation.type as 'a' | 'b']++;
      broker.ack(d.evaluation.id, d.token);
    }
    assert.ok(served.a > 60 && served.b > 60, `both types served: ${JSON.stringify(served)}`);
  });

  test('a type listed twice gets no extra chance in a tie-break', () => {
    const { broker } = harness({ random: () => 0.4 });
    broker.enqueue(ev('ja', { type: 'a' }));
    broker.enqueue(ev('jb', { type: 'b' }));
    assert.equal(broker.tryDequeue(['a', 'b', 'b'])!.evaluation.type, 'a', 'ties are [a, b], not [a, b, b]');
  });

  test('a random source outside [0, 1) still picks one of the tied queues', () => {
    const { broker } = harness({ random: () => 1 });
    broker.enqueue(ev('ja', { type: 'a' }));
    broker.enqueue(ev('jb', { type: 'b' }));
    assert.equal(broker.tryDequeue(['a', 'b'])!.evaluation.type, 'b');
  });
});

describe('one evaluation per job', () => {
  test('a second evaluation of a busy job waits as pending; ack promotes it', () => {
    const { broker } = harness();
    broker.enqueue(ev('job', { id: 'first' }));
    broker.enqueue(ev('job', { id: 'second' }));
    broker.enqueue(ev('job', { id: 'other-ns', namespace: 'ns2' }));
    assert.equal(broker.stats().totalReady, 2, 'namespace is part of the job key');
    assert.equal(broker.stats().totalPending, 1);
    const d = broker.tryDequeue(['service'])!;
    const d2 = broker.tryDequeue(['service'])!;
    assert.deepEqual([d.evaluation.id, d2.evaluation.id].sort(), ['first', 'other-ns']);
    assert.equal(broker.tryDequeue(['service']), undefined, 'second waits for first');
    broker.ack('first', d.evaluation.id === 'first' ? d.token : d2.token);
    assert.equal(broker.inspect('second')?.state, 'ready');
    assert.equal(broker.stats().totalPending, 0);
  });

  test('on ack the best pending (priority, then newest modifyIndex) is promoted and the rest become cancelable', () => {
    const { broker } = harness();
    const events: string[][] = [];
    broker.events.on('broker:cancelable', ({ evaluations }) => events.push(evaluations.map((e) => e.id).sort()));
    broker.enqueue(ev('job', { id: 'running', priority: 50 }));
    const d = broker.tryDequeue(['service'])!;
    broker.enqueue(ev('job', { id: 'p50-m1', priority: 50, modifyIndex: 1 }));
    broker.enqueue(ev('job', { id: 'p70-m2', priority: 70, modifyIndex: 2 }));
    broker.enqueue(ev('job', { id: 'p70-m5', priority: 70, modifyIndex: 5 }));
    broker.enqueue(ev('job', { id: 'p70-m3', priority: 70, modifyIndex: 3 }));
    assert.equal(broker.stats().totalPending, 4);
    broker.ack('running', d.token);
    assert.equal(broker.inspect('p70-m5')?.state, 'ready');
    assert.equal(broker.stats().totalPending, 0);
    assert.equal(broker.stats().totalCancelable, 3);
    assert.deepEqual(events, [['p50-m1', 'p70-m2', 'p70-m3']]);
    broker.enqueue(ev('job', { id: 'p70-m2' }));
    assert.equal(broker.stats().totalCancelable, 3, 'a cancelable id is still known');
    assert.deepEqual(broker.drainCancelable().map((e) => e.id).sort(), ['p50-m1', 'p70-m2', 'p70-m3']);
    assert.equal(broker.stats().totalCancelable, 0);
    assert.deepEqual(broker.drainCancelable(), []);
    assert.equal(broker.inspect('p50-m1'), undefined);
  });

  test('pending order with equal modifyIndex: the latest enqueued wins', () => {
    const { broker } = harness();
    broker.enqueue(ev('job', { id: 'holder' }));
    const d = broker.tryDequeue(['service'])!;
    broker.enqueue(ev('job', { id: 'older' }));
    broker.enqueue(ev('job', { id: 'newer' }));
    broker.ack('holder', d.token);
    assert.equal(broker.inspect('newer')?.state, 'ready');
    assert.equal(broker.inspect('older')?.state, 'cancelable');
  });

  test('job slots stay correct across the sweep of emptied slots', () => {
    const { broker } = harness();
    broker.enqueue(ev('keep', { id: 'holder' }));
    const held = broker.tryDequeue(['service'])!;
    broker.enqueue(ev('keep', { id: 'behind' }));
    // 10k jobs come and go: empty slots pile up past the sweep threshold (4096) more than once.
    for (let i = 0; i < 10_000; i++) {
      broker.enqueue(ev(`churn-${i % 5000}`, { id: `c${i}` }));
      const d = broker.tryDequeue(['service'])!;
      broker.ack(d.evaluation.id, d.token);
    }
    broker.enqueue(ev('churn-1', { id: 'again-1' }));
    broker.enqueue(ev('churn-1', { id: 'again-2' }));
    assert.equal(broker.inspect('again-2')?.state, 'pending', 'a swept job key serializes again');
    assert.equal(broker.inspect('behind')?.state, 'pending');
    broker.enqueue(ev('keep', { id: 'late' }));
    assert.equal(broker.inspect('late')?.state, 'pending', 'the held slot is still in the map');
    broker.ack('holder', held.token);
    assert.equal(broker.inspect('late')?.state, 'ready', 'a held slot survived the sweeps');
    assert.equal(broker.inspect('behind')?.state, 'cancelable');
  });

  test('a nacked evaluation keeps its job slot through its re-enqueue delay', () => {
    const { broker, clock } = harness();
    broker.enqueue(ev('job', { id: 'a' }));
    const d = broker.tryDequeue(['service'])!;
    broker.enqueue(ev('job', { id: 'b' }));
    broker.nack('a', d.token);
    assert.deepEqual(broker.inspect('a'), { state: 'waiting', queue: undefined, deliveries: 1, holdsJobSlot: true });
    assert.equal(broker.inspect('b')?.state, 'pending');
    clock.advance(1000);
    assert.equal(broker.inspect('a')?.state, 'ready');
    assert.equal(broker.inspect('b')?.state, 'pending');
  });
});

describe('delayed evaluations', () => {
  test('waitUntil and wait hold an evaluation until due, without taking its job slot', () => {
    const { broker, clock } = harness();
    const t0 = clock.now();
    broker.enqueue(ev('job', { id: 'until', waitUntil: t0 + 5000 }));
    broker.enqueue(ev('job2', { id: 'wait', wait: 2000 }));
    broker.enqueue(ev('job', { id: 'now' }));
    assert.equal(broker.stats().totalWaiting, 2);
    assert.equal(broker.inspect('until')?.holdsJobSlot, false);
    assert.equal(broker.inspect('now')?.state, 'ready', 'the delayed one does not block its job');
    const d = broker.tryDequeue(['service'])!;
    assert.equal(d.evaluation.id, 'now');
    clock.advance(1999);
    assert.equal(broker.inspect('wait')?.state, 'waiting');
    clock.advance(1);
    assert.equal(broker.inspect('wait')?.state, 'ready');
    clock.advance(3000);
    assert.equal(broker.inspect('until')?.state, 'pending', 'due now, and its job is busy');
    broker.ack('now', d.token);
    assert.equal(broker.inspect('until')?.state, 'ready');
    assert.equal(broker.stats().totalWaiting, 0);
  });

  test('waitUntil in the past, or wait 0, is ready at once; with both, the later one holds', () => {
    const { broker, clock } = harness();
    broker.enqueue(ev('j1', { id: 'past', waitUntil: clock.now() - 1 }));
    broker.enqueue(ev('j2', { id: 'zero', wait: 0 }));
    broker.enqueue(ev('j3', { id: 'both', wait: 100, waitUntil: clock.now() + 300 }));
    assert.equal(broker.inspect('past')?.state, 'ready');
    assert.equal(broker.inspect('zero')?.state, 'ready');
    clock.advance(299);
    assert.equal(broker.inspect('both')?.state, 'waiting');
    clock.advance(1);
    assert.equal(broker.inspect('both')?.state, 'ready');
  });
});

describe('waiting dequeues', () => {
  test('a dequeue waits until its timeout and resolves undefined, not earlier', async () => {
    const { broker, clock } = harness();
    const p = broker.dequeue(['service'], 500);
    clock.advance(499);
    assert.equal(await settled(p), false);
    clock.advance(1);
    assert.equal(await p, undefined);
    assert.equal(broker.waitingDequeues, 0);
    assert.equal(clock.pendingTimers, 0, 'its timer is gone');
  });

  test('timeout 0 waits forever; an enqueue wakes it with a delivery', async () => {
    const { broker, clock } = harness();
    const p = broker.dequeue(['service'], 0);
    clock.advance(10 * 60_000);
    assert.equal(await settled(p), false);
    broker.enqueue(ev('job', { id: 'x' }));
    const d = (await p)!;
    assert.equal(d.evaluation.id, 'x');
    assert.equal(broker.outstanding('x'), d.token);
  });

  test('one enqueue wakes one waiter, in arrival order, and only waiters for its type', async () => {
    const { broker } = harness();
    const other = broker.dequeue(['batch'], 0);
    const first = broker.dequeue(['service', 'batch'], 0);
    const second = broker.dequeue(['service'], 0);
    broker.enqueue(ev('j1', { id: 's1' }));
    assert.equal((await first)!.evaluation.id, 's1');
    assert.equal(await settled(second), false);
    assert.equal(await settled(other), false);
    broker.enqueue(ev('j2', { id: 's2' }));
    assert.equal((await second)!.evaluation.id, 's2');
    broker.enqueue(ev('j3', { id: 'b1', type: 'batch' }));
    assert.equal((await other)!.evaluation.id, 'b1');
  });

  test('a pending evaluation promoted by an ack wakes a waiter', async () => {
    const { broker } = harness();
    broker.enqueue(ev('job', { id: 'a' }));
    broker.enqueue(ev('job', { id: 'b' }));
    const d = broker.tryDequeue(['service'])!;
    const p = broker.dequeue(['service'], 0);
    assert.equal(await settled(p), false);
    broker.ack('a', d.token);
    assert.equal((await p)!.evaluation.id, 'b');
  });

  test('an aborted dequeue rejects with AbortedError and gives nothing away', async () => {
    const { broker } = harness();
    const controller = new AbortController();
    const p = broker.dequeue(['service'], 0, controller.signal);
    controller.abort();
    await assert.rejects(p, code('ERR_ABORTED', /dequeue/));
    assert.equal(broker.waitingDequeues, 0);
    broker.enqueue(ev('job', { id: 'kept' }));
    assert.equal(broker.inspect('kept')?.state, 'ready');
    await assert.rejects(broker.dequeue(['service'], 0, controller.signal), code('ERR_ABORTED'), 'an already aborted signal');
    assert.equal(broker.inspect('kept')?.state, 'ready', 'even with work ready');
  });

  test('dequeueWith calls back inside the enqueue that makes work available, once, and survives a throwing callback', () => {
    const { broker, clock } = harness();
    const calls: Array<[string | undefined, string | undefined]> = [];
    broker.dequeueWith(['service'], 1000, undefined, (error, delivery) => calls.push([error?.name, delivery?.evaluation.id]));
    assert.equal(calls.length, 0, 'nothing ready yet');
    broker.enqueue(ev('j1', { id: 'a' }));
    assert.deepEqual(calls, [[undefined, 'a']], 'called before enqueue returned');
    broker.enqueue(ev('j2', { id: 'b' }));
    assert.equal(calls.length, 1, 'exactly once');
    // Ready now: called from dequeueWith itself. Wrong arguments: called with the typed error.
    broker.dequeueWith(['service'], 1000, undefined, (error, delivery) => calls.push([error?.name, delivery?.evaluation.id]));
    broker.dequeueWith([], 1000, undefined, (error, delivery) => calls.push([(error as TickpoolError | undefined)?.code, delivery?.evaluation.id]));
    assert.deepEqual(calls.slice(1), [[undefined, 'b'], ['ERR_INVALID_ARGUMENT', undefined]]);
    // A timeout calls back with nothing.
    broker.dequeueWith(['service'], 1000, undefined, (error, delivery) => calls.push([error?.name, delivery?.evaluation.id]));
    clock.advance(1000);
    assert.deepEqual(calls.at(-1), [undefined, undefined]);
    // A callback that throws does not break the enqueue; its delivery stays outstanding until its deadline.
    broker.dequeueWith(['service'], 0, undefined, () => {
      throw new Error('consumer bug');
    });
    broker.enqueue(ev('j3', { id: 'c' }));
    assert.equal(broker.inspect('c')?.state, 'unacked');
    broker.enqueue(ev('j4', { id: 'd' }));
    assert.equal(broker.inspect('d')?.state, 'ready', 'the broker still works');
  });

  test('an enqueue answers a waiting dequeue inside the call: events in order, and the nack deadline of the delivery runs', () => {
    const { broker, clock } = harness({ nackTimeoutMs: 5000 });
    const seen: string[] = [];
    broker.events.on('broker:enqueue', ({ evaluation }) => seen.push(`enqueue ${evaluation.id}`));
    broker.events.on('broker:dequeue', ({ evaluation }) => seen.push(`dequeue ${evaluation.id}`));
    broker.events.on('broker:nack', ({ evaluation, timedOut }) => seen.push(`nack ${evaluation.id} timedOut=${timedOut}`));
    broker.dequeueWith(['service'], 0, undefined, (_error, delivery) => seen.push(`got ${delivery?.evaluation.id}`));
    broker.enqueue(ev('j', { id: 'a' }));
    // The hand-off goes first: the waiter has the evaluation before broker:dequeue records the delivery.
    assert.deepEqual(seen, ['enqueue a', 'got a', 'dequeue a'], 'the waiter is answered inside the enqueue, before the dequeue event');
    assert.equal(broker.inspect('a')?.state, 'unacked');
    assert.deepEqual(broker.stats().byScheduler, { service: { ready: 0, unacked: 1 } });
    clock.advance(4999);
    assert.equal(seen.length, 3, 'not before the nack timeout');
    clock.advance(1);
    assert.deepEqual(seen.slice(3), ['nack a timedOut=true'], 'the delivery got its nack deadline');
  });

  test('an enqueue listener that takes the waiter away or pauses the broker leaves the evaluation ready, not lost', () => {
    const { broker } = harness();
    const controller = new AbortController();
    const answers: Array<string | undefined> = [];
    broker.dequeueWith(['service'], 0, controller.signal, (error, delivery) => answers.push(error?.name ?? delivery?.evaluation.id));
    broker.dequeueWith(['service'], 0, undefined, (error, delivery) => answers.push(error?.name ?? `second got ${delivery?.evaluation.id}`));
    const off = broker.events.on('broker:enqueue', () => controller.abort());
    broker.enqueue(ev('j1', { id: 'a' }));
    off();
    assert.deepEqual(answers, ['AbortedError', 'second got a'], 'the first waiter was aborted; the next one is served in the same enqueue');
    const taken = new AbortController();
    broker.dequeueWith(['service'], 0, taken.signal, () => undefined);
    const offTake = broker.events.on('broker:enqueue', () => taken.abort());
    broker.enqueue(ev('j1c', { id: 'a3' }));
    offTake();
    assert.equal(broker.inspect('a3')?.state, 'ready', 'no waiter left: it stays ready');
    assert.equal(broker.stats().totalReady, 1);
    const late: Array<string | undefined> = [];
    broker.dequeueWith(['service'], 0, undefined, (_error, delivery) => late.push(delivery?.evaluation.id));
    assert.deepEqual(late, ['a3'], 'the next dequeue gets it');

    const offPause = broker.events.on('broker:enqueue', () => broker.pause());
    const held: Array<string | undefined> = [];
    broker.dequeueWith(['service'], 0, undefined, (_error, delivery) => held.push(delivery?.evaluation.id));
    broker.enqueue(ev('j2', { id: 'b' }));
    offPause();
    assert.deepEqual(held, [], 'paused: nothing handed out');
    assert.equal(broker.inspect('b')?.state, 'ready');
    broker.resume();
    assert.deepEqual(held, ['b'], 'served on resume');
  });

  test('an enqueue listener sees the new evaluation ready; one it enqueues itself does not jump ahead of it', () => {
    const { broker } = harness();
    const got: string[] = [];
    broker.dequeueWith(['service'], 0, undefined, (_error, delivery) => got.push(delivery!.evaluation.id));
    const seenReady: number[] = [];
    const off = broker.events.on('broker:enqueue', ({ evaluation }) => {
      if (evaluation.id !== 'high') return;
      seenReady.push(broker.stats().byScheduler.service?.ready ?? 0);
      broker.enqueue(ev('j-low', { id: 'low', priority: 10 }));
    });
    broker.enqueue(ev('j-high', { id: 'high', priority: 90 }));
    off();
    assert.deepEqual(seenReady, [1], 'the listener sees it counted and queued');
    assert.deepEqual(got, ['high'], 'the waiter gets the higher priority one');
    assert.equal(broker.inspect('low')?.state, 'ready');
  });

  test('a waiter answered by a disable may enable the broker and wait again, with its timeout', () => {
    const { broker, clock } = harness();
    const answers: string[] = [];
    broker.dequeueWith(['service'], 0, undefined, (error) => {
      answers.push(error?.name ?? 'delivery');
      broker.setEnabled(true);
      broker.dequeueWith(['service'], 100, undefined, (again, delivery) => answers.push(again?.name ?? delivery?.evaluation.id ?? 'timed out'));
    });
    broker.setEnabled(false);
    assert.deepEqual(answers, ['BrokerDisabledError']);
    assert.equal(broker.waitingDequeues, 1);
    clock.advance(100);
    assert.deepEqual(answers, ['BrokerDisabledError', 'timed out']);
    assert.equal(broker.waitingDequeues, 0);
  });

  test('the wait histogram records the time an evaluation waited, even when its consumer moves it at once', async () => {
    const { broker, clock, registry } = harness();
    broker.pause();
    broker.enqueue(ev('j', { id: 'a' }));
    broker.dequeueWith(['service'], 0, undefined, (_error, delivery) => broker.fail(delivery!.evaluation.id, delivery!.token, new Error('no scheduler')));
    clock.advance(40);
    broker.resume(); // the waiter is served now, after 40 ms ready
    assert.equal(broker.inspect('a')?.state, 'failed');
    assert.match(await registry.metrics(), /^tickpool_broker_wait_time_seconds_sum\{type="service"\} 0.04$/m);
  });

  test('a dequeue callback that moves a manual clock is answered once; its delivery\'s deadline counts from after the callback', () => {
    const { broker, clock } = harness({ nackTimeoutMs: 150 });
    const seen: string[] = [];
    broker.events.on('broker:nack', ({ evaluation, timedOut }) => seen.push(`nack ${evaluation.id} timedOut=${timedOut} at ${clock.now() - 1_000_000}`));
    broker.dequeueWith(['service'], 100, undefined, (_error, delivery) => {
      seen.push(delivery === undefined ? 'answered: timeout' : `answered: ${delivery.evaluation.id}`);
      if (delivery !== undefined) clock.advance(200);
    });
    broker.enqueue(ev('j', { id: 'a' }));
    clock.advance(0);
    // The deadline is armed after the consumer's turn (the hand-off goes first): at 200 + 150.
    assert.deepEqual(seen, ['answered: a']);
    clock.advance(149);
    assert.deepEqual(seen, ['answered: a']);
    clock.advance(1);
    assert.deepEqual(seen, ['answered: a', 'nack a timedOut=true at 350']);
  });

  test('a dequeue callback that settles its delivery at once leaves no nack deadline behind', () => {
    const { broker, clock } = harness({ nackTimeoutMs: 1000 });
    const nacks: string[] = [];
    broker.events.on('broker:nack', ({ evaluation }) => nacks.push(evaluation.id));
    broker.dequeueWith(['service'], 0, undefined, (_error, delivery) => broker.ack(delivery!.evaluation.id, delivery!.token));
    broker.enqueue(ev('j1', { id: 'acked' }));
    broker.dequeueWith(['service'], 0, undefined, (_error, delivery) => broker.pauseNackTimeout(delivery!.evaluation.id, delivery!.token));
    broker.enqueue(ev('j2', { id: 'paused' }));
    assert.equal(broker.inspect('acked'), undefined);
    clock.advance(10_000);
    assert.deepEqual(nacks, [], 'neither the acked nor the paused delivery times out');
    assert.equal(broker.inspect('paused')?.state, 'unacked');
  });

  test('a signal reused for many dequeues gets one abort listener, which still aborts the dequeue waiting now', async () => {
    const { broker, clock } = harness();
    const controller = new AbortController();
    for (let i = 0; i < 50; i++) {
      const p = broker.dequeue(['service'], 1000, controller.signal);
      if (i % 2 === 0) broker.enqueue(ev(`j${i}`, { id: `e${i}` }));
      else clock.advance(1000); // the other half time out
      const got = await p;
      assert.equal(got?.evaluation.id, i % 2 === 0 ? `e${i}` : undefined);
      if (got !== undefined) broker.ack(got.evaluation.id, got.token);
    }
    assert.equal(getEventListeners(controller.signal, 'abort').length, 1);
    const waiting = broker.dequeue(['service'], 1000, controller.signal);
    controller.abort();
    await assert.rejects(waiting, code('ERR_ABORTED'));
    assert.equal(broker.waitingDequeues, 0);
    clock.advance(1000); // its timeout is gone with it: nothing fires twice
    assert.equal(broker.waitingDequeues, 0);
  });
});

describe('nack, delays and the delivery limit', () => {
  test('re-enqueue delays grow with the delivery count; at the limit it goes to _failed', () => {
    const { broker, clock } = harness({ deliveryLimit: 4, initialNackDelayMs: 1000, subsequentNackDelayMs: 20000 });
    broker.enqueue(ev('job', { id: 'e' }));
    const expectDelay = (ms: number): void => {
      clock.advance(ms - 1);
      assert.equal(broker.inspect('e')?.state, 'waiting', `still waiting at ${ms - 1}`);
      clock.advance(1);
      assert.equal(broker.inspect('e')?.state, 'ready', `ready at ${ms}`);
    };
    let d = broker.tryDequeue(['service'])!;
    broker.nack('e', d.token);
    expectDelay(1000);
    d = broker.tryDequeue(['service'])!;
    broker.nack('e', d.token);
    expectDelay(20000);
    d = broker.tryDequeue(['service'])!;
    broker.nack('e', d.token);
    expectDelay(40000);
    d = broker.tryDequeue(['service'])!;
    const reason = new Error('scheduler crashed');
    broker.nack('e', d.token, reason);
    assert.equal(broker.inspect('e')?.state, 'failed');
    assert.equal(broker.inspect('e')?.deliveries, 4);
    assert.equal(broker.stats().totalFailed, 1);
    const why = broker.failedReason('e');
    assert.ok(why instanceof DeliveryLimitError);
    assert.equal(why.cause, reason, 'the last nack reason is the cause');
    assert.match(why.message, /within 4 deliveries, but it was delivered 4 times/);
  });

  test('the _failed queue dequeues like any type; its deliveries do not count, a nack keeps it there', () => {
    const { broker } = harness({ deliveryLimit: 1 });
    broker.enqueue(ev('job', { id: 'e' }));
    const d = broker.tryDequeue(['service'])!;
    broker.nack('e', d.token);
    assert.equal(broker.tryDequeue(['service']), undefined);
    const f = broker.tryDequeue([FAILED_QUEUE])!;
    assert.equal(f.evaluation.id, 'e');
    assert.deepEqual(broker.inspect('e'), { state: 'unacked', queue: FAILED_QUEUE, deliveries: 1, holdsJobSlot: false });
    assert.deepEqual(broker.stats().byScheduler[FAILED_QUEUE], { ready: 0, unacked: 1 });
    broker.nack('e', f.token);
    assert.equal(broker.inspect('e')?.state, 'failed', 'straight back, no delay');
    assert.ok(broker.failedReason('e') instanceof DeliveryLimitError, 'the reason is kept');
    const f2 = broker.tryDequeue([FAILED_QUEUE])!;
    broker.ack('e', f2.token);
    assert.equal(broker.inspect('e'), undefined);
    assert.equal(broker.failedReason('e'), undefined);
  });

  test('a dead-lettered evaluation frees its job: the best pending is promoted, the others stay pending', () => {
    const { broker } = harness({ deliveryLimit: 1 });
    broker.enqueue(ev('job', { id: 'doomed' }));
    const d = broker.tryDequeue(['service'])!;
    broker.enqueue(ev('job', { id: 'next', priority: 80 }));
    broker.enqueue(ev('job', { id: 'later', priority: 20 }));
    broker.nack('doomed', d.token);
    assert.equal(broker.inspect('doomed')?.state, 'failed');
    assert.equal(broker.inspect('next')?.state, 'ready');
    assert.equal(broker.inspect('later')?.state, 'pending', 'newer work is not cancelable');
    assert.equal(broker.stats().totalCancelable, 0);
  });

  test('fail() dead-letters an outstanding evaluation with the given reason, whatever its count', () => {
    const { broker } = harness();
    const failed: string[] = [];
    broker.events.on('broker:failed', ({ evaluation, reason }) => failed.push(`${evaluation.id}:${(reason as TickpoolError).code}`));
    broker.enqueue(ev('job', { id: 'e', type: 'mystery' }));
    broker.enqueue(ev('job', { id: 'p', type: 'mystery' }));
    const d = broker.tryDequeue(['mystery'])!;
    const reason = new UnknownSchedulerError('mystery', ['service']);
    broker.fail('e', d.token, reason);
    assert.equal(broker.failedReason('e'), reason);
    assert.equal(broker.inspect('e')?.deliveries, 1);
    assert.equal(broker.inspect('p')?.state, 'ready');
    assert.deepEqual(failed, ['e:ERR_UNKNOWN_SCHEDULER']);
    assert.throws(() => broker.fail('e', d.token, reason), code('ERR_EVAL_NOT_OUTSTANDING'));
    const f = broker.tryDequeue([FAILED_QUEUE])!;
    assert.throws(() => broker.fail('e', f.token, 'nope' as never), code('ERR_INVALID_ARGUMENT', /`reason`/));
    assert.throws(() => broker.nack('e', f.token, 'nope' as never), code('ERR_INVALID_ARGUMENT', /`reason`/));
  });
});

describe('knownTypes', () => {
  test('an evaluation of a type outside knownTypes is failed at enqueue, once, delayed or behind its job alike', async () => {
    const { broker, clock } = harness({ knownTypes: ['service'], nackTimeoutMs: 3_600_000 });
    const events: string[] = [];
    broker.events.on('broker:enqueue', ({ evaluation }) => events.push(`enqueue ${evaluation.id}`));
    broker.events.on('broker:failed', ({ evaluation, reason }) => events.push(`failed ${evaluation.id} ${(reason as TickpoolError).code}`));
    broker.enqueue(ev('job', { id: 'held' }));
    const held = broker.tryDequeue(['service'])!;
    const stray = broker.enqueue(ev('job', { id: 'stray', type: 'mystery' }));
    const later = broker.enqueue({ ...ev('other', { id: 'later', type: 'mystery' }), wait: 60_000 });
    assert.equal(stray.id, 'stray', 'enqueue still returns the handle');
    await assert.rejects(stray.done, code('ERR_UNKNOWN_SCHEDULER', /service/));
    await assert.rejects(later.done, code('ERR_UNKNOWN_SCHEDULER'));
    assert.deepEqual(events, ['enqueue held', 'enqueue stray', 'failed stray ERR_UNKNOWN_SCHEDULER', 'enqueue later', 'failed later ERR_UNKNOWN_SCHEDULER']);
    assert.equal(broker.inspect('stray')?.queue, FAILED_QUEUE);
    assert.equal(broker.inspect('stray')?.deliveries, 0, 'never delivered');
    assert.equal(broker.stats().totalFailed, 2);
    assert.equal(broker.stats().totalPending + broker.stats().totalWaiting, 0, 'nothing waits to be failed later');
    assert.equal(broker.enqueue(ev('job', { id: 'stray', type: 'mystery' })).done, stray.done, 'the same id again changes nothing');
    clock.advance(120_000);
    broker.ack('held', held.token);
    assert.equal(events.filter((e) => e.startsWith('failed')).length, 2, 'failed once each');
    broker.enqueue(ev('job', { id: 'next' }));
    assert.equal(broker.inspect('next')?.state, 'ready', 'the job is not blocked');
  });

  test('without knownTypes every type is admitted; bad knownTypes are option errors', () => {
    const { broker } = harness();
    broker.enqueue(ev('job', { id: 'x', type: 'anything' }));
    assert.equal(broker.inspect('x')?.state, 'ready');
    assert.throws(() => harness({ knownTypes: 'service' as never }), code('ERR_INVALID_OPTION', /knownTypes/));
    assert.throws(() => harness({ knownTypes: [''] }), code('ERR_INVALID_OPTION', /knownTypes/));
    assert.throws(() => harness({ knownTypes: [1 as never] }), code('ERR_INVALID_OPTION', /knownTypes/));
  });
});

describe('nack deadlines', () => {
  test('a delivery not acked in time is nacked; a late ack fails with NackTimeoutReachedError', () => {
    const { broker, clock } = harness({ nackTimeoutMs: 5000 });
    const nacks: Array<{ timedOut: boolean; delayMs: number }> = [];
    broker.events.on('broker:nack', ({ timedOut, delayMs }) => nacks.push({ timedOut, delayMs }));
    broker.enqueue(ev('job', { id: 'e' }));
    const d = broker.tryDequeue(['service'])!;
    clock.advance(4999);
    assert.equal(broker.outstanding('e'), d.token);
    clock.advance(1);
    assert.equal(broker.outstanding('e'), undefined);
    assert.equal(broker.inspect('e')?.state, 'waiting');
    assert.deepEqual(nacks, [{ timedOut: true, delayMs: 1000 }]);
    assert.throws(() => broker.ack('e', d.token), (e: unknown) => e instanceof NackTimeoutReachedError);
    assert.throws(() => broker.outstandingReset('e', d.token), code('ERR_NACK_TIMEOUT_REACHED'));
    clock.advance(1000);
    const d2 = broker.tryDequeue(['service'])!;
    assert.notEqual(d2.token, d.token);
    assert.throws(() => broker.ack('e', d.token), code('ERR_NACK_TIMEOUT_REACHED'), 'the old delivery still lost');
    broker.ack('e', d2.token);
  });

  test('timeouts count as deliveries toward the limit and record why', () => {
    const { broker, clock } = harness({ nackTimeoutMs: 100, deliveryLimit: 2, initialNackDelayMs: 0 });
    broker.enqueue(ev('job', { id: 'e' }));
    broker.tryDequeue(['service']);
    clock.advance(100);
    broker.tryDequeue(['service']);
    clock.advance(100);
    assert.equal(broker.inspect('e')?.state, 'failed');
    const why = broker.failedReason('e')!;
    assert.ok(why instanceof DeliveryLimitError);
    assert.ok(why.cause instanceof NackTimeoutReachedError);
  });

  test('outstandingReset pushes the deadline to now + nackTimeout', () => {
    const { broker, clock } = harness({ nackTimeoutMs: 1000 });
    broker.enqueue(ev('job', { id: 'e' }));
    const d = broker.tryDequeue(['service'])!;
    clock.advance(900);
    broker.outstandingReset('e', d.token);
    clock.advance(999);
    assert.equal(broker.outstanding('e'), d.token);
    clock.advance(1);
    assert.equal(broker.outstanding('e'), undefined);
  });

  test('pauseNackTimeout stops the deadline; resumeNackTimeout restarts it in full; reset while paused is a no-op', () => {
    const { broker, clock } = harness({ nackTimeoutMs: 1000 });
    broker.enqueue(ev('job', { id: 'e' }));
    const d = broker.tryDequeue(['service'])!;
    broker.pauseNackTimeout('e', d.token);
    clock.advance(50_000);
    broker.outstandingReset('e', d.token);
    clock.advance(50_000);
    assert.equal(broker.outstanding('e'), d.token);
    broker.resumeNackTimeout('e', d.token);
    clock.advance(999);
    assert.equal(broker.outstanding('e'), d.token);
    clock.advance(1);
    assert.equal(broker.outstanding('e'), undefined);
  });

  test('extendNackDeadline: true resets the deadline instead of nacking; false or a throw nacks', () => {
    const calls: Array<[string, string]> = [];
    let answer: boolean | 'throw' = true;
    const { broker, clock } = harness({
      nackTimeoutMs: 1000,
      extendNackDeadline: (id, token) => {
        calls.push([id, token]);
        if (answer === 'throw') throw new Error('bad heartbeat read');
        return answer;
      },
    });
    const extended: number[] = [];
    broker.events.on('broker:extend', ({ deadline }) => extended.push(deadline));
    broker.enqueue(ev('job', { id: 'e' }));
    broker.enqueue(ev('job2', { id: 'f' }));
    const d = broker.tryDequeue(['service'])!;
    const t0 = clock.now();
    clock.advance(1000);
    assert.deepEqual(calls, [[d.evaluation.id, d.token]]);
    assert.deepEqual(extended, [t0 + 2000]);
    assert.equal(broker.outstanding(d.evaluation.id), d.token);
    answer = false;
    clock.advance(1000);
    assert.equal(broker.outstanding(d.evaluation.id), undefined);
    const d2 = broker.tryDequeue(['service'])!;
    answer = 'throw';
    clock.advance(1000);
    assert.equal(broker.outstanding(d2.evaluation.id), undefined, 'a throwing callback counts as false');
  });

  test('all deadlines share one clock timer', () => {
    const { broker, clock } = harness();
    for (let i = 0; i < 100; i++) broker.enqueue(ev(`job${i}`, i % 2 === 0 ? {} : { wait: 10 + i }));
    for (let i = 0; i < 50; i++) broker.tryDequeue(['service']);
    assert.equal(broker.stats().totalUnacked, 50);
    assert.equal(broker.stats().totalWaiting, 50);
    assert.equal(clock.pendingTimers, 1);
  });
});

describe('tokens', () => {
  test('not outstanding, token mismatch, double ack', () => {
    const { broker } = harness();
    broker.enqueue(ev('job', { id: 'e' }));
    assert.throws(() => broker.ack('nope', 'x'), code('ERR_EVAL_NOT_OUTSTANDING', /"nope"/));
    assert.throws(() => broker.ack('e', 'x'), code('ERR_EVAL_NOT_OUTSTANDING'), 'ready, never dequeued');
    const d = broker.tryDequeue(['service'])!;
    assert.throws(() => broker.ack('e', `${d.token}x`), code('ERR_TOKEN_MISMATCH', /"e"/));
    assert.throws(() => broker.nack('e', 'wrong'), code('ERR_TOKEN_MISMATCH'));
    assert.throws(() => broker.pauseNackTimeout('e', 'wrong'), code('ERR_TOKEN_MISMATCH'));
    assert.throws(() => broker.resumeNackTimeout('e', 'wrong'), code('ERR_TOKEN_MISMATCH'));
    assert.throws(() => broker.outstandingReset('e', 'wrong'), code('ERR_TOKEN_MISMATCH'));
    broker.ack('e', d.token);
    assert.throws(() => broker.ack('e', d.token), code('ERR_EVAL_NOT_OUTSTANDING'));
  });

  test('the token of an explicitly nacked delivery is stale after redelivery', () => {
    const { broker } = harness({ initialNackDelayMs: 0 });
    broker.enqueue(ev('job', { id: 'e' }));
    const d1 = broker.tryDequeue(['service'])!;
    broker.nack('e', d1.token);
    assert.throws(() => broker.nack('e', d1.token), code('ERR_EVAL_NOT_OUTSTANDING'));
    const d2 = broker.tryDequeue(['service'])!;
    assert.throws(() => broker.ack('e', d1.token), code('ERR_TOKEN_MISMATCH'));
    broker.ack('e', d2.token);
  });

  test('tokens from two brokers never collide', () => {
    const a = harness().broker;
    const b = harness().broker;
    a.enqueue(ev('j', { id: 'x' }));
    b.enqueue(ev('j', { id: 'x' }));
    assert.notEqual(a.tryDequeue(['service'])!.token, b.tryDequeue(['service'])!.token);
  });
});

describe('enable, disable, pause', () => {
  test('setEnabled(false) returns every held evaluation, rejects waiters, invalidates tokens, leaves no timer', async () => {
    const { broker, clock } = harness({ deliveryLimit: 1 });
    broker.enqueue(ev('j1', { id: 'ready' }));
    broker.enqueue(ev('j1', { id: 'pending' }));
    broker.enqueue(ev('j2', { id: 'unacked' }));
    broker.enqueue(ev('j3', { id: 'waiting', wait: 1000 }));
    broker.enqueue(ev('j4', { id: 'failed' }));
    broker.enqueue(ev('j5', { id: 'acked' }));
    broker.enqueue(ev('j5', { id: 'cancel-1' }));
    broker.enqueue(ev('j5', { id: 'cancel-2' }));
    broker.enqueue(ev('j5', { id: 'promoted' }));
    const taken = new Map<string, string>();
    for (let d = broker.tryDequeue(['service']); d !== undefined; d = broker.tryDequeue(['service'])) taken.set(d.evaluation.id, d.token);
    broker.nack('failed', taken.get('failed')!);
    broker.ack('acked', taken.get('acked')!);
    broker.nack('ready', taken.get('ready')!); // deliveryLimit 1: to _failed; 'pending' is promoted
    assert.deepEqual(
      ['ready', 'pending', 'unacked', 'waiting', 'failed', 'cancel-1', 'promoted'].map((id) => broker.inspect(id)?.state),
      ['failed', 'ready', 'unacked', 'waiting', 'failed', 'cancelable', 'ready'],
    );
    const waiter = broker.dequeue(['nothing'], 0);
    const flushed = broker.setEnabled(false);
    assert.deepEqual(flushed.map((e) => e.id).sort(), ['cancel-1', 'cancel-2', 'failed', 'pending', 'promoted', 'ready', 'unacked', 'waiting']);
    await assert.rejects(waiter, code('ERR_BROKER_DISABLED'));
    assert.equal(clock.pendingTimers, 0);
    assert.deepEqual(broker.stats(), { totalReady: 0, totalUnacked: 0, totalPending: 0, totalWaiting: 0, totalCancelable: 0, totalFailed: 0, byScheduler: {} });
    assert.throws(() => broker.ack('unacked', taken.get('unacked')!), code('ERR_EVAL_NOT_OUTSTANDING'));
    assert.throws(() => broker.enqueue(ev('j9')), code('ERR_BROKER_DISABLED', /enqueue/));
    await assert.rejects(broker.dequeue(['service'], 10), code('ERR_BROKER_DISABLED', /dequeue/));
    assert.throws(() => broker.tryDequeue(['service']), code('ERR_BROKER_DISABLED'));
    assert.deepEqual(broker.setEnabled(false), [], 'disabling twice flushes nothing');
    assert.deepEqual(broker.setEnabled(true), []);
    broker.enqueue(ev('j1', { id: 'ready' }));
    assert.equal(broker.tryDequeue(['service'])!.evaluation.id, 'ready', 'usable again, old ids forgotten');
  });

  test('pause holds dequeues (keeping their timeouts) while enqueues and deadlines go on; resume serves them', async () => {
    const { broker, clock } = harness({ nackTimeoutMs: 1000 });
    broker.enqueue(ev('j0', { id: 'running' }));
    const running = broker.tryDequeue(['service'])!;
    broker.pause();
    assert.equal(broker.paused, true);
    broker.enqueue(ev('j1', { id: 'a' }));
    assert.equal(broker.tryDequeue(['service']), undefined, 'tryDequeue finds nothing while paused');
    const timesOut = broker.dequeue(['service'], 300);
    const served = broker.dequeue(['service'], 0);
    clock.advance(300);
    assert.equal(await timesOut, undefined, 'the timeout kept running during the pause');
    clock.advance(700);
    assert.equal(broker.outstanding('running'), undefined, 'deadlines fire during a pause');
    assert.throws(() => broker.ack('running', running.token), code('ERR_NACK_TIMEOUT_REACHED'));
    assert.equal(await settled(served), false);
    broker.resume();
    assert.equal((await served)!.evaluation.id, 'a');
    assert.equal(broker.paused, false);
  });

  test('a dequeue callback that pauses the broker stops the serve pass: the next waiter is served on resume', () => {
    const { broker } = harness();
    const got: string[] = [];
    // Both become ready while paused, so that resume() serves both waiters in one pass.
    broker.pause();
    broker.enqueue(ev('j1', { id: 'x' }));
    broker.enqueue(ev('j2', { id: 'y' }));
    broker.dequeueWith(['service'], 0, undefined, (error, d) => {
      assert.equal(error, undefined);
      got.push(`first:${d!.evaluation.id}`);
      broker.pause();
    });
    broker.dequeueWith(['service'], 0, undefined, (error, d) => {
      got.push(`second:${d?.evaluation.id} while ${broker.paused ? 'paused' : 'running'}`);
    });
    broker.resume();
    assert.deepEqual(got, ['first:x'], 'the pause came inside the first callback; y stays ready');
    assert.equal(broker.stats().totalReady, 1);
    broker.resume();
    assert.deepEqual(got, ['first:x', 'second:y while running']);
  });

  test('setEnabled validates its argument', () => {
    const { broker } = harness();
    assert.throws(() => broker.setEnabled('no' as never), code('ERR_INVALID_ARGUMENT', /`enabled`/));
  });
});

describe('events and metrics', () => {
  test('typed events carry the evaluation; a throwing listener breaks nothing', () => {
    const { broker } = harness();
    const seen: string[] = [];
    broker.events.on('broker:enqueue', () => {
      throw new Error('listener bug');
    });
    broker.events.on('broker:enqueue', ({ evaluation }) => seen.push(`enqueue:${evaluation.id}`));
    broker.events.on('broker:dequeue', ({ evaluation, deliveries, queue }) => seen.push(`dequeue:${evaluation.id}:${queue}:${deliveries}`));
    broker.events.on('broker:ack', ({ evaluation }) => seen.push(`ack:${evaluation.id}`));
    broker.enqueue(ev('job', { id: 'e' }));
    const d = broker.tryDequeue(['service'])!;
    broker.ack('e', d.token);
    assert.deepEqual(seen, ['enqueue:e', 'dequeue:e:service:1', 'ack:e']);
  });

  test('Prometheus output: gauges at scrape time, latency histograms per type', async () => {
    const { broker, clock, registry } = harness();
    broker.enqueue(ev('j1', { id: 'a' }));
    broker.enqueue(ev('j2', { id: 'b' }));
    broker.enqueue(ev('j2', { id: 'c' }));
    clock.advance(30);
    const d = broker.tryDequeue(['service'])!;
    clock.advance(2000);
    broker.ack(d.evaluation.id, d.token);
    const text = await registry.metrics();
    assert.match(text, /^tickpool_broker_total_ready 1$/m);
    assert.match(text, /^tickpool_broker_total_pending 1$/m);
    assert.match(text, /^tickpool_broker_total_unacked 0$/m);
    assert.match(text, /^tickpool_broker_ready\{type="service"\} 1$/m);
    assert.match(text, /^tickpool_broker_wait_time_seconds_bucket\{le="0.025",type="service"\} 0$/m);
    assert.match(text, /^tickpool_broker_wait_time_seconds_bucket\{le="0.05",type="service"\} 1$/m);
    assert.match(text, /^tickpool_broker_wait_time_seconds_sum\{type="service"\} 0.03$/m);
    assert.match(text, /^tickpool_broker_process_time_seconds_bucket\{le="2.5",type="service"\} 1$/m);
    assert.match(text, /^tickpool_broker_process_time_seconds_bucket\{le="1",type="service"\} 0$/m);
    assert.match(text, /^tickpool_broker_response_time_seconds_count\{type="service"\} 1$/m);
    assert.match(text, /^tickpool_broker_response_time_seconds_bucket\{le="\+Inf",type="service"\} 1$/m);
    registry.resetMetrics();
    assert.match(await registry.metrics(), /^tickpool_broker_response_time_seconds_count\{type="service"\} 0$/m);
  });

  test('two brokers on one registry: gauges add up', async () => {
    const first = harness();
    const second = harness({ registry: first.registry });
    first.broker.enqueue(ev('j1'));
    second.broker.enqueue(ev('j1'));
    second.broker.enqueue(ev('j2'));
    assert.match(await first.registry.metrics(), /^tickpool_broker_total_ready 3$/m);
  });

  test('an evaluation failed again while dequeued from _failed is counted in failed_total once', async () => {
    const { broker, registry } = harness();
    broker.enqueue(ev('j1', { id: 'e' }));
    const d = broker.tryDequeue(['service'])!;
    broker.fail('e', d.token, new Error('first'));
    for (let i = 0; i < 3; i++) {
      const again = broker.tryDequeue([FAILED_QUEUE])!;
      broker.fail('e', again.token, new Error(`again ${i}`));
    }
    assert.equal(broker.stats().totalFailed, 1);
    assert.match(await registry.metrics(), /^tickpool_broker_failed_total\{type="service"\} 1$/m);
  });

  test('a random source that returns NaN or out of [0, 1) still picks one of the tied queues', () => {
    for (const value of [Number.NaN, -1, 1, 7]) {
      const { broker } = harness({ random: () => value });
      broker.enqueue(ev('j1', { id: 'a', type: 'a' }));
      broker.enqueue(ev('j2', { id: 'b', type: 'b' }));
      const d = broker.tryDequeue(['a', 'b']);
      assert.ok(d !== undefined && ['a', 'b'].includes(d.evaluation.id), `random() = ${value} dequeued ${d?.evaluation.id}`);
    }
  });

  test('nack and failure counters', async () => {
    const { broker, clock, registry } = harness({ deliveryLimit: 2, nackTimeoutMs: 10, initialNackDelayMs: 0 });
    broker.enqueue(ev('j1', { id: 'e' }));
    const d = broker.tryDequeue(['service'])!;
    broker.nack('e', d.token);
    broker.tryDequeue(['service']);
    clock.advance(10);
    const text = await registry.metrics();
    assert.match(text, /^tickpool_broker_nacks_total\{type="service"\} 2$/m);
    assert.match(text, /^tickpool_broker_nack_timeouts_total\{type="service"\} 1$/m);
    assert.match(text, /^tickpool_broker_failed_total\{type="service"\} 1$/m);
    assert.match(text, /^tickpool_broker_total_failed 1$/m);
  });
});
