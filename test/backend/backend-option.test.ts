/**
 * The `backend` engine option: the in-memory backend by default, a typed error for anything that is not a backend
 * (or a factory whose `create` returns something else), and the settings an engine hands its backend's factory.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import type { BackendContext, BackendFactory } from '../../src/backend/backend.js';
import { memoryBackend, type MemoryBackend } from '../../src/memory/memory-backend.js';
import { EvalBroker } from '../../src/broker/eval-broker.js';
import { ManualClock } from '../../src/clock.js';
import { createBackend } from '../../src/engine/engine-backend.js';
import { createEngine } from '../../src/engine/engine.js';
import { InvalidOptionError, PayloadTooLargeError } from '../../src/errors.js';
import { memoryBackend as publicMemoryBackend } from '../../src/index.js';
import { Registry } from '../../src/observability/metrics.js';
import { resolveEngineOptions } from '../../src/engine/options.js';
import { PlanApplier } from '../../src/state/plan-applier.js';
import { StateStore } from '../../src/state/state-store.js';
import { MemoryTaskStore } from '../../src/tasks/memory-task-store.js';

const logger = pino({ level: 'silent' });
const noop = new URL('../fixtures/noop.js', import.meta.url);

test('the default backend is the in-memory one, also exported as memoryBackend()', () => {
  assert.equal(publicMemoryBackend, memoryBackend);
  const o = resolveEngineOptions({ threads: 1, logger });
  assert.equal(o.backend, memoryBackend());
  assert.equal(o.backend.name, 'memory');
  const backend = createBackend(o) as MemoryBackend;
  assert.ok(backend.broker instanceof EvalBroker);
  assert.ok(backend.state instanceof StateStore);
  assert.ok(backend.plans instanceof PlanApplier);
  assert.ok(backend.tasks instanceof MemoryTaskStore);
  assert.equal(backend.open(), undefined, 'opens at once');
});

test('a value that is not a backend is refused with a typed error naming the option', () => {
  for (const bad of [42, 'memory', {}, { name: 'x' }, { create: () => ({}) }, { name: 1, create: () => ({}) }, memoryBackend]) {
    assert.throws(
      () => resolveEngineOptions({ threads: 1, logger, backend: bad as never }),
      (error: unknown) =>
        error instanceof InvalidOptionError && error.code === 'ERR_INVALID_OPTION' && /`backend`/.test(error.message) && /memoryBackend\(\)/.test(error.message),
      String(bad),
    );
  }
});

test('a factory whose create() returns something else is refused where it is plugged in, before any thread exists', () => {
  const made = (value: unknown): BackendFactory => ({ name: 'broken', create: () => value as never });
  const full = memoryBackend().create({
    clock: new ManualClock(0),
    logger,
    registry: new Registry(),
    tables: [],
    evaluatePlan: undefined,
    broker: { knownTypes: [], maxPayloadBytes: 1024 },
  });
  const cases: Array<[unknown, RegExp]> = [
    [undefined, /`backend`.*broken's create\(\)/],
    [{ ...full, broker: undefined }, /`backend\.broker`/],
    [{ ...full, plans: 7 }, /`backend\.plans`/],
    [{ ...full, tasks: null }, /`backend\.tasks`/],
    [{ ...full, open: undefined }, /`backend`/],
  ];
  for (const [value, message] of cases) {
    assert.throws(
      () => createEngine({ threads: 1, logger, backend: made(value) as never }),
      (error: unknown) => error instanceof InvalidOptionError && message.test(error.message),
      message.source,
    );
  }
});

test("the factory gets the engine's clock, logger, registry, tables, plan check and broker settings", () => {
  const clock = new ManualClock(0);
  const registry = new Registry();
  const evaluatePlan = (): undefined => undefined;
  let seen: BackendContext | undefined;
  const recording: BackendFactory<MemoryBackend> = {
    name: 'recording',
    create: (context) => ((seen = context), memoryBackend().create(context)),
  };
  const o = resolveEngineOptions({
    backend: recording,
    threads: 1,
    logger,
    clock,
    registry,
    tables: ['a', 'b'],
    evaluatePlan,
    schedulers: { place: noop, drain: noop },
    maxPayloadBytes: 64,
    broker: { nackTimeoutMs: 5000, deliveryLimit: 7 },
  });
  const backend = createBackend(o) as MemoryBackend;
  assert.equal(seen?.clock, clock);
  assert.equal(seen.logger, logger);
  assert.equal(seen.registry, registry);
  assert.deepEqual(seen.tables, ['a', 'b']);
  assert.equal(seen.evaluatePlan, evaluatePlan);
  assert.deepEqual(seen.broker, { nackTimeoutMs: 5000, deliveryLimit: 7, knownTypes: ['place', 'drain'], maxPayloadBytes: 64 });
  // The broker checks admission itself: the payload limit, and the known types.
  assert.throws(() => backend.broker.enqueue({ type: 'place', payload: 'x'.repeat(100) }), PayloadTooLargeError);
  const unknown = backend.broker.enqueue({ id: 'u', type: 'other' });
  assert.equal(backend.broker.inspect('u')?.state, 'failed');
  return assert.rejects(unknown.done, { code: 'ERR_UNKNOWN_SCHEDULER' });
});

test('an engine on memoryBackend() named explicitly is the default engine', async () => {
  const engine = createEngine({ backend: memoryBackend(), threads: 1, logger, schedulers: { noop } });
  try {
    assert.ok(engine.broker instanceof EvalBroker);
    await engine.start();
    assert.equal((await engine.run({ type: 'noop' })).status, 'acked');
  } finally {
    await engine.stop();
  }
});
