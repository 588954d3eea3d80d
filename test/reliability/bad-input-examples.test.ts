/**
 * Bad input the property tests in bad-input.test.ts did not reach, each found by review: options nested inside
 * `broker` and `backoff`, an evaluation with a field nobody validates, and a registry that already has one of the
 * engine's metric names with another type. Each is refused with a typed error and leaves nothing half-made.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Counter, Registry } from 'prom-client';
import { EvalBroker } from '../../src/broker/eval-broker.js';
import { createEngine } from '../../src/engine/engine.js';
import { evaluation, failures, fixture, logger, started } from './helpers.js';

test('unknown or engine-supplied keys inside broker and backoff options are refused, naming the key', () => {
  const cases: Array<[Parameters<typeof createEngine>[0], RegExp]> = [
    [{ broker: { nackTimeout: 1000 } as never }, /`broker\.nackTimeout`/],
    [{ broker: { clock: 'x' } as never }, /`broker\.clock`/],
    [{ broker: { extendNackDeadline: () => true } as never }, /`broker\.extendNackDeadline`/],
    [{ backoff: { baseline: 5 } as never }, /`backoff\.baseline`/],
  ];
  for (const [options, message] of cases) {
    assert.throws(() => createEngine({ logger, ...options }), { code: 'ERR_INVALID_OPTION', message }, JSON.stringify(options));
  }
  assert.throws(() => new EvalBroker({ logger, nackTimeout: 5 } as never), { code: 'ERR_INVALID_OPTION', message: /`broker\.nackTimeout`/ });
});

test('an evaluation with a field that is not an evaluation field is refused at enqueue; the broker is unchanged', () => {
  const broker = new EvalBroker({ logger });
  const before = broker.stats();
  const bad = { ...evaluation('x', 'service'), callback: () => 1 };
  assert.throws(() => broker.enqueue(bad as never), { code: 'ERR_INVALID_EVALUATION', message: /`evaluation\.callback`.*put anything else in payload/ });
  assert.deepEqual(broker.stats(), before);
  assert.equal(broker.inspect('x'), undefined);
  broker.enqueue({ ...evaluation('x', 'service'), payload: { note: 'extra data goes here' } });
  assert.equal(broker.inspect('x')?.state, 'ready');
});

test('a registry that already holds one of the engine metric names with another type is refused with a typed error', () => {
  // A prom-client gauge of the broker, and one of the engine's own cheap histograms.
  for (const name of ['tickpool_broker_total_ready', 'tickpool_worker_invoke_scheduler_seconds']) {
    const registry = new Registry();
    registry.registerMetric(new Counter({ name, help: 'not what the engine registers', registers: [] }));
    assert.throws(() => createEngine({ logger, registry }), { code: 'ERR_INVALID_OPTION', message: new RegExp(`\`registry\`.*${name}.*Counter`) });
  }
});

test('a scheduler plan whose allAtOnce is not a boolean is refused (ERR_INVALID_PLAN), not committed in part', { timeout: 30_000 }, async () => {
  const engine = await started({ tables: ['t'], broker: { initialNackDelayMs: 0, subsequentNackDelayMs: 0, deliveryLimit: 1 }, schedulers: { echo: fixture('plan-echo') } });
  const failed = failures(engine, 1);
  const plan = { writes: [{ table: 't', key: 'a', value: 1, readIndex: 0 }], allAtOnce: 'true' };
  engine.enqueue(evaluation('gang', 'echo', { plan }));
  assert.deepEqual(await failed, [{ id: 'gang', code: 'ERR_DELIVERY_LIMIT' }]);
  assert.equal((engine.broker.failedReason('gang')?.cause as { code?: string } | undefined)?.code, 'ERR_INVALID_PLAN');
  assert.equal(engine.state.index, 0, 'nothing was committed');
});
