/**
 * `PoolExecutor`: runs task runs on the engine's pool threads, next to evaluations. A task's `handler` names a
 * module registered in the engine's `handlers` option (never a path from task data); the handler is
 * `async (run, ctx) => value` with the same `ctx` as schedulers (cancel read from the slot word, heartbeat, signal).
 *
 * A handler succeeds by returning and fails by throwing; a thrown value with `retryable: true` asks for a retry.
 * It may also return a `RunResult` itself: an object whose `error` is an `Error` is a failure (retried when its
 * `retryable` is true), with its `value` kept. Its thread sends it as the failure of a throw would be sent, so the
 * error arrives as a `RemoteError` (`ERR_USER_CODE`, the handler's own `code` as `remoteCode`) either way.
 * A run whose thread died is a retryable failure (`ThreadExitedError`); one whose thread hit its resource limits
 * is not (`ResourceLimitError`: the same run would hit them again).
 */
import { ResourceLimitError, RunCanceledError, UnknownHandlerError } from '../errors.js';
import type { Outcome, ThreadPool } from '../pool/thread-pool.js';
import type { Registry } from '../observability/metrics.js';
import { ExecutorMetrics } from './executor-metrics.js';
import type { ExecuteContext, Executor, QueuedRun, RunPromise, RunResult } from '../tasks/types.js';

export interface PoolExecutorOptions {
  readonly pool: ThreadPool;
  /** Names of the registered handler modules. */
  readonly handlers: readonly string[];
  /** prom-client registry for the executor's counters. */
  readonly registry: Registry;
}

export class PoolExecutor implements Executor {
  readonly #pool: ThreadPool;
  readonly #handlers: ReadonlySet<string>;
  readonly #metrics: ExecutorMetrics;

  constructor(options: PoolExecutorOptions) {
    this.#pool = options.pool;
    this.#handlers = new Set(options.handlers);
    this.#metrics = new ExecutorMetrics(options.registry, options.pool);
  }

  execute(run: QueuedRun, context: ExecuteContext): RunPromise {
    const { task, slot, attempt } = context;
    if (!this.#handlers.has(task.handler)) {
      const error = new UnknownHandlerError(task.handler, [...this.#handlers]);
      this.#metrics.started();
      this.#metrics.settled({ status: 'error', error, retryable: false });
      return new PoolRunPromise(run, Promise.resolve({ status: 'error', error, retryable: false }), () => false);
    }
    const started = context.started;
    const outcome = this.#pool.dispatch({
      kind: 'run',
      slot: slot.slot,
      generation: slot.generation,
      attempt,
      run: { taskId: run.taskId, runId: run.runId, scheduledFor: run.scheduledFor, runAt: run.runAt },
      handler: task.handler,
      payload: task.payload,
    }, started === undefined ? undefined : { itemStarted: started });
    this.#metrics.started();
    void outcome.then((o) => this.#metrics.settled(o));
    return new PoolRunPromise(run, outcome, () => this.#pool.cancel(slot.slot, slot.generation));
  }
}

/** A run on a pool thread. `wait()` rejects at once on `cancel()`; `finished()` waits for the thread to let go. */
class PoolRunPromise implements RunPromise {
  readonly #run: QueuedRun;
  readonly #outcome: Promise<Outcome>;
  readonly #result: Promise<RunResult>;
  readonly #requestCancel: () => boolean;
  #settled = false;
  #rejectCanceled: ((error: Error) => void) | undefined;

  constructor(run: QueuedRun, outcome: Promise<Outcome>, requestCancel: () => boolean) {
    this.#run = run;
    this.#outcome = outcome;
    this.#requestCancel = requestCancel;
    this.#result = new Promise<RunResult>((resolve, reject) => {
      this.#rejectCanceled = reject;
      outcome.then((o) => {
        if (this.#settled) return;
        this.#settled = true;
        if (o.status === 'canceled') reject(new RunCanceledError(run.taskId, run.runId));
        else resolve(toResult(o));
      }, reject);
    });
    // Callers may never call wait(); a rejection must not surface as unhandled.
    this.#result.catch(() => undefined);
  }

  run(): QueuedRun {
    return this.#run;
  }

  wait(): Promise<RunResult> {
    return this.#result;
  }

  cancel(): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#requestCancel();
    this.#rejectCanceled?.(new RunCanceledError(this.#run.taskId, this.#run.runId));
  }

  finished(): Promise<void> {
    return this.#outcome.then(() => undefined);
  }
}

function toResult(outcome: Exclude<Outcome, { status: 'canceled' }>): RunResult {
  switch (outcome.status) {
    case 'ok':
      return { value: outcome.value };
    case 'error':
      // A returned `RunResult` failure comes as an error outcome too (its thread turned it into one, so its error is
      // a `RemoteError` like a thrown one's), with its value beside it.
      return outcome.value === undefined ? { error: outcome.error, retryable: outcome.retryable } : { error: outcome.error, retryable: outcome.retryable, value: outcome.value };
    case 'lost':
      return { error: outcome.error, retryable: !(outcome.error instanceof ResourceLimitError) };
  }
}
