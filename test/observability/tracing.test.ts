/**
 * The engine's OpenTelemetry spans with the SDK's in-memory exporter, on real threads: the chain caller → `enqueue`
 * (PRODUCER) → `process` (CONSUMER) → `plan.apply`; a redelivery as a second `process` span under the same enqueue,
 * the first with the error status; and nothing recorded once no provider is registered.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { newGate } from '../fixtures/gates.js';
import { evaluation, fixture, started } from '../reliability/helpers.js';

const exporter = new InMemorySpanExporter();
const contextManager = new AsyncLocalStorageContextManager();
before(() => {
  context.setGlobalContextManager(contextManager.enable());
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
});
after(() => {
  trace.disable();
  context.disable();
});

const schedulers = { echo: fixture('plan-echo'), flaky: fixture('faulty') };
const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
const parentOf = (span: ReadableSpan): string | undefined => span.parentSpanContext?.spanId;
const byName = (name: string): ReadableSpan[] => spans().filter((s) => s.name === name);

test('a caller’s span is the parent of the enqueue span, which is the parent of the process span and its plan.apply', async () => {
  exporter.reset();
  const engine = await started({ threads: 1, schedulers, tables: ['t'] });
  const tracer = trace.getTracer('test');
  const outcome = await tracer.startActiveSpan('request', async (request) => {
    try {
      return await engine.run(evaluation('e1', 'echo', { plan: { writes: [{ table: 't', key: 'k', value: 1, readIndex: 0 }] } }));
    } finally {
      request.end();
    }
  });
  assert.equal(outcome.status, 'acked');
  const [request] = byName('request');
  const [enqueue] = byName('enqueue echo');
  const [process] = byName('process echo');
  const [apply] = byName('plan.apply');
  assert.ok(request && enqueue && process && apply, `spans: ${spans().map((s) => s.name).join(', ')}`);
  assert.equal(enqueue.kind, SpanKind.PRODUCER);
  assert.equal(process.kind, SpanKind.CONSUMER);
  assert.equal(parentOf(enqueue), request.spanContext().spanId);
  assert.equal(parentOf(process), enqueue.spanContext().spanId);
  assert.equal(parentOf(apply), process.spanContext().spanId);
  assert.equal(new Set([request, enqueue, process, apply].map((s) => s.spanContext().traceId)).size, 1, 'one trace');
  assert.deepEqual(
    { system: process.attributes['messaging.system'], destination: process.attributes['messaging.destination.name'], id: process.attributes['messaging.message.id'] },
    { system: 'tickpool', destination: 'echo', id: 'e1' },
  );
  assert.equal(process.attributes['tickpool.outcome'], 'acked');
  assert.equal(process.attributes['tickpool.writes_committed'], 1);
  assert.equal(process.attributes['tickpool.writes_refused'], 0);
  assert.equal(apply.attributes['tickpool.writes_committed'], 1);
  assert.equal(typeof process.attributes['tickpool.queue_wait_ms'], 'number');
});

test('a redelivery is a second process span under the same enqueue span; the failed one has the error status', async () => {
  exporter.reset();
  const engine = await started({ threads: 1, schedulers, broker: { deliveryLimit: 2, initialNackDelayMs: 0, subsequentNackDelayMs: 0 } });
  const outcome = await engine.run(evaluation('f1', 'flaky', { gate: newGate(), fault: 'throw' }));
  assert.equal(outcome.status, 'acked');
  const [enqueue] = byName('enqueue flaky');
  const processes = byName('process flaky');
  assert.equal(processes.length, 2);
  for (const p of processes) assert.equal(parentOf(p), enqueue!.spanContext().spanId);
  const [first, second] = processes.sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
  assert.equal(first!.attributes['tickpool.outcome'], 'nacked');
  assert.equal(first!.status.code, SpanStatusCode.ERROR);
  assert.match(first!.status.message ?? '', /scheduler failed on purpose/);
  assert.equal(second!.attributes['tickpool.outcome'], 'acked');
  assert.equal(second!.status.code, SpanStatusCode.UNSET);
});

test('with no provider registered nothing is recorded', async () => {
  const engine = await started({ threads: 1, schedulers });
  trace.disable();
  exporter.reset();
  try {
    assert.equal((await engine.run(evaluation('quiet', 'echo'))).status, 'acked');
    assert.deepEqual(spans(), []);
  } finally {
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  }
});
