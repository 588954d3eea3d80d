/**
 * One broker suite, two backends: the rules every `BrokerBackend` keeps (the Nomad rules), run against the in-memory
 * broker and against the PostgreSQL broker on a real database. Every call is awaited, so the same test reads either
 * answer form (a value, or a promise).
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import type { BrokerBackend } from '../../../src/backend/broker-backend.js';
import type { BrokerEvents } from '../../../src/broker/broker-events.js';
import { FAILED_QUEUE } from '../../../src/broker/evaluation.js';
import { AbortedError, DeliveryLimitError, SupersededError, TickpoolError, UnknownSchedulerError } from '../../../src/errors.js';
import { requireDatabaseInCI } from '../helpers.js';
import { settings, subjects, type Subject } from './subjects.js';

requireDatabaseInCI();

const code = (expected: string) => (error: unknown) => error instanceof TickpoolError && error.code === expected;

let counter = 0;
const ev = (jobId: string, extra: Record<string, unknown> = {}) => ({ id: `ev-${++counter}`, jobId, type: 'service', priority: 50, ...extra });

for (const factory of subjects) {
  describe(`broker contract: ${factory.name}`, { skip: factory.skip }, () => {
    let subject: Subject;
    let broker: BrokerBackend;
    const open = async (): Promise<void> => {
      subject = await factory.make();
      broker = subject.backend.broker;
    };
    afterEach(async () => subject?.close());

    /** Dequeues one delivery (waits: a shared broker fetches when asked). */
    const take = async (types = ['service']) => {
      const d = await broker.dequeue(types, 0);
      assert.ok(d !== undefined);
      return d;
    };

    test('a cycle: ready → unacked (its token outstanding) → acked, and done resolves with the outcome', async () => {
      await open();
      const e = ev('job');
      const handle = broker.enqueue(e);
      await handle.accepted;
      assert.deepEqual(await broker.inspect(e.id), { state: 'ready', queue: 'service', deliveries: 0, holdsJobSlot: true });
      const d = await take();
      assert.equal(d.evaluation.id, e.id);
      assert.equal(await broker.outstanding(e.id), d.token);
      assert.deepEqual(await broker.inspect(e.id), { state: 'unacked', queue: 'service', deliveries: 1, holdsJobSlot: true });
      await broker.ack(e.id, d.token, { value: { answer: 42 }, index: 7, attempts: 2 });
      assert.equal(await broker.inspect(e.id), undefined);
      assert.equal(await broker.outstanding(e.id), undefined);
      assert.deepEqual(await handle.done, { id: e.id, status: 'acked', value: { answer: 42 }, index: 7, attempts: 2, deliveries: 1 });
    });

    test('an id held in any state is not admitted twice; an acked id is new work again', async () => {
      await open();
      const e = ev('job', { id: 'same' });
      await broker.enqueue(e).accepted;
      await broker.enqueue({ ...e, priority: 99 }).accepted;
      assert.equal((await broker.stats()).totalReady, 1);
      const d = await take();
      await broker.enqueue(e).accepted;
      assert.equal((await broker.stats()).totalReady, 0, 'not re-added while unacked');
      await broker.ack(e.id, d.token);
      await broker.enqueue(e).accepted;
      assert.deepEqual(await broker.inspect('same'), { state: 'ready', queue: 'service', deliveries: 0, holdsJobSlot: true });
    });

    test('one per job: newer evaluations wait pending; an ack promotes the best and supersedes the rest', async () => {
      await open();
      const first = broker.enqueue(ev('job', { id: 'first' }));
      const low = broker.enqueue(ev('job', { id: 'low', priority: 10, modifyIndex: 9 }));
      const older = broker.enqueue(ev('job', { id: 'older', priority: 60, modifyIndex: 3 }));
      const best = broker.enqueue(ev('job', { id: 'best', priority: 60, modifyIndex: 5 }));
      await Promise.all([first, low, older, best].map((h) => h.accepted));
      assert.equal((await broker.inspect('low'))?.state, 'pending');
      const stats = await broker.stats();
      assert.deepEqual([stats.totalReady, stats.totalPending], [1, 3]);
      const d = await take();
      assert.equal(d.evaluation.id, 'first');
      assert.equal((await broker.stats()).totalReady, 0, 'the job’s one slot is unacked: nothing else of it is ready');
      await broker.ack('first', d.token);
      assert.deepEqual(await broker.inspect('best'), { state: 'ready', queue: 'service', deliveries: 0, holdsJobSlot: true });
      assert.equal((await broker.inspect('older'))?.state, 'cancelable');
      assert.equal((await broker.stats()).totalCancelable, 2);
      for (const h of [low, older]) {
        await assert.rejects(h.done, (e: unknown) => e instanceof SupersededError && e.supersededBy === 'best');
      }
    });

    test('ready order: higher priority first, FIFO by createIndex, then by enqueue order', async () => {
      await open();
      for (const [job, id, priority, createIndex] of [
        ['a', 'low', 10, undefined],
        ['b', 'late-index', 50, 9],
        ['c', 'early-index', 50, 3],
        ['d', 'high', 90, undefined],
      ] as const) {
        await broker.enqueue(ev(job, { id, priority, ...(createIndex === undefined ? {} : { createIndex }) })).accepted;
      }
      const order: string[] = [];
      for (let i = 0; i < 4; i++) order.push((await take()).evaluation.id);
      assert.deepEqual(order, ['high', 'early-index', 'late-index', 'low']);
    });

    test('a token that is not the current delivery’s is refused with a typed error, and changes nothing', async () => {
      await open();
      const e = ev('job');
      await broker.enqueue(e).accepted;
      const d = await take();
      await assert.rejects(async () => broker.ack(e.id, 'not-the-token'), code('ERR_TOKEN_MISMATCH'));
      await assert.rejects(async () => broker.nack(e.id, 'not-the-token'), code('ERR_TOKEN_MISMATCH'));
      await assert.rejects(async () => broker.ack('no-such-id', d.token), code('ERR_EVAL_NOT_OUTSTANDING'));
      assert.equal(await broker.outstanding(e.id), d.token);
      await broker.ack(e.id, d.token);
      await assert.rejects(async () => broker.ack(e.id, d.token), code('ERR_EVAL_NOT_OUTSTANDING'));
    });

    test('a nack waits out its delay and is redelivered with a fresh token; at the delivery limit it goes to _failed', async () => {
      await open();
      const e = ev('job');
      const handle = broker.enqueue(e);
      await handle.accepted;
      const d1 = await take();
      await broker.nack(e.id, d1.token, new Error('first'));
      assert.deepEqual(await broker.inspect(e.id), { state: 'waiting', queue: undefined, deliveries: 1, holdsJobSlot: true });
      await subject.advance(settings.initialNackDelayMs);
      assert.equal((await broker.inspect(e.id))?.state, 'ready');
      const d2 = await take();
      assert.notEqual(d2.token, d1.token);
      await broker.nack(e.id, d2.token, new Error('second'));
      assert.deepEqual(await broker.inspect(e.id), { state: 'failed', queue: FAILED_QUEUE, deliveries: 2, holdsJobSlot: false });
      assert.equal((await broker.stats()).totalFailed, 1);
      await assert.rejects(handle.done, (error: unknown) => {
        assert.ok(error instanceof DeliveryLimitError);
        assert.equal((error.cause as Error).message, 'second');
        return true;
      });
    });

    test('a lease that runs out is redelivered and counts; the late ack loses with ERR_NACK_TIMEOUT_REACHED', async () => {
      await open();
      const nacks: BrokerEvents['broker:nack'][] = [];
      broker.events.on('broker:nack', (n) => nacks.push(n));
      const e = ev('job');
      await broker.enqueue(e).accepted;
      const d1 = await take();
      await subject.advance(settings.nackTimeoutMs);
      assert.deepEqual(await broker.inspect(e.id), { state: 'waiting', queue: undefined, deliveries: 1, holdsJobSlot: true });
      assert.ok(nacks.some((n) => n.token === d1.token && n.timedOut), 'the holder was told its delivery timed out');
      await assert.rejects(async () => broker.ack(e.id, d1.token), code('ERR_NACK_TIMEOUT_REACHED'));
      await subject.advance(settings.initialNackDelayMs);
      const d2 = await take();
      assert.equal(d2.evaluation.id, e.id);
      assert.deepEqual(await broker.inspect(e.id), { state: 'unacked', queue: 'service', deliveries: 2, holdsJobSlot: true });
    });

    test('a failed holder gives up its job’s slot: the best pending is promoted, the others stay pending', async () => {
      await open();
      const held = broker.enqueue(ev('job', { id: 'held' }));
      await held.accepted;
      await broker.enqueue(ev('job', { id: 'p1', modifyIndex: 1 })).accepted;
      await broker.enqueue(ev('job', { id: 'p2', modifyIndex: 2 })).accepted;
      const d = await take();
      await broker.fail('held', d.token, new TickpoolError('no scheduler wanted it'));
      await assert.rejects(held.done, /no scheduler wanted it/);
      assert.equal((await broker.inspect('held'))?.state, 'failed');
      assert.equal((await broker.inspect('p2'))?.state, 'ready');
      assert.equal((await broker.inspect('p1'))?.state, 'pending');
    });

    test('remove: one not in flight without a token, one in flight only with its token; unknown ids answer false', async () => {
      await open();
      const ready = broker.enqueue(ev('j1', { id: 'r' }));
      await ready.accepted;
      assert.equal(await broker.remove('r', undefined, new Error('gone')), true);
      await assert.rejects(ready.done, (e: unknown) => e instanceof AbortedError && (e.cause as Error).message === 'gone');
      assert.equal(await broker.inspect('r'), undefined);
      await broker.enqueue(ev('j2', { id: 'f' })).accepted;
      const d = await take();
      await assert.rejects(async () => broker.remove('f'), code('ERR_TOKEN_MISMATCH'));
      assert.equal(await broker.remove('f', d.token), true);
      assert.equal(await broker.remove('nothing-here'), false);
      assert.equal((await broker.stats()).totalUnacked, 0);
    });

    test('an unregistered type is failed at admission; delayed evaluations wait without taking their job’s slot', async () => {
      await open();
      const unknown = broker.enqueue(ev('u', { type: 'nobody-runs-this' }));
      await unknown.accepted;
      await assert.rejects(unknown.done, (e: unknown) => e instanceof UnknownSchedulerError);
      assert.equal((await broker.inspect(unknown.id))?.state, 'failed');
      const later = broker.enqueue(ev('d', { wait: 50_000 }));
      await later.accepted;
      assert.deepEqual(await broker.inspect(later.id), { state: 'waiting', queue: undefined, deliveries: 0, holdsJobSlot: false });
      await subject.advance(50_000);
      assert.deepEqual(await broker.inspect(later.id), { state: 'ready', queue: 'service', deliveries: 0, holdsJobSlot: true });
    });

    test('a dequeue that finds nothing times out with undefined, and an aborted one rejects with ERR_ABORTED', async () => {
      await open();
      const waiting = broker.dequeue(['service'], 5_000);
      await subject.advance(5_000);
      assert.equal(await waiting, undefined);
      const controller = new AbortController();
      const aborted = broker.dequeue(['service'], 0, controller.signal);
      controller.abort();
      await assert.rejects(aborted, code('ERR_ABORTED'));
    });

    test('a waiting dequeue is served by an enqueue that comes later', async () => {
      await open();
      const waiting = broker.dequeue(['a', 'b'], 0);
      const e = ev('late', { type: 'b' });
      broker.enqueue(e);
      const d = await waiting;
      assert.equal(d?.evaluation.id, e.id);
    });

    test('bad input is refused synchronously with typed errors, and nothing is admitted', async () => {
      await open();
      assert.throws(() => broker.enqueue({ id: 'x', jobId: 'j', type: 'service', priority: 0 }), code('ERR_INVALID_EVALUATION'));
      assert.throws(() => broker.enqueue({ id: 'x', jobId: 'j', type: 'service', payload: { f: () => 1 } }), code('ERR_INVALID_EVALUATION'));
      assert.throws(() => broker.tryDequeue([]), code('ERR_INVALID_ARGUMENT'));
      assert.throws(() => broker.ack('', 't'), code('ERR_INVALID_ARGUMENT'));
      await assert.rejects(broker.dequeue(['service'], -1), code('ERR_INVALID_ARGUMENT'));
      const stats = await broker.stats();
      assert.equal(stats.totalReady + stats.totalFailed, 0);
    });
  });
}
