/**
 * `createEngine()`: wires the backend's broker, state store, plan committer and task store to the thread pool, the
 * scheduling workers and the task scheduler, into one engine with a `start()`/`stop()` lifecycle.
 */
import type { Backend } from '../backend/backend.js';
import type { MemoryBackend } from '../memory/memory-backend.js';
import type { EvaluationInput } from '../broker/evaluation.js';
import type { EvaluationHandle, EvaluationOutcome } from '../broker/outcome-waiters.js';
import { createBackend } from './engine-backend.js';
import { createPool, workerFactory } from './engine-parts.js';
import { AbortWatch, giveUpEvaluation, runSignal, type RunOptions } from './engine-run.js';
import { AbortedError, InvalidArgumentError, InvalidStateError } from '../errors.js';
import { TypedEmitter } from '../events.js';
import { resolveEngineOptions, type EngineOptions, type EngineOptionsOn, type ResolvedEngineOptions } from './options.js';
import type { ThreadPool } from '../pool/thread-pool.js';
import { SlotTable } from '../slots/slot-table.js';
import { randomUUID } from 'node:crypto';
import { EngineTracing } from '../observability/tracing.js';
import { EngineAdmin } from './engine-admin.js';
import { EngineTasks, taskSchedulerOf } from './engine-tasks.js';
import { isPromiseLike } from '../tasks/maybe-promise.js';
import type { TaskScheduler } from '../tasks/task-scheduler.js';
import { WorkerSet } from './worker-set.js';
import type { EngineWorker } from './worker-view.js';
import { EngineState, type EngineEvents, type EngineStateValue, type EngineStats, type StopOptions } from './engine-types.js';
import { giveUpOutcomes, stopGraceMs, stopInOrder } from './engine-stop.js';

export { EngineState, type EngineEvents, type EngineStateValue, type EngineStats, type StopOptions, type WorkerInfo } from './engine-types.js';

/**
 * An engine on backend `B` (the in-memory one unless `createEngine({ backend })` names another): `broker`, `state`,
 * `plans` and the task store of `tasks` are the backend's parts, with their own types.
 */
export class Engine<B extends Backend = MemoryBackend> {
  readonly options: ResolvedEngineOptions;
  readonly broker: B['broker'];
  /** The state as this process sees it (its replica), its writes and its change stream. */
  readonly state: B['state'];
  /** The one committer of plans, checking each write's version against the committed state. */
  readonly plans: B['plans'];
  readonly slots: SlotTable;
  /** The task scheduler (InfluxDB-style), running task handlers on the same pool as evaluations. */
  readonly tasks: EngineTasks<B['tasks']>;
  readonly events: TypedEmitter<EngineEvents>;
  /** What an operator sees and steers: evaluations by state, replay and discard, paused types, tasks, threads. */
  readonly admin: EngineAdmin;
  readonly #backend: B;
  readonly #tracing = new EngineTracing();
  /** The scheduler `tasks` composes: its lifecycle is the engine's. */
  readonly #taskScheduler: TaskScheduler;
  readonly #pool: ThreadPool;
  readonly #workers = new WorkerSet();
  #state: EngineStateValue = EngineState.CREATED;
  #stopping: Promise<void> | undefined;
  #startedAt: number | undefined;
  readonly #aborts = new AbortWatch((id, cause) => this.#abort(id, cause));

  constructor(options: EngineOptions | EngineOptionsOn<B> = {}) {
    const o = resolveEngineOptions(options);
    this.options = o;
    const logger = o.logger;
    this.events = new TypedEmitter<EngineEvents>(() => logger);
    this.slots = SlotTable.create({ initialSlots: Math.max(1024, o.workers * 2) });
    const backend = createBackend(o) as B;
    this.#backend = backend;
    this.broker = backend.broker;
    this.state = backend.state;
    this.plans = backend.plans;
    this.#pool = createPool(o, this.slots, backend, this.events);
    this.tasks = new EngineTasks({
      store: backend.tasks as B['tasks'],
      pool: this.#pool,
      slots: this.slots,
      handlers: Object.keys(o.handlers),
      clock: o.clock,
      logger,
      registry: o.registry,
      backoff: o.backoff,
      tickMs: o.tickMs,
      claimTtlMs: o.claimTtlMs,
      cancelGraceMs: o.cancelGraceMs,
    });
    this.#taskScheduler = taskSchedulerOf(this.tasks);
    this.admin = new EngineAdmin({
      broker: this.broker,
      tasks: this.tasks,
      store: backend.tasks,
      scheduler: this.#taskScheduler,
      pool: this.#pool,
      logger,
      cancelEvaluation: (id) => this.cancel(id),
    });
    const abortLost = (id: string, cause: unknown): void => this.#abort(id, cause);
    this.#workers.serve(this.broker, o.workers, workerFactory(o, { backend, pool: this.#pool, slots: this.slots, tracing: this.#tracing }, abortLost));
  }

  /** The scheduling workers, as read-only views (status, activity, the evaluation held, `pause()`/`resume()`). */
  get workers(): readonly EngineWorker[] {
    return this.#workers.views;
  }

  get status(): EngineStateValue {
    return this.#state;
  }

  /**
   * Opens the backend, then starts the pool threads, the workers and the task ticker; resolves once every thread is
   * ready. Rejects with a `ModuleLoadError` naming the module when a registered scheduler or handler module cannot
   * be loaded on a thread, and with the backend's error when it cannot open (the engine is then stopped).
   */
  async start(): Promise<void> {
    if (this.#state !== EngineState.CREATED) {
      throw new InvalidStateError(`Expected a new engine to start, but it is ${this.#state}`);
    }
    this.#state = EngineState.STARTING;
    try {
      // Before the threads: they are seeded from the state's replica, which a shared backend loads here.
      const opened = this.#backend.open();
      if (isPromiseLike(opened)) await opened;
      await this.#pool.start();
    } catch (error) {
      // stop() came while the threads booted: it released everything, and the engine stays stopped.
      if (this.#state !== EngineState.STARTING) return;
      // The threads cannot boot: nothing runs. Release what was started; the engine is stopped.
      await this.#pool.stop({ force: true });
      await this.#closeBackend();
      this.#state = EngineState.STOPPED;
      throw error;
    }
    // stop() came while the threads booted: starting the workers and the ticker now would run them on a stopped
    // pool for good. start() resolves; the engine is stopped (or stopping), as its status says.
    if (this.#state !== EngineState.STARTING) return;
    this.#startedAt = performance.now();
    this.#workers.start();
    this.#taskScheduler.start();
    this.#state = EngineState.RUNNING;
    this.events.emit('engine:start', { threads: this.#pool.threadCount, workers: this.#workers.size });
  }

  /**
   * Validates (synchronously, typed errors) and enqueues an evaluation, the same as `engine.broker.enqueue`: the
   * payload must be structured-cloneable and at most `maxPayloadBytes` once serialized; `id`, `jobId` and `priority`
   * default to a random UUID, the id, and 50. Returns its handle: `done` resolves with the outcome once it is acked
   * and rejects with a typed error when it is not. An id the broker already holds returns a handle of that evaluation
   * (same id, same `done`).
   */
  enqueue<V = unknown>(evaluation: EvaluationInput): EvaluationHandle<V> {
    if (this.#state === EngineState.STOPPING || this.#state === EngineState.STOPPED) {
      // The broker would keep it, but no worker would ever take it: say so instead of accepting it.
      throw new InvalidStateError(`Expected a created, starting or running engine to enqueue into, but it is ${this.#state}`);
    }
    if (!this.#tracing.enabled || evaluation === null || typeof evaluation !== 'object' || typeof evaluation.type !== 'string') {
      return this.broker.enqueue(evaluation) as EvaluationHandle<V>;
    }
    // Traced: the id is known before the broker sees it, so that a delivery started inside `enqueue` has its parent.
    const traced = evaluation.id === undefined ? { ...evaluation, id: randomUUID() } : evaluation;
    return this.#tracing.traceEnqueue(traced as EvaluationInput & { id: string }, () => this.broker.enqueue(traced)) as EvaluationHandle<V>;
  }

  /**
   * Enqueues an evaluation and resolves with its outcome (`{ id, status: 'acked', value, index, attempts,
   * deliveries }`): `piscina.run()` for evaluations. Rejects as `enqueue` throws and as its `done` rejects. When
   * `signal` aborts, an evaluation not yet dequeued is removed from the broker and one in flight is canceled
   * through its slot (its scheduler sees `ctx.canceled`) and removed once its thread lets go, not redelivered;
   * either way the promise rejects with `AbortedError` (`cause`: the signal's reason). A plan already submitted
   * still commits: the evaluation is then acked, the abort came too late.
   */
  run<V = unknown>(evaluation: EvaluationInput, options?: RunOptions): Promise<EvaluationOutcome<V>> {
    let handle: EvaluationHandle<V>;
    let signal: AbortSignal | undefined;
    try {
      signal = runSignal(options);
      if (signal?.aborted === true) {
        throw new AbortedError('engine.run', { cause: signal.reason });
      }
      handle = this.enqueue<V>(evaluation);
    } catch (error) {
      return Promise.reject(error as Error);
    }
    return signal === undefined ? handle.done : this.#aborts.watch(handle, signal);
  }

  /**
   * Cancels the evaluation in flight with this id: its scheduler sees `ctx.canceled` (no message needed), and the
   * evaluation is nacked for redelivery. False when no worker of this engine holds it.
   */
  cancel(evaluationId: string): boolean {
    if (typeof evaluationId !== 'string' || evaluationId === '') {
      throw new InvalidArgumentError('evaluationId', 'a non-empty string', evaluationId);
    }
    return this.#workers.cancelEvaluation(evaluationId);
  }

  #abort(evaluationId: string, cause: unknown): void {
    giveUpEvaluation(this.broker, this.#workers, this.options.logger, evaluationId, cause);
  }

  pauseWorkers(): void {
    this.#workers.pause();
  }

  resumeWorkers(): void {
    this.#workers.resume();
  }

  stats(): EngineStats<ReturnType<B['broker']['stats']>> {
    return {
      state: this.#state,
      broker: this.broker.stats() as ReturnType<B['broker']['stats']>,
      pool: this.#pool.stats(),
      workers: this.#workers.infos(),
      plans: { queueDepth: this.plans.depth, stateIndex: this.state.index },
      tasks: this.tasks.stats(),
      slots: { allocated: this.slots.allocated, bytes: this.slots.byteLength },
    };
  }

  /**
   * Share of thread time spent running schedulers and task handlers since `start()`, in [0, 1]: the busy time the
   * threads publish in shared memory over elapsed time × live threads. (Piscina's own `utilization` only counts
   * finished Piscina tasks, and each thread here runs one long-lived loop task, so it stays at 0.)
   */
  utilization(): number {
    if (this.#startedAt === undefined) return 0;
    const elapsed = performance.now() - this.#startedAt;
    const threads = Math.max(1, this.#pool.threadCount);
    return elapsed > 0 ? Math.min(1, this.#pool.busyMs() / (elapsed * threads)) : 0;
  }

  /**
   * Stops workers, tasks and threads. Evaluations in hand get `graceMs` to finish; after that they are canceled
   * (the thread sees it in shared memory) and given back to the broker with a nack; a thread that does not let go
   * is terminated. Task runs in flight are canceled and logged `canceled`. Nothing is lost: every evaluation ends
   * acked or back in the broker.
   */
  stop(options: StopOptions = {}): Promise<void> {
    let graceMs: number;
    try {
      graceMs = stopGraceMs(options);
    } catch (error) {
      return Promise.reject(error as Error);
    }
    this.#stopping ??= this.#stop(graceMs);
    return this.#stopping;
  }

  /** Closes the backend (in memory: queued plans are rejected, at once); a promise only when the backend answers one. */
  #closeBackend(): PromiseLike<void> | undefined {
    const closed = this.#backend.close();
    return isPromiseLike(closed) ? closed : undefined;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  async #stop(graceMs: number): Promise<void> {
    if (this.#state === EngineState.CREATED) {
      this.#state = EngineState.STOPPED;
      // Piscina starts the pool's threads when the engine is created: a never-started engine still owns them.
      await this.#pool.stop();
      const closed = this.#closeBackend();
      if (closed !== undefined) await closed;
      giveUpOutcomes(this.broker, this.#taskScheduler);
      return;
    }
    this.#state = EngineState.STOPPING;
    const forced = await stopInOrder({ workers: this.#workers, tasks: this.#taskScheduler, pool: this.#pool, options: this.options }, graceMs);
    const closed = this.#closeBackend();
    if (closed !== undefined) await closed;
    this.#state = EngineState.STOPPED;
    giveUpOutcomes(this.broker, this.#taskScheduler);
    this.events.emit('engine:stop', { requeued: this.#workers.givenBack, forced });
  }
}

/**
 * Creates an engine (validating every option with typed errors); call `start()` to run it. Its backend is
 * `options.backend` (default `memoryBackend()`), and the engine's `broker`, `state` and `plans` have its types.
 */
export function createEngine<B extends Backend>(options: EngineOptionsOn<B>): Engine<B>;
export function createEngine(options?: EngineOptions): Engine;
export function createEngine(options: EngineOptions | EngineOptionsOn<Backend> = {}): Engine<Backend> {
  return new Engine<Backend>(options);
}
