/**
 * A prom-client `Registry` from another installed copy of prom-client (an application on 15.1.2 next to the copy
 * tickpool's tests use, 15.1.3: what npm installs when the two ranges do not dedupe) is accepted by every component
 * that takes a registry, and the engine's metrics land in it. `prom-client-alt` is that second copy (a dev
 * dependency alias, `npm:prom-client@15.1.2`).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { Registry as OwnRegistry } from 'prom-client';
import { Registry as OtherRegistry } from 'prom-client-alt';
import { EvalBroker } from '../../src/broker/eval-broker.js';
import { createEngine } from '../../src/engine/engine.js';
import { InvalidOptionError } from '../../src/errors.js';
import { isRegistry } from '../../src/observability/metrics.js';
import { PlanApplier } from '../../src/state/plan-applier.js';
import { StateStore } from '../../src/state/state-store.js';

const logger = pino({ level: 'silent' });
const fixture = (name: string): URL => new URL(`../fixtures/${name}.js`, import.meta.url);

test('the second copy really is another prom-client: its Registry is not an instance of ours', () => {
  assert.equal(new OtherRegistry() instanceof OwnRegistry, false);
});

test('a Registry is recognised by its shape, whichever copy made it', () => {
  assert.equal(isRegistry(new OwnRegistry()), true);
  assert.equal(isRegistry(new OtherRegistry()), true);
  for (const value of [undefined, null, {}, { metrics() {} }, OwnRegistry, 'registry']) assert.equal(isRegistry(value), false);
});

test('createEngine, EvalBroker and PlanApplier accept a Registry of another prom-client copy; bad ones are refused', () => {
  const registry = new OtherRegistry();
  assert.doesNotThrow(() => new EvalBroker({ registry, logger }));
  assert.doesNotThrow(() => new PlanApplier({ state: new StateStore({ tables: ['t'], logger }), registry, logger }).stop());
  assert.throws(() => createEngine({ threads: 1, registry: {} as never }), InvalidOptionError);
});

test("the engine's metrics, its hand-rolled latency histograms included, are exported by another copy's Registry", async () => {
  const registry = new OtherRegistry();
  const engine = createEngine({ threads: 1, workers: 2, logger, registry, schedulers: { noop: fixture('noop') } });
  try {
    await engine.start();
    const acked = new Promise<void>((resolve) => engine.broker.events.on('broker:ack', () => resolve()));
    engine.enqueue({ id: 'e1', jobId: 'j1', type: 'noop', priority: 50 });
    await acked;
    const text = await registry.metrics();
    assert.match(text, /^tickpool_broker_total_ready 0$/m);
    assert.match(text, /^tickpool_broker_process_time_seconds_count\{type="noop"\} 1$/m);
    assert.match(text, /^tickpool_worker_invoke_scheduler_seconds_count\{type="noop"\} 1$/m);
    assert.match(text, /^tickpool_task_scheduler_claims_active 0$/m);
  } finally {
    await engine.stop();
  }
});
