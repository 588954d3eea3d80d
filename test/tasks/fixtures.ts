/**
 * Test doubles for the task scheduler: an executor whose runs the test ends by hand, and small helpers.
 * Nothing here sleeps: runs end when the test says so, and `settled()` only lets queued promise callbacks run.
 */
import { ManualClock } from '../../src/clock.js';
import { RunCanceledError } from '../../src/errors.js';
import { MemoryDesiredState } from '../../src/tasks/memory-desired-state.js';
import { MemoryRunLog } from '../../src/tasks/memory-run-log.js';
import { TaskScheduler } from '../../src/tasks/task-scheduler.js';
import type { TaskSchedulerOptions } from '../../src/tasks/scheduler-options.js';
import type { ExecuteContext, Executor, QueuedRun, RunPromise, RunResult } from '../../src/tasks/types.js';
import { SlotTable } from '../../src/slots/slot-table.js';
import { createDefaultLogger } from '../../src/observability/logger.js';

export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets every queued promise callback (and those they queue) run: a few macrotask turns, no timers. */
export async function settled(turns = 5): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** One execution handed to the fake executor. */
export class FakeExecution implements RunPromise {
  readonly queued: QueuedRun;
  readonly context: ExecuteContext;
  readonly #result = deferred<RunResult>();
  readonly #stopped = deferred<void>();
  readonly #owner: FakeExecutor;
  #settled = false;
  /** The thread has returned (or been terminated). */
  physicallyStopped = false;
  cancelCalls = 0;

  constructor(owner: FakeExecutor, queued: QueuedRun, context: ExecuteContext) {
    this.#owner = owner;
    this.queued = queued;
    this.context = context;
    // Nobody may wait on a canceled execution; its rejection must not count as unhandled.
    void this.#result.promise.then(
      () => undefined,
      () => undefined,
    );
  }

  get settled(): boolean {
    return this.#settled;
  }

  run(): QueuedRun {
    return this.queued;
  }

  wait(): Promise<RunResult> {
    return this.#result.promise;
  }

  cancel(): void {
    this.cancelCalls++;
    if (this.#settled) return;
    this.#settled = true;
    this.#result.reject(new RunCanceledError(this.queued.taskId, this.queued.runId));
    if (!this.#owner.lingerOnCancel) this.stop();
  }

  finished(): Promise<void> {
    return this.#stopped.promise;
  }

  /** Ends the execution with `result` (the thread returns). */
  complete(result: RunResult = {}): void {
    if (this.#settled) throw new Error(`execution ${this.queued.runId} already settled`);
    this.#settled = true;
    this.#result.resolve(result);
    this.stop();
  }

  /** The thread stops (after a cancel it ignored for a while, or on completion). */
  stop(): void {
    if (this.physicallyStopped) return;
    this.physicallyStopped = true;
    this.#owner.onStopped(this);
    this.#stopped.resolve();
  }
}

/** An executor that records executions; the test completes, fails or cancels them. */
export class FakeExecutor implements Executor {
  readonly executions: FakeExecution[] = [];
  /** Canceled executions keep "running" until `stop()` (a thread that ignores cancel for a while). */
  lingerOnCancel = false;
  /** Executions physically running per task id, and the most ever seen at once. */
  readonly running = new Map<string, number>();
  readonly maxRunning = new Map<string, number>();
  throwOnExecute: Error | undefined;
  /** Executions that started while their task already had `maxConcurrency` running (should stay empty). */
  readonly violations: string[] = [];

  execute(run: QueuedRun, context: ExecuteContext): RunPromise {
    if (this.throwOnExecute !== undefined) throw this.throwOnExecute;
    const before = this.running.get(run.taskId) ?? 0;
    if (before >= context.task.maxConcurrency) {
      this.violations.push(`${run.taskId}: run ${run.runId} started with ${before} running, maxConcurrency ${context.task.maxConcurrency}`);
    }
    // What a pool thread does first: CLAIMED → RUNNING (fails if canceled before it started).
    context.slot.table.start(context.slot.slot, context.slot.generation);
    const execution = new FakeExecution(this, run, context);
    this.executions.push(execution);
    const now = (this.running.get(run.taskId) ?? 0) + 1;
    this.running.set(run.taskId, now);
    this.maxRunning.set(run.taskId, Math.max(now, this.maxRunning.get(run.taskId) ?? 0));
    return execution;
  }

  onStopped(execution: FakeExecution): void {
    const id = execution.queued.taskId;
    this.running.set(id, (this.running.get(id) ?? 1) - 1);
  }

  /** Executions not yet settled (wait() pending). */
  pending(taskId?: string): FakeExecution[] {
    return this.executions.filter((e) => !e.settled && (taskId === undefined || e.queued.taskId === taskId));
  }

  /** Executions settled but still physically running. */
  lingering(): FakeExecution[] {
    return this.executions.filter((e) => e.settled && !e.physicallyStopped);
  }

  last(): FakeExecution {
    const last = this.executions[this.executions.length - 1];
    if (last === undefined) throw new Error('no execution yet');
    return last;
  }

  scheduledFor(taskId?: string): number[] {
    return this.executions.filter((e) => taskId === undefined || e.queued.taskId === taskId).map((e) => e.queued.scheduledFor);
  }
}

export interface Harness {
  readonly clock: ManualClock;
  readonly store: MemoryDesiredState;
  readonly log: MemoryRunLog;
  readonly executor: FakeExecutor;
  readonly slots: SlotTable;
  readonly scheduler: TaskScheduler;
}

const quietLogger = createDefaultLogger('tickpool-test');
quietLogger.level = 'silent';

/** A scheduler on a ManualClock at `start` with an in-memory store and log and a fake executor. */
export function harness(start = 0, options: Partial<TaskSchedulerOptions> = {}): Harness {
  const clock = new ManualClock(start);
  const store = new MemoryDesiredState({ clock });
  const log = new MemoryRunLog();
  const executor = new FakeExecutor();
  const slots = SlotTable.create({ initialSlots: 64 });
  const scheduler = new TaskScheduler({
    desiredState: store,
    executor,
    logWriter: log,
    clock,
    now: start,
    slots,
    logger: quietLogger,
    tickMs: 0,
    backoff: { baselineMs: 100, limitMs: 1000, factor: 2 },
    ...options,
  });
  return { clock, store, log, executor, slots, scheduler };
}

export { quietLogger };
