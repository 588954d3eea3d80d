/**
 * What `EvalBroker` adds as the in-memory `BrokerBackend`: a lease keeper asked before a nack deadline fires, batch
 * dequeues, the fence check of a plan commit, and the payload limit checked by the broker itself.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LeaseKeeper } from '../../src/backend/broker-backend.js';
import { EvalBroker } from '../../src/broker/eval-broker.js';
import { InvalidOptionError, PayloadTooLargeError } from '../../src/errors.js';
import { code, ev, harness, settled, silentLogger } from './helpers.js';

function keeper(answer: () => boolean | number): LeaseKeeper & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    leaseProgress: (id, token) => {
      asked.push(`${id} ${token}`);
      return answer();
    },
  };
}

test('a lease keeper is asked before a nack deadline fires, in place of extendNackDeadline', () => {
  const fromOption: string[] = [];
  const { broker, clock } = harness({ nackTimeoutMs: 1000, extendNackDeadline: (id) => (fromOption.push(id), false) });
  let answer: boolean | number = true;
  const k = keeper(() => answer);
  broker.keepLeases(k);
  const extended: number[] = [];
  broker.events.on('broker:extend', ({ deadline }) => extended.push(deadline));
  broker.enqueue(ev('j1', { id: 'e1' }));
  const delivery = broker.tryDequeue(['service'])!;
  const start = clock.now();
  clock.advance(1000);
  assert.deepEqual(k.asked, [`e1 ${delivery.token}`]);
  assert.deepEqual(extended, [start + 2000], 'true: extended from now');
  answer = start + 1500; // progress at t+1500: the lease runs to t+2500
  clock.advance(1000);
  assert.deepEqual(extended, [start + 2000, start + 2500]);
  answer = false;
  clock.advance(500);
  assert.equal(broker.inspect('e1')?.state, 'waiting', 'false: the lease ended and the delivery was nacked');
  assert.deepEqual(fromOption, [], 'the option was not asked while a keeper is registered');
  // Without a keeper the option answers again.
  broker.keepLeases(undefined);
  clock.advance(1000); // the nack delay
  broker.tryDequeue(['service']);
  clock.advance(1000);
  assert.deepEqual(fromOption, ['e1']);
});

test('a lease keeper that throws counts as false: the delivery is nacked, the broker carries on', () => {
  const { broker, clock } = harness({ nackTimeoutMs: 1000 });
  broker.keepLeases(
    keeper(() => {
      throw new Error('keeper broke');
    }),
  );
  broker.enqueue(ev('j1', { id: 'e1' }));
  broker.tryDequeue(['service']);
  clock.advance(1000);
  assert.equal(broker.inspect('e1')?.state, 'waiting');
  assert.throws(() => broker.keepLeases({} as never), code('ERR_INVALID_ARGUMENT', /`keeper`/));
  assert.throws(() => broker.keepLeases(null as never), code('ERR_INVALID_ARGUMENT', /`keeper`/));
});

test('dequeueMany takes what is ready, best first, up to max, each delivery with its own token', async () => {
  const { broker } = harness();
  broker.enqueue(ev('a', { id: 'low', priority: 10 }));
  broker.enqueue(ev('b', { id: 'high', priority: 90 }));
  broker.enqueue(ev('c', { id: 'mid', priority: 50 }));
  const batch = await broker.dequeueMany(['service'], 2, 0);
  assert.deepEqual(
    batch.map((d) => d.evaluation.id),
    ['high', 'mid'],
  );
  assert.notEqual(batch[0]!.token, batch[1]!.token);
  for (const d of batch) assert.equal(broker.outstanding(d.evaluation.id), d.token);
  assert.equal(broker.inspect('low')?.state, 'ready', 'past max: left ready');
  const rest = await broker.dequeueMany(['service'], 10, 0);
  assert.deepEqual(
    rest.map((d) => d.evaluation.id),
    ['low'],
  );
});

test('dequeueMany waits for the first, resolves none on timeout, and rejects a bad max', async () => {
  const { broker, clock } = harness();
  const waiting = broker.dequeueMany(['service'], 5, 0);
  assert.equal(await settled(waiting), false, 'nothing ready: it waits');
  broker.enqueue(ev('a', { id: 'e1' }));
  assert.deepEqual(
    (await waiting).map((d) => d.evaluation.id),
    ['e1'],
  );
  const timingOut = broker.dequeueMany(['service'], 5, 1000);
  clock.advance(1000);
  assert.deepEqual(await timingOut, []);
  for (const max of [0, 1.5, -1, Number.NaN, '2']) {
    await assert.rejects(broker.dequeueMany(['service'], max as number, 0), code('ERR_INVALID_ARGUMENT', /`max`/));
  }
  await assert.rejects(broker.dequeueMany([], 1, 0), code('ERR_INVALID_ARGUMENT', /`types`/));
});

test('assertCurrent passes for the current delivery only, with the refusal ack would meet', () => {
  const { broker, clock } = harness({ nackTimeoutMs: 1000, initialNackDelayMs: 0 });
  broker.enqueue(ev('j1', { id: 'e1' }));
  const first = broker.tryDequeue(['service'])!;
  broker.assertCurrent('e1', first.token);
  assert.throws(() => broker.assertCurrent('e1', 'not-the-token'), code('ERR_TOKEN_MISMATCH'));
  assert.throws(() => broker.assertCurrent('nobody', first.token), code('ERR_EVAL_NOT_OUTSTANDING'));
  clock.advance(1000);
  assert.throws(() => broker.assertCurrent('e1', first.token), code('ERR_NACK_TIMEOUT_REACHED'));
  const second = broker.tryDequeue(['service'])!;
  broker.assertCurrent('e1', second.token);
  broker.ack('e1', second.token);
  assert.throws(() => broker.assertCurrent('e1', second.token), code('ERR_EVAL_NOT_OUTSTANDING'));
});

test('maxPayloadBytes: the broker refuses a larger payload at enqueue itself, and nothing is admitted', () => {
  const { broker } = harness({ maxPayloadBytes: 64 });
  assert.throws(
    () => broker.enqueue(ev('j1', { id: 'big', payload: 'x'.repeat(100) })),
    (error: unknown) => error instanceof PayloadTooLargeError && error.code === 'ERR_PAYLOAD_TOO_LARGE',
  );
  assert.equal(broker.inspect('big'), undefined);
  assert.equal(broker.stats().totalReady, 0);
  broker.enqueue(ev('j1', { id: 'small', payload: 'x' }));
  assert.throws(() => broker.enqueue(ev('j2', { payload: () => 1 })), code('ERR_INVALID_EVALUATION', /structured-cloneable/));
  assert.equal(broker.options.maxPayloadBytes, 64);
});

test('maxPayloadBytes with validatePayload: the user check runs first, then the limit', () => {
  const seen: unknown[] = [];
  const { broker } = harness({ maxPayloadBytes: 64, validatePayload: (payload) => void seen.push(payload) });
  assert.throws(() => broker.enqueue(ev('j1', { payload: 'y'.repeat(100) })), code('ERR_PAYLOAD_TOO_LARGE'));
  assert.deepEqual(seen, ['y'.repeat(100)]);
});

test('maxPayloadBytes is validated with a typed error naming it', () => {
  for (const bad of [0, -1, 1.5, '64', Number.POSITIVE_INFINITY]) {
    assert.throws(
      () => new EvalBroker({ logger: silentLogger, maxPayloadBytes: bad as number }),
      (error: unknown) => error instanceof InvalidOptionError && /`broker\.maxPayloadBytes`/.test(error.message),
      String(bad),
    );
  }
});
