/**
 * OpenTelemetry spans of the engine, following the messaging conventions: `enqueue <type>` (PRODUCER) when an
 * evaluation is enqueued, a child of the caller's active context; `process <type>` (CONSUMER) per delivery, from
 * its start on a thread to its ack, nack, give-back or failure, a child of the enqueue span; `plan.apply` per
 * commit attempt, a child of the delivery's span.
 *
 * `@opentelemetry/api` is an optional peer: the app's copy is loaded when it is installed (its global provider is
 * the one spans go to). Without it, or with no provider registered, nothing is recorded and each hook costs one
 * check of the global provider.
 */
import { createRequire } from 'node:module';

/**
 * The part of `@opentelemetry/api` used here, declared locally: the package is optional, so no declaration of
 * tickpool names its types.
 */
namespace Otel {
  export type Attributes = Record<string, string | number | boolean | undefined>;
  export interface SpanContext {
    readonly traceId: string;
    readonly spanId: string;
    readonly traceFlags: number;
  }
  export interface Span {
    spanContext(): SpanContext;
    isRecording(): boolean;
    setAttributes(attributes: Attributes): unknown;
    setStatus(status: { code: number; message?: string }): unknown;
    recordException(exception: Error): void;
    end(endTime?: number): void;
  }
  export interface Tracer {
    startSpan(name: string, options: { kind?: number; startTime?: number; attributes?: Attributes }, context: unknown): Span;
  }
  export interface ProxyTracerProvider {
    getDelegate?(): unknown;
  }
}

interface Api {
  readonly trace: {
    getTracer(name: string): Otel.Tracer;
    getTracerProvider(): unknown;
    setSpanContext(context: unknown, spanContext: Otel.SpanContext): unknown;
    setSpan(context: unknown, span: Otel.Span): unknown;
  };
  readonly context: { active(): unknown };
  readonly ProxyTracerProvider: new () => { getDelegate(): unknown };
  readonly SpanKind: { readonly PRODUCER: number; readonly CONSUMER: number };
  readonly SpanStatusCode: { readonly ERROR: number };
  readonly ROOT_CONTEXT: unknown;
}

function loadApi(): Api | undefined {
  try {
    return createRequire(import.meta.url)('@opentelemetry/api') as Api;
  } catch {
    return undefined;
  }
}

const api = loadApi();
/** What the global provider delegates to while no provider is registered. */
const NOOP_PROVIDER = api === undefined ? undefined : new api.ProxyTracerProvider().getDelegate();
/** W3C trace flags: the trace is sampled. */
const SAMPLED = 1;
/** Enqueue span contexts kept for deliveries to come, at most this many. */
const MAX_PARENTS = 100_000;

export interface TracedEvaluation {
  readonly id: string;
  readonly type: string;
  readonly jobId?: string | undefined;
  readonly namespace?: string | undefined;
  readonly priority?: number | undefined;
}

/** How a delivery ended, for its span. */
export type DeliveryEnd = 'acked' | 'nacked' | 'given-back' | 'failed' | 'removed';

export interface ProcessSpan {
  readonly span: Otel.Span;
  error: unknown;
  attempts: number;
}

export class EngineTracing {
  readonly #tracer: Otel.Tracer | undefined = api?.trace.getTracer('tickpool');
  /** Evaluation id → its enqueue span's context and when it was enqueued (epoch ms). */
  readonly #parents = new Map<string, { readonly context: Otel.SpanContext; readonly at: number }>();

  /** Whether a provider is registered: spans are recorded. */
  get enabled(): boolean {
    if (api === undefined) return false;
    const provider = api.trace.getTracerProvider() as Otel.ProxyTracerProvider;
    return typeof provider.getDelegate !== 'function' || provider.getDelegate() !== NOOP_PROVIDER;
  }

  #attributes(e: TracedEvaluation): Otel.Attributes {
    return {
      'messaging.system': 'tickpool',
      'messaging.destination.name': e.type,
      'messaging.message.id': e.id,
      'tickpool.job_id': e.jobId ?? e.id,
      'tickpool.namespace': e.namespace ?? 'default',
      'tickpool.priority': e.priority ?? 50,
    };
  }

  /**
   * Runs `enqueue` inside the PRODUCER span of evaluation `e` (a child of the caller's active context), whose context
   * its deliveries continue. The span's context is kept before `enqueue` runs: an in-memory broker may start the
   * delivery inside it.
   */
  traceEnqueue<T>(e: TracedEvaluation, enqueue: () => T): T {
    // Attributes only for a span that records: a sampler that keeps nothing costs the start of a span, no more.
    const span = this.#tracer!.startSpan(`enqueue ${e.type}`, { kind: api!.SpanKind.PRODUCER }, api!.context.active());
    if (span.isRecording()) {
      span.setAttributes(this.#attributes(e));
      span.setAttributes({ 'messaging.operation.type': 'send' });
    }
    // Past the bound the oldest would go first, but a Map deleted from its front leaves holes every later walk
    // crosses: it is emptied instead (the deliveries of those evaluations start traces of their own).
    if (this.#parents.size >= MAX_PARENTS) this.#parents.clear();
    this.#parents.set(e.id, { context: span.spanContext(), at: Date.now() });
    try {
      return enqueue();
    } catch (error) {
      this.#parents.delete(e.id);
      fail(span, error);
      throw error;
    } finally {
      span.end();
    }
  }

  /** A delivery started on a thread at `startedAt` (epoch ms): its CONSUMER span, or undefined when nothing records. */
  startProcess(e: TracedEvaluation, startedAt: number): ProcessSpan | undefined {
    if (!this.enabled) return undefined;
    const parent = this.#parents.get(e.id);
    // A delivery of an enqueue that was not sampled is not either (the parent-based sampling every SDK defaults to).
    if (parent !== undefined && (parent.context.traceFlags & SAMPLED) === 0) return undefined;
    const context = parent === undefined ? api!.ROOT_CONTEXT : api!.trace.setSpanContext(api!.ROOT_CONTEXT, parent.context);
    const span = this.#tracer!.startSpan(`process ${e.type}`, { kind: api!.SpanKind.CONSUMER, startTime: startedAt }, context);
    if (span.isRecording()) {
      span.setAttributes(this.#attributes(e));
      span.setAttributes({ 'messaging.operation.type': 'process' });
      if (parent !== undefined) span.setAttributes({ 'tickpool.queue_wait_ms': Math.max(0, startedAt - parent.at) });
    }
    return { span, error: undefined, attempts: 1 };
  }

  /**
   * A delivery ended (`end`, or an ack when nothing said otherwise): its span, if it has one, ends with how; an ack,
   * a failure or a removal forgets the enqueue span (a nack or a give-back keeps it for the redelivery).
   */
  released(evaluationId: string, end: DeliveryEnd | undefined, p: ProcessSpan | undefined, writes: { committed: number; refused: number }): void {
    const final = end === undefined || end === 'acked' || end === 'failed' || end === 'removed';
    if (final && this.#parents.size !== 0) this.#parents.delete(evaluationId);
    if (p !== undefined) this.#endProcess(p, end ?? 'acked', writes);
  }

  #endProcess(p: ProcessSpan, end: DeliveryEnd, writes: { committed: number; refused: number }): void {
    if (!p.span.isRecording()) return p.span.end();
    p.span.setAttributes({ 'tickpool.outcome': end, 'tickpool.attempts': p.attempts, 'tickpool.writes_committed': writes.committed, 'tickpool.writes_refused': writes.refused });
    if (p.error !== undefined && end !== 'given-back') fail(p.span, p.error);
    p.span.end();
  }

  /** A commit attempt of a delivery's plan: its span, a child of the delivery's. */
  startPlanApply(p: ProcessSpan, writes: number): Otel.Span {
    return this.#tracer!.startSpan('plan.apply', { attributes: { 'tickpool.writes': writes } }, api!.trace.setSpan(api!.ROOT_CONTEXT, p.span));
  }

  endPlanApply(span: Otel.Span, outcome: { committed: number; refused: number } | undefined, error?: unknown): void {
    if (outcome !== undefined) span.setAttributes({ 'tickpool.writes_committed': outcome.committed, 'tickpool.writes_refused': outcome.refused });
    if (error !== undefined) fail(span, error);
    span.end();
  }
}

function fail(span: Otel.Span, error: unknown): void {
  span.setStatus({ code: api!.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  if (error instanceof Error) span.recordException(error);
}
