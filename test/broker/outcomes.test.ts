/**
 * Outcomes at the broker: every place the broker settles an evaluation settles its handle (ack, `_failed`,
 * superseded, removed, given up, flushed), once, and a handle nobody awaits never reports an unhandled rejection.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FAILED_QUEUE } from '../../src/broker/evaluation.js';
import { AbortedError, BrokerDisabledError, DeliveryLimitError, InvalidStateError, PlanAttemptsExhaustedError, SupersededError, TickpoolError } from '../../src/errors.js';
import { code, ev, harness, settled } from './helpers.js';

/** Collects unhandled rejections while `body` runs and a few turns after it. */
async function unhandledDuring(body: () => void | Promise<void>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const listener = (reason: unknown): void => void seen.push(reason);
  process.on('unhandledRejection', listener);
  try {
    await body();
    for (let i = 0; i < 3; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  } finally {
    process.off('unhandledRejection', listener);
  }
  return seen;
}

describe('handles', () => {
  test('enqueue returns a handle; an id the broker holds returns a handle of the same evaluation (same id, same done)', async () => {
    const { broker } = harness();
    const e = ev('job', { id: 'h1' });
    const handle = broker.enqueue(e);
    assert.equal(handle.id, 'h1');
    assert.equal(await handle.accepted, undefined, 'in memory the evaluation is held at once');
    const again = broker.enqueue({ ...e });
    assert.equal(again.id, 'h1');
    assert.equal(again.done, handle.done, 'one outcome per evaluation, whichever handle reads it');
    const d = broker.tryDequeue(['service'])!;
    assert.equal(broker.enqueue(e).done, handle.done, 'also while it is in flight');
    broker.ack(e.id, d.token);
    const fresh = broker.enqueue(e);
    assert.notEqual(fresh.done, handle.done, 'an acked id is new work with a new outcome');
    assert.equal((await handle.done).id, 'h1');
    assert.equal(await settled(fresh.done), false, 'the new work is pending');
  });

  test('an ack resolves done with the value, index and attempts it reports and the deliveries so far', async () => {
    const { broker, clock } = harness({ initialNackDelayMs: 0 });
    const handle = broker.enqueue(ev('job', { id: 'a' }));
    const first = broker.tryDequeue(['service'])!;
    broker.nack('a', first.token, new Error('once'));
    clock.advance(0);
    const second = broker.tryDequeue(['service'])!;
    assert.equal(await settled(handle.done), false, 'pending while it is in the broker');
    broker.ack('a', second.token, { value: { answer: 42 }, index: 7, attempts: 2 });
    assert.deepEqual(await handle.done, { id: 'a', status: 'acked', value: { answer: 42 }, index: 7, attempts: 2, deliveries: 2 });
  });

  test('done read only after the ack still resolves; an ack without a result has the defaults', async () => {
    const { broker } = harness();
    const handle = broker.enqueue(ev('job', { id: 'late' }));
    const d = broker.tryDequeue(['service'])!;
    broker.ack('late', d.token);
    assert.deepEqual(await handle.done, { id: 'late', status: 'acked', value: undefined, index: 0, attempts: 1, deliveries: 1 });
  });

  test('done read only after a plain ack (no value, one attempt) has its index and the deliveries it took', async () => {
    const { broker, clock } = harness({ initialNackDelayMs: 0 });
    const handle = broker.enqueue(ev('job', { id: 'plain' }));
    broker.nack('plain', broker.tryDequeue(['service'])!.token, new Error('once'));
    clock.advance(0);
    broker.ack('plain', broker.tryDequeue(['service'])!.token, { index: 9 });
    // Another handle of the same evaluation, read first: one outcome.
    const again = await handle.done;
    assert.deepEqual(again, { id: 'plain', status: 'acked', value: undefined, index: 9, attempts: 1, deliveries: 2 });
    assert.equal(await handle.done, again);
  });

  test('a bad ack result is refused with a typed error and the delivery stays outstanding', () => {
    const { broker } = harness();
    broker.enqueue(ev('job', { id: 'r' }));
    const d = broker.tryDequeue(['service'])!;
    assert.throws(() => broker.ack('r', d.token, { index: -1 }), code('ERR_INVALID_ARGUMENT', /index/));
    assert.throws(() => broker.ack('r', d.token, { attempts: 0 }), code('ERR_INVALID_ARGUMENT', /attempts/));
    assert.throws(() => broker.ack('r', d.token, 'yes' as never), code('ERR_INVALID_ARGUMENT', /result/));
    assert.throws(() => broker.ack('r', d.token, { valu: 1 } as never), code('ERR_INVALID_ARGUMENT', /valu/));
    assert.equal(broker.outstanding('r'), d.token);
  });

  test('past the delivery limit done rejects with DeliveryLimitError, the last error as its cause', async () => {
    const { broker, clock } = harness({ deliveryLimit: 2, initialNackDelayMs: 0, subsequentNackDelayMs: 0 });
    const handle = broker.enqueue(ev('job', { id: 'f' }));
    broker.nack('f', broker.tryDequeue(['service'])!.token, new Error('first'));
    clock.advance(0);
    const last = new Error('second');
    broker.nack('f', broker.tryDequeue(['service'])!.token, last);
    assert.equal(broker.inspect('f')?.state, 'failed');
    const error = await handle.done.then(() => undefined, (e: unknown) => e);
    assert.ok(error instanceof DeliveryLimitError);
    assert.equal(error.cause, last);
    // Reaping it from `_failed` later changes nothing: the outcome was known when it got there.
    broker.ack('f', broker.tryDequeue([FAILED_QUEUE])!.token, { value: 'too late' });
    assert.equal(await handle.done.then(() => 'resolved', (e: unknown) => e), error);
  });

  test('fail() rejects done with its reason', async () => {
    const { broker } = harness();
    const handle = broker.enqueue(ev('job', { id: 'p' }));
    const reason = new PlanAttemptsExhaustedError('p', 5, 'conflicts');
    broker.fail('p', broker.tryDequeue(['service'])!.token, reason);
    await assert.rejects(handle.done, (e) => e === reason);
  });

  test('superseded pending evaluations reject with SupersededError naming the promoted one', async () => {
    const { broker } = harness();
    broker.enqueue(ev('job', { id: 'holder' }));
    const d = broker.tryDequeue(['service'])!;
    const older = broker.enqueue(ev('job', { id: 'older', modifyIndex: 1 }));
    const newest = broker.enqueue(ev('job', { id: 'newest', modifyIndex: 3 }));
    const middle = broker.enqueue(ev('job', { id: 'middle', modifyIndex: 2 }));
    broker.ack('holder', d.token);
    assert.equal(broker.inspect('newest')?.state, 'ready');
    for (const handle of [older, middle]) {
      await assert.rejects(handle.done, (e: unknown) => e instanceof SupersededError && e.code === 'ERR_SUPERSEDED' && e.supersededBy === 'newest' && e.evalId === handle.id);
    }
    assert.equal(await settled(newest.done), false);
    assert.deepEqual(broker.drainCancelable().map((e) => e.id).sort(), ['middle', 'older']);
  });

  test('no unhandled rejection when nobody awaits done, read or not', async () => {
    const { broker } = harness({ deliveryLimit: 1 });
    const seen = await unhandledDuring(() => {
      broker.enqueue(ev('j1', { id: 'never-read' }));
      const read = broker.enqueue(ev('j2', { id: 'read' }));
      void read.done;
      for (const id of ['never-read', 'read']) broker.nack(id, broker.tryDequeue(['service'])!.token, new Error('no'));
      const { done } = broker.enqueue(ev('j3', { id: 'destructured' }));
      void done;
      broker.fail('destructured', broker.tryDequeue(['service'])!.token, new Error('no'));
    });
    assert.deepEqual(seen, []);
  });

  test('rejectOutcomes gives up every open outcome with its error and leaves the evaluations where they are', async () => {
    const { broker } = harness();
    const inFlight = broker.enqueue(ev('j2', { id: 'unacked' }));
    broker.tryDequeue(['service']);
    const ready = broker.enqueue(ev('j1', { id: 'ready' }));
    const waiting = broker.enqueue(ev('j3', { id: 'waiting', wait: 1000 }));
    const made: string[] = [];
    broker.rejectOutcomes((evaluation) => {
      made.push(evaluation.id);
      return new InvalidStateError(`engine stopped with ${evaluation.id} in the broker`);
    });
    assert.deepEqual(made, [], 'the errors are made only for outcomes someone reads');
    for (const handle of [ready, inFlight, waiting]) await assert.rejects(handle.done, (e: unknown) => e instanceof InvalidStateError && e.message.includes(handle.id));
    assert.deepEqual(made.sort(), ['ready', 'unacked', 'waiting']);
    assert.equal(broker.inspect('ready')?.state, 'ready');
    assert.equal(broker.inspect('unacked')?.state, 'unacked');
    assert.equal(broker.inspect('waiting')?.state, 'waiting');
  });

  test('disabling the broker rejects the outcomes of what it flushed with BrokerDisabledError', async () => {
    const { broker } = harness();
    const handle = broker.enqueue(ev('job', { id: 'flushed' }));
    broker.setEnabled(false);
    await assert.rejects(handle.done, BrokerDisabledError);
  });
});

describe('remove', () => {
  test('a ready evaluation is removed: AbortedError, counts and queue as if it never was', async () => {
    const { broker } = harness();
    const handle = broker.enqueue(ev('j1', { id: 'a' }));
    broker.enqueue(ev('j2', { id: 'b' }));
    const removed: string[] = [];
    broker.events.on('broker:remove', ({ evaluation, state }) => removed.push(`${evaluation.id} ${state}`));
    const cause = new Error('the caller gave up');
    assert.equal(broker.remove('a', undefined, cause), true);
    assert.deepEqual(removed, ['a ready']);
    assert.equal(broker.inspect('a'), undefined);
    assert.equal(broker.stats().totalReady, 1);
    assert.deepEqual(broker.stats().byScheduler, { service: { ready: 1, unacked: 0 } });
    await assert.rejects(handle.done, (e: unknown) => e instanceof AbortedError && e.code === 'ERR_ABORTED' && e.cause === cause);
    assert.equal(broker.tryDequeue(['service'])?.evaluation.id, 'b');
    assert.equal(broker.tryDequeue(['service']), undefined);
    assert.equal(broker.remove('a'), false, 'an id the broker does not hold: nothing to remove');
  });

  test('removing the job holder promotes its best pending evaluation; the others stay pending', () => {
    const { broker } = harness();
    broker.enqueue(ev('job', { id: 'holder' }));
    broker.enqueue(ev('job', { id: 'p1', modifyIndex: 1 }));
    broker.enqueue(ev('job', { id: 'p2', modifyIndex: 2 }));
    broker.remove('holder');
    assert.equal(broker.inspect('p2')?.state, 'ready');
    assert.equal(broker.inspect('p2')?.holdsJobSlot, true);
    assert.equal(broker.inspect('p1')?.state, 'pending');
    assert.equal(broker.stats().totalPending, 1);
  });

  test('a pending, a waiting and a nacked-and-waiting evaluation are removed, and the job slot follows', () => {
    const { broker, clock } = harness();
    broker.enqueue(ev('job', { id: 'holder' }));
    broker.enqueue(ev('job', { id: 'pending' }));
    assert.equal(broker.remove('pending'), true);
    assert.equal(broker.stats().totalPending, 0);
    broker.enqueue(ev('other', { id: 'delayed', wait: 500 }));
    assert.equal(broker.remove('delayed'), true);
    assert.equal(broker.stats().totalWaiting, 0);
    clock.advance(1000);
    assert.equal(broker.inspect('delayed'), undefined, 'its due time passes without it');
    const d = broker.tryDequeue(['service'])!;
    broker.enqueue(ev('job', { id: 'next' }));
    broker.nack('holder', d.token);
    assert.equal(broker.inspect('holder')?.state, 'waiting');
    broker.remove('holder');
    assert.equal(broker.inspect('next')?.state, 'ready', 'the retry held the slot; its removal frees it');
    assert.deepEqual({ ...broker.stats(), byScheduler: undefined }, { totalReady: 1, totalUnacked: 0, totalPending: 0, totalWaiting: 0, totalCancelable: 0, totalFailed: 0, byScheduler: undefined });
  });

  test('an evaluation in flight is removed only with its current token', async () => {
    const { broker, clock } = harness({ nackTimeoutMs: 100, initialNackDelayMs: 10_000 });
    const handle = broker.enqueue(ev('job', { id: 'u' }));
    const d = broker.tryDequeue(['service'])!;
    assert.throws(() => broker.remove('u'), code('ERR_TOKEN_MISMATCH'));
    assert.throws(() => broker.remove('u', 'not-the-token'), code('ERR_TOKEN_MISMATCH'));
    assert.throws(() => broker.remove('u', 42 as never), code('ERR_INVALID_ARGUMENT'));
    assert.throws(() => broker.remove('', d.token), code('ERR_INVALID_ARGUMENT'));
    assert.equal(broker.outstanding('u'), d.token, 'a refused removal changes nothing');
    clock.advance(100);
    assert.throws(() => broker.remove('u', d.token), code('ERR_NACK_TIMEOUT_REACHED'), 'the deadline won');
    const again = broker.tryDequeue(['service']);
    assert.equal(again, undefined, 'waiting out its nack delay');
    clock.advance(10_000);
    const current = broker.tryDequeue(['service'])!;
    assert.equal(broker.remove('u', current.token), true);
    assert.deepEqual({ ...broker.stats(), byScheduler: undefined }, { totalReady: 0, totalUnacked: 0, totalPending: 0, totalWaiting: 0, totalCancelable: 0, totalFailed: 0, byScheduler: undefined });
    assert.throws(() => broker.ack('u', current.token), code('ERR_EVAL_NOT_OUTSTANDING'));
    await assert.rejects(handle.done, AbortedError);
  });

  test('a ready evaluation removed with a token it does not have is refused', () => {
    const { broker } = harness();
    broker.enqueue(ev('job', { id: 'r' }));
    assert.throws(() => broker.remove('r', 'some-token'), code('ERR_EVAL_NOT_OUTSTANDING'));
    assert.equal(broker.inspect('r')?.state, 'ready');
  });

  test('removing a failed or superseded evaluation keeps the outcome it already had', async () => {
    const { broker } = harness();
    const failed = broker.enqueue(ev('j1', { id: 'failed' }));
    broker.fail('failed', broker.tryDequeue(['service'])!.token, new Error('bad'));
    broker.enqueue(ev('j2', { id: 'holder' }));
    const d = broker.tryDequeue(['service'])!;
    const superseded = broker.enqueue(ev('j2', { id: 's1' }));
    broker.enqueue(ev('j2', { id: 's2' }));
    broker.ack('holder', d.token);
    assert.equal(broker.remove('failed'), true);
    assert.equal(broker.remove('s1'), true);
    assert.equal(broker.stats().totalFailed, 0);
    assert.equal(broker.stats().totalCancelable, 0);
    assert.deepEqual(broker.drainCancelable(), []);
    await assert.rejects(failed.done, /bad/);
    await assert.rejects(superseded.done, SupersededError);
  });
});

describe('evaluation defaults', () => {
  test('id, jobId and priority default to a random id, the id, and 50', () => {
    const { broker } = harness();
    const handle = broker.enqueue({ type: 'service', payload: 1 });
    assert.match(handle.id, /^[0-9a-f-]{36}$/);
    const d = broker.tryDequeue(['service'])!;
    assert.deepEqual(d.evaluation, { id: handle.id, jobId: handle.id, type: 'service', priority: 50, payload: 1 });
    const other = broker.enqueue({ type: 'service' });
    assert.notEqual(other.id, handle.id);
    assert.equal(broker.tryDequeue(['service'])!.evaluation.id, other.id);
    const given = { id: 'mine', jobId: 'j', type: 'service', priority: 90 };
    broker.enqueue(given);
    broker.enqueue({ id: 'x', type: 'service', jobId: undefined, priority: undefined });
    assert.equal(broker.tryDequeue(['service'])!.evaluation, given, 'a complete evaluation is not copied');
  });

  test('a default never hides bad input', () => {
    const { broker } = harness();
    assert.throws(() => broker.enqueue({ id: '', type: 'service' }), code('ERR_INVALID_EVALUATION', /evaluation\.id/));
    assert.throws(() => broker.enqueue({ type: 'service', jobId: null } as never), code('ERR_INVALID_EVALUATION', /evaluation\.jobId/));
    assert.throws(() => broker.enqueue({ type: 'service', priority: 0 }), code('ERR_INVALID_EVALUATION', /priority/));
    assert.throws(() => broker.enqueue({ type: 'service', extra: 1 } as never), code('ERR_INVALID_EVALUATION', /evaluation\.extra/));
    assert.throws(() => broker.enqueue(null as never), (e: unknown) => e instanceof TickpoolError && e.code === 'ERR_INVALID_EVALUATION');
    assert.equal(broker.stats().totalReady, 0);
  });
});
