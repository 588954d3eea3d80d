import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolveEvalBrokerOptions, evalBrokerDefaults } from '../../src/broker/broker-options.js';
import { assertEvaluation, FAILED_QUEUE, isStructuredCloneable, nackDelayMs } from '../../src/broker/evaluation.js';
import { code } from './helpers.js';

const valid = { id: 'e1', jobId: 'j1', type: 'service', priority: 50 };

test('a well-formed evaluation passes, with or without the optional fields', () => {
  assertEvaluation(valid);
  assertEvaluation({ ...valid, namespace: 'ns', modifyIndex: 7, createIndex: 3, triggeredBy: 'job-register', waitUntil: 5, wait: 0, payload: { a: [1, 2], m: new Map([[1, 2]]) } });
  assert.equal(FAILED_QUEUE, '_failed');
});

test('each malformed field gets an InvalidEvaluationError naming it, with expected and received', () => {
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ ...valid, id: undefined }, /Expected `evaluation\.id` to be a non-empty string, got `undefined`/],
    [{ ...valid, id: '' }, /`evaluation\.id`/],
    [{ ...valid, jobId: 42 }, /Expected `evaluation\.jobId` to be a non-empty string, got `42` \(number\)/],
    [{ ...valid, type: undefined }, /`evaluation\.type`/],
    [{ ...valid, type: FAILED_QUEUE }, /other than `_failed`/],
    [{ ...valid, priority: 0 }, /Expected `evaluation\.priority` to be an integer from 1 to 100, got `0`/],
    [{ ...valid, priority: 101 }, /`evaluation\.priority`.*`101`/],
    [{ ...valid, priority: 2.5 }, /`evaluation\.priority`/],
    [{ ...valid, priority: '50' }, /`evaluation\.priority`/],
    [{ ...valid, namespace: '' }, /`evaluation\.namespace`/],
    [{ ...valid, modifyIndex: -1 }, /`evaluation\.modifyIndex`/],
    [{ ...valid, createIndex: 1.5 }, /`evaluation\.createIndex`/],
    [{ ...valid, waitUntil: Number.NaN }, /`evaluation\.waitUntil`/],
    [{ ...valid, wait: -5 }, /`evaluation\.wait`/],
    [{ ...valid, triggeredBy: 3 }, /`evaluation\.triggeredBy`/],
    [{ ...valid, payload: () => 1 }, /Expected `evaluation\.payload` to be a structured-cloneable value/],
    [{ ...valid, payload: { deep: [{ fn: () => 1 }] } }, /`evaluation\.payload`/],
  ];
  for (const [bad, message] of cases) {
    assert.throws(() => assertEvaluation(bad), code('ERR_INVALID_EVALUATION', message), JSON.stringify(Object.keys(bad)));
  }
  assert.throws(() => assertEvaluation(null), code('ERR_INVALID_EVALUATION', /Expected `evaluation` to be an object/));
  assert.throws(() => assertEvaluation([valid]), code('ERR_INVALID_EVALUATION'));
});

test('structured-clone check: primitives without cloning, objects by cloning', () => {
  for (const ok of [undefined, null, 1, 'x', true, 10n, { a: new Date(0) }, new Uint8Array(4)]) assert.equal(isStructuredCloneable(ok), true);
  for (const bad of [Symbol('s'), () => 1, { w: new WeakMap() }]) assert.equal(isStructuredCloneable(bad), false);
});

test('nack delay by delivery count: 0 for d <= 0, initial for 1, (d-1) x subsequent after', () => {
  assert.equal(nackDelayMs(-1, 1000, 20000), 0);
  assert.equal(nackDelayMs(0, 1000, 20000), 0);
  assert.equal(nackDelayMs(1, 1000, 20000), 1000);
  assert.equal(nackDelayMs(2, 1000, 20000), 20000);
  assert.equal(nackDelayMs(3, 1000, 20000), 40000);
  assert.equal(nackDelayMs(5, 1000, 20000), 80000);
});

test('broker options: defaults as pinned, typed errors naming the option', () => {
  const resolved = resolveEvalBrokerOptions(undefined);
  assert.deepEqual(
    { nackTimeoutMs: resolved.nackTimeoutMs, deliveryLimit: resolved.deliveryLimit, initialNackDelayMs: resolved.initialNackDelayMs, subsequentNackDelayMs: resolved.subsequentNackDelayMs },
    { nackTimeoutMs: 60000, deliveryLimit: 3, initialNackDelayMs: 1000, subsequentNackDelayMs: 20000 },
  );
  assert.deepEqual({ ...evalBrokerDefaults }, { nackTimeoutMs: 60000, deliveryLimit: 3, initialNackDelayMs: 1000, subsequentNackDelayMs: 20000 });
  const bad: Array<[Record<string, unknown>, RegExp]> = [
    [{ nackTimeoutMs: 0 }, /Expected `broker\.nackTimeoutMs` to be a finite number of ms > 0, got `0`/],
    [{ nackTimeoutMs: Number.POSITIVE_INFINITY }, /`broker\.nackTimeoutMs`/],
    [{ deliveryLimit: 0 }, /`broker\.deliveryLimit` to be an integer >= 1/],
    [{ deliveryLimit: 1.5 }, /`broker\.deliveryLimit`/],
    [{ initialNackDelayMs: -1 }, /`broker\.initialNackDelayMs`/],
    [{ subsequentNackDelayMs: '5' }, /`broker\.subsequentNackDelayMs`/],
    [{ clock: { now: () => 0 } }, /`broker\.clock`/],
    [{ logger: console }, /`broker\.logger`/],
    [{ registry: {} }, /`broker\.registry`/],
    [{ random: 0.5 }, /`broker\.random`/],
    [{ extendNackDeadline: true }, /`broker\.extendNackDeadline`/],
  ];
  for (const [options, message] of bad) assert.throws(() => resolveEvalBrokerOptions(options), code('ERR_INVALID_OPTION', message), JSON.stringify(options));
  assert.throws(() => resolveEvalBrokerOptions(42), code('ERR_INVALID_OPTION'));
});
