/**
 * A backend whose every `MaybePromise` method answers with a promise, the way a durable backend does: it wraps the
 * in-memory backend and performs each call a macrotask later (so a refusal becomes a rejection, never a throw), and
 * records what was called. `tryDequeue` never has anything (no prefetch): every delivery comes through a waiting
 * `dequeueWith`, answered a macrotask after the in-memory broker served it. A fake on purpose: what it tests is the
 * seam, that the engine, the worker loop and the outcome path work when a backend is asynchronous.
 */
import type { Backend, BackendContext, BackendFactory } from '../../src/backend/backend.js';
import type { BrokerBackend, DequeueCallback, LeaseKeeper } from '../../src/backend/broker-backend.js';
import { memoryBackend, type MemoryBackend } from '../../src/memory/memory-backend.js';
import type { PlanBackend, PlanDelivery, PlanOutcome, StateBackend } from '../../src/backend/state-backend.js';
import type { TaskBackend } from '../../src/backend/task-backend.js';
import type { BrokerStats, Delivery, EvaluationInfo } from '../../src/broker/broker-types.js';
import type { Evaluation, EvaluationInput } from '../../src/broker/evaluation.js';
import type { AckResult, EvaluationHandle } from '../../src/broker/outcome-waiters.js';
import type { ChangeSet, Plan, Snapshot, WriteTxn } from '../../src/state/types.js';

/** What an async backend was asked, in order: method names (`broker.ack`, `plans.submit`, `open`, …). */
export class CallLog {
  readonly calls: string[] = [];

  record(name: string): void {
    this.calls.push(name);
  }

  count(name: string): number {
    return this.calls.filter((c) => c === name).length;
  }
}

/** A macrotask later: after every microtask the call would otherwise have raced with. */
function later<T>(fn: () => T | PromiseLike<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    setImmediate(() => {
      try {
        resolve(fn());
      } catch (error) {
        reject(error as Error);
      }
    });
  });
}

class AsyncBroker implements BrokerBackend {
  readonly #inner: BrokerBackend;
  readonly #log: CallLog;
  readonly #nacking: Promise<void> | undefined;

  constructor(inner: BrokerBackend, log: CallLog, nacking: Promise<void> | undefined) {
    this.#inner = inner;
    this.#log = log;
    this.#nacking = nacking;
  }

  get events(): BrokerBackend['events'] {
    return this.#inner.events;
  }
  get enabled(): boolean {
    return this.#inner.enabled;
  }
  get paused(): boolean {
    return this.#inner.paused;
  }
  enqueue(input: EvaluationInput): EvaluationHandle {
    this.#log.record('broker.enqueue');
    return this.#inner.enqueue(input);
  }
  tryDequeue(): Delivery | undefined {
    this.#log.record('broker.tryDequeue');
    return undefined;
  }
  dequeueWith(types: readonly string[], timeoutMs: number, signal: AbortSignal | undefined, callback: DequeueCallback): void {
    this.#log.record('broker.dequeueWith');
    this.#inner.dequeueWith(types, timeoutMs, signal, (error, delivery) => setImmediate(() => callback(error, delivery)));
  }
  dequeue(types: readonly string[], timeoutMs: number, signal?: AbortSignal): Promise<Delivery | undefined> {
    return this.#inner.dequeue(types, timeoutMs, signal);
  }
  dequeueMany(types: readonly string[], max: number, timeoutMs: number, signal?: AbortSignal): Promise<Delivery[]> {
    return this.#inner.dequeueMany(types, max, timeoutMs, signal);
  }
  ack(id: string, token: string, result?: AckResult): Promise<void> {
    this.#log.record('broker.ack');
    return later(() => this.#inner.ack(id, token, result));
  }
  nack(id: string, token: string, reason?: Error): Promise<void> {
    this.#log.record('broker.nack');
    return later(async () => {
      await this.#nacking;
      return this.#inner.nack(id, token, reason);
    });
  }
  giveBack(id: string, token: string, reason?: Error): Promise<void> {
    this.#log.record('broker.giveBack');
    return later(async () => {
      await this.#nacking;
      return this.#inner.giveBack(id, token, reason);
    });
  }
  fail(id: string, token: string, reason: Error): Promise<void> {
    this.#log.record('broker.fail');
    return later(() => this.#inner.fail(id, token, reason));
  }
  remove(id: string, token?: string, cause?: unknown): Promise<boolean> {
    this.#log.record('broker.remove');
    return later(() => this.#inner.remove(id, token, cause));
  }
  outstanding(id: string): Promise<string | undefined> {
    this.#log.record('broker.outstanding');
    return later(() => this.#inner.outstanding(id));
  }
  inspect(id: string): Promise<EvaluationInfo | undefined> {
    this.#log.record('broker.inspect');
    return later(() => this.#inner.inspect(id));
  }
  outstandingReset(id: string, token: string): Promise<void> {
    this.#log.record('broker.outstandingReset');
    return later(() => this.#inner.outstandingReset(id, token));
  }
  pauseNackTimeout(id: string, token: string): Promise<void> {
    this.#log.record('broker.pauseNackTimeout');
    return later(() => this.#inner.pauseNackTimeout(id, token));
  }
  resumeNackTimeout(id: string, token: string): Promise<void> {
    this.#log.record('broker.resumeNackTimeout');
    return later(() => this.#inner.resumeNackTimeout(id, token));
  }
  keepLeases(keeper: LeaseKeeper | undefined): void {
    this.#log.record('broker.keepLeases');
    this.#inner.keepLeases(keeper);
  }
  stats(): Promise<BrokerStats> {
    this.#log.record('broker.stats');
    return later(() => this.#inner.stats());
  }
  pause(): void {
    this.#inner.pause();
  }
  resume(): void {
    this.#inner.resume();
  }
  setEnabled(enabled: boolean): Promise<Evaluation[]> {
    return later(() => this.#inner.setEnabled(enabled));
  }
  rejectOutcomes(reason: (evaluation: Evaluation) => Error): void {
    this.#log.record('broker.rejectOutcomes');
    this.#inner.rejectOutcomes(reason);
  }
}

class AsyncState implements StateBackend {
  readonly #inner: StateBackend;
  readonly #log: CallLog;

  constructor(inner: StateBackend, log: CallLog) {
    this.#inner = inner;
    this.#log = log;
  }

  get index(): number {
    return this.#inner.index;
  }
  onChange(listener: (change: ChangeSet) => void): () => void {
    return this.#inner.onChange(listener);
  }
  full(): ChangeSet {
    this.#log.record('state.full');
    return this.#inner.full();
  }
  snapshot(): Snapshot {
    return this.#inner.snapshot();
  }
  tables(): readonly string[] {
    return this.#inner.tables();
  }
  write(fn: (txn: WriteTxn) => void): Promise<ChangeSet> {
    this.#log.record('state.write');
    return later(() => this.#inner.write(fn));
  }
  async waitForIndex(index: number, signal?: AbortSignal): Promise<void> {
    this.#log.record('state.waitForIndex');
    await this.#inner.waitForIndex(index, signal);
  }
}

/**
 * Plans through the in-memory applier a macrotask later. With `ackInCommit`, a plan whose writes all committed is
 * acked by the backend itself right after its commit (`PlanOutcome.acked`), as a backend that acks in the commit
 * transaction does.
 */
class AsyncPlans implements PlanBackend {
  readonly #inner: PlanBackend;
  readonly #broker: BrokerBackend;
  readonly #log: CallLog;
  readonly #ackInCommit: boolean;

  constructor(inner: PlanBackend, broker: BrokerBackend, log: CallLog, ackInCommit: boolean) {
    this.#inner = inner;
    this.#broker = broker;
    this.#log = log;
    this.#ackInCommit = ackInCommit;
  }

  get depth(): number {
    return this.#inner.depth;
  }

  submit(plan: Plan, delivery?: PlanDelivery): Promise<PlanOutcome> {
    this.#log.record('plans.submit');
    if (delivery !== undefined) this.#log.record(`plans.submit fenced by ${delivery.evaluationId}`);
    return later(() => this.#inner.submit(plan, delivery)).then(async (result) => {
      if (!this.#ackInCommit || delivery?.ack === undefined || result.rejected.length > 0) return result;
      this.#log.record('plans.ackInCommit');
      await this.#broker.ack(delivery.evaluationId, delivery.token, { ...delivery.ack, index: result.index });
      return { ...result, acked: true };
    });
  }
}

export interface AsyncBackend extends Backend {
  readonly broker: AsyncBroker;
  readonly state: AsyncState;
  readonly plans: AsyncPlans;
  readonly tasks: TaskBackend;
  /** The in-memory backend underneath, to look at what really happened. */
  readonly inner: MemoryBackend;
  open(): Promise<void>;
  close(): Promise<void>;
}

export interface AsyncBackendOptions {
  readonly log?: CallLog;
  /** `PlanOutcome.acked`: the backend acks a fully committed plan's delivery itself. Default false. */
  readonly ackInCommit?: boolean;
  /** Awaited by `open()` before it resolves (a connection that takes its time). */
  readonly opening?: Promise<void>;
  /** Awaited by `close()` before it closes the in-memory backend. */
  readonly closing?: Promise<void>;
  /** Awaited by every nack and give-back before it reaches the in-memory broker. */
  readonly nacking?: Promise<void>;
}

/** The factory, with the call log and the backend it made last (to look underneath it). */
export interface AsyncBackendFactory extends BackendFactory<AsyncBackend> {
  readonly log: CallLog;
  readonly made: AsyncBackend | undefined;
}

export function asyncBackend(options: AsyncBackendOptions = {}): AsyncBackendFactory {
  const log = options.log ?? new CallLog();
  let made: AsyncBackend | undefined;
  return {
    name: 'async-fake',
    log,
    get made() {
      return made;
    },
    create(context: BackendContext): AsyncBackend {
      const inner = memoryBackend().create(context);
      const broker = new AsyncBroker(inner.broker, log, options.nacking);
      return (made = {
        broker,
        state: new AsyncState(inner.state, log),
        plans: new AsyncPlans(inner.plans, inner.broker, log, options.ackInCommit ?? false),
        tasks: inner.tasks,
        inner,
        async open() {
          log.record('open');
          await options.opening;
          inner.open();
          log.record('opened');
        },
        async close() {
          log.record('close');
          await options.closing;
          inner.close();
          log.record('closed');
        },
      });
    },
  };
}
