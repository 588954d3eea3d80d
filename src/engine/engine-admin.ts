/**
 * `engine.admin`: what an operator sees of an engine and may do to it. Evaluations by state a page at a time, one in
 * detail, a failed one replayed or discarded, a type paused; tasks with their next run and run log, a run forced, a
 * task disabled; the threads and what each runs, a running item canceled; the processes. Every answer is a promise,
 * so that a backend whose broker lives in a database answers the same way as the in-memory one.
 *
 * Every mutation emits its `admin:*` event and is logged at `info` with who made it (`by`).
 */
import { hostname } from 'node:os';
import type { BrokerBackend } from '../backend/broker-backend.js';
import type { BrokerAdmin, EvaluationDetail, EvaluationPage, EvaluationQuery, QueueDepths } from '../broker/admin-types.js';
import { InvalidArgumentError, InvalidStateError, TaskNotFoundError } from '../errors.js';
import { TypedEmitter } from '../events.js';
import type { Logger } from '../observability/logger.js';
import type { ThreadPool } from '../pool/thread-pool.js';
import type { Task } from '../tasks/task.js';
import type { TaskScheduler } from '../tasks/task-scheduler.js';
import type { RunRecord } from '../tasks/types.js';
import type { ActorOptions, AdminEvents, ProcessView, TaskDetail, TaskView, ThreadView } from './admin-types.js';
import type { EngineTasks } from './engine-tasks.js';
import type { CatalogueTask, SharedTaskBackend, TaskBackend } from '../backend/task-backend.js';

/** Most failed evaluations one `replayFailed` or `discardFailed` call takes. */
export const MAX_BULK = 10_000;

export interface EngineAdminOptions {
  readonly broker: BrokerBackend;
  readonly tasks: EngineTasks<TaskBackend>;
  /** The task store `tasks` keeps its tasks in: a shared one answers for the whole cluster. */
  readonly store: TaskBackend;
  readonly scheduler: TaskScheduler;
  readonly pool: ThreadPool;
  readonly logger: Logger;
  /** Cancels the evaluation a worker of this engine holds (`engine.cancel`). */
  readonly cancelEvaluation: (id: string) => boolean;
}

function isBrokerAdmin(broker: unknown): broker is BrokerAdmin {
  return typeof (broker as Partial<BrokerAdmin>).listEvaluations === 'function';
}

const actor = (options: ActorOptions | undefined): string => {
  if (options === undefined) return 'api';
  if (options === null || typeof options !== 'object') throw new InvalidArgumentError('options', 'an object { by? }', options);
  const by = options.by ?? 'api';
  if (typeof by !== 'string' || by === '' || by.length > 200) throw new InvalidArgumentError('options.by', 'a non-empty string of at most 200 characters', by);
  return by;
};

const nonEmpty = (name: string, value: unknown): string => {
  if (typeof value !== 'string' || value === '') throw new InvalidArgumentError(name, 'a non-empty string', value);
  return value;
};

/** Turns a throw into a rejection: every admin method answers with a promise. */
async function answer<T>(fn: () => T | Promise<T>): Promise<T> {
  return fn();
}

export class EngineAdmin {
  readonly events: TypedEmitter<AdminEvents>;
  readonly #o: EngineAdminOptions;
  readonly #process = { host: hostname(), pid: process.pid };

  constructor(options: EngineAdminOptions) {
    this.#o = options;
    this.events = new TypedEmitter<AdminEvents>(() => options.logger);
  }

  #broker(): BrokerAdmin & BrokerBackend {
    const broker = this.#o.broker;
    if (!isBrokerAdmin(broker)) throw new InvalidStateError('Expected a backend whose broker offers the admin API, but this one does not');
    return broker;
  }

  #changed<K extends keyof AdminEvents>(event: K, payload: AdminEvents[K]): void {
    const fields: Record<string, unknown> = { ...payload, event };
    this.#o.logger.info(fields, `${event} by ${payload.by}`);
    if (this.events.hasListeners(event)) this.events.emit(event, payload);
  }

  // ───────────────────────────── evaluations ─────────────────────────────

  /** A page of the evaluations in one state (`ready`, `unacked`, `pending`, `delayed`, `failed`). */
  evaluations(query: EvaluationQuery): Promise<EvaluationPage> {
    return answer(() => this.#broker().listEvaluations(query));
  }

  /** How many evaluations are in each state, and ready and unacked per type; each count stops at `cap` (default 10,000). */
  depths(cap = 10_000): Promise<QueueDepths> {
    return answer(() => this.#broker().depths(cap));
  }

  /** One evaluation the broker holds, in detail with its deliveries; undefined when it holds none by that id. */
  evaluation(id: string): Promise<EvaluationDetail | undefined> {
    return answer(() => this.#broker().evaluationDetail(nonEmpty('id', id)));
  }

  /** A failed evaluation back to its queue with a fresh delivery count; false when `id` is not a failed one. */
  replay(id: string, options?: ActorOptions): Promise<boolean> {
    return answer(async () => {
      const by = actor(options);
      const replayed = await this.#broker().replay(nonEmpty('id', id));
      if (replayed) this.#changed('admin:replay', { id, by });
      return replayed;
    });
  }

  /** Drops an evaluation that is not in flight (its `done` rejects with `AbortedError`); false when there is none. */
  discard(id: string, options?: ActorOptions): Promise<boolean> {
    return answer(async () => {
      const by = actor(options);
      const broker = this.#broker();
      nonEmpty('id', id);
      const detail = await broker.evaluationDetail(id);
      if (detail === undefined || detail.state === 'unacked') return false;
      const removed = await broker.remove(id, undefined, new Error(`discarded by ${by}`));
      if (removed) this.#changed('admin:discard', { id, by });
      return removed;
    });
  }

  /** Replays every failed evaluation of `type` that is not in flight (up to `MAX_BULK`); answers how many. */
  replayFailed(type: string, options?: ActorOptions): Promise<number> {
    return this.#eachFailed(type, options, 'admin:replay', (broker, id) => broker.replay(id));
  }

  /** Discards every failed evaluation of `type` that is not in flight (up to `MAX_BULK`); answers how many. */
  discardFailed(type: string, options?: ActorOptions): Promise<number> {
    return this.#eachFailed(type, options, 'admin:discard', (broker, id, by) => broker.remove(id, undefined, new Error(`discarded by ${by}`)));
  }

  #eachFailed(
    type: string,
    options: ActorOptions | undefined,
    event: 'admin:replay' | 'admin:discard',
    act: (broker: BrokerAdmin & BrokerBackend, id: string, by: string) => boolean | PromiseLike<boolean>,
  ): Promise<number> {
    return answer(async () => {
      const by = actor(options);
      const broker = this.#broker();
      let count = 0;
      for (const id of await broker.failedIds(nonEmpty('type', type), MAX_BULK)) {
        if (await act(broker, id, by)) {
          count++;
          this.#changed(event, { id, by });
        }
      }
      return count;
    });
  }

  /** Workers stop taking `type`; what is in flight finishes. */
  pauseType(type: string, options?: ActorOptions): Promise<void> {
    return answer(async () => {
      const by = actor(options);
      await this.#broker().pauseType(nonEmpty('type', type));
      this.#changed('admin:pause', { type, by });
    });
  }

  resumeType(type: string, options?: ActorOptions): Promise<void> {
    return answer(async () => {
      const by = actor(options);
      await this.#broker().resumeType(nonEmpty('type', type));
      this.#changed('admin:resume', { type, by });
    });
  }

  pausedTypes(): Promise<readonly string[]> {
    return answer(() => this.#broker().pausedTypes());
  }

  // ───────────────────────────── tasks ─────────────────────────────

  /** A shared store that lists its catalogue, if the engine has one. */
  #catalogue(): (SharedTaskBackend & Required<Pick<SharedTaskBackend, 'catalogue'>>) | undefined {
    const store = this.#o.store;
    return store.shared === true && typeof store.catalogue === 'function' ? (store as SharedTaskBackend & Required<Pick<SharedTaskBackend, 'catalogue'>>) : undefined;
  }

  /**
   * The tasks this engine schedules, and those disabled here; with a shared store, every task of its catalogue,
   * whichever process claims it.
   */
  tasks(): Promise<TaskView[]> {
    return answer(async () => {
      const shared = this.#catalogue();
      if (shared !== undefined) return (await shared.catalogue()).map((entry) => this.#sharedView(entry));
      const { scheduler, tasks } = this.#o;
      const views: TaskView[] = [];
      for (const id of scheduler.claimedTaskIds()) views.push(await this.#view(scheduler.claimedTask(id)!, true));
      for (const task of tasks.disabledTasks()) views.push(await this.#view(task, false));
      return views.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    });
  }

  /**
   * One task with its run log (newest first); undefined when it is neither scheduled nor disabled here (with a
   * shared store: when its catalogue has no such task).
   */
  task(id: string): Promise<TaskDetail | undefined> {
    return answer(async () => {
      nonEmpty('id', id);
      const shared = this.#catalogue();
      if (shared !== undefined) {
        const [entry] = await shared.catalogue(id);
        if (entry === undefined) return undefined;
        const runs = await this.#runs(id);
        return { ...this.#sharedView(entry), lastRun: runs[0], payload: entry.task.payload, runs };
      }
      const claimed = this.#o.scheduler.claimedTask(id);
      const task = claimed ?? this.#o.tasks.disabledTasks().find((t) => t.id === id);
      if (task === undefined) return undefined;
      const runs = await this.#runs(id);
      return { ...(await this.#view(task, claimed !== undefined, runs)), payload: task.payload, runs };
    });
  }

  /**
   * A run of the task now, ahead of scheduled ones; answers its run id. Only a task this process claims
   * (`TaskNotFoundError` otherwise): a shared store's manual run is queued under the claim of the process that
   * runs it.
   */
  forceRun(taskId: string, options?: ActorOptions): Promise<{ readonly runId: string }> {
    return answer(async () => {
      const by = actor(options);
      nonEmpty('taskId', taskId);
      if (this.#o.scheduler.claimedTask(taskId) === undefined) throw new TaskNotFoundError(taskId);
      const forced = await this.#o.tasks.forceRun(taskId);
      this.#changed('admin:force-run', { taskId, runId: forced.runId, by });
      return { runId: forced.runId };
    });
  }

  /** The task creates no runs and keeps its definition; runs in flight finish (resolves once they have). */
  disableTask(taskId: string, options?: ActorOptions): Promise<void> {
    return answer(async () => {
      const by = actor(options);
      await this.#o.tasks.disable(nonEmpty('taskId', taskId));
      this.#changed('admin:disable', { taskId, by });
    });
  }

  enableTask(taskId: string, options?: ActorOptions): Promise<void> {
    return answer(async () => {
      const by = actor(options);
      await this.#o.tasks.enable(nonEmpty('taskId', taskId));
      this.#changed('admin:enable', { taskId, by });
    });
  }

  async #runs(taskId: string): Promise<RunRecord[]> {
    const log = this.#o.tasks.runLog as { runs?: (id: string) => RunRecord[] | Promise<RunRecord[]> };
    if (typeof log.runs !== 'function') return [];
    return [...(await log.runs(taskId))];
  }

  /** A catalogue entry's view: what this process schedules of it from here, the rest as the store has it. */
  #sharedView(entry: CatalogueTask): TaskView {
    const { task } = entry;
    const here = this.#o.scheduler.claimedTask(task.id) !== undefined;
    const stats = here ? this.#o.tasks.taskStats(task.id) : undefined;
    return {
      id: task.id,
      schedule: task.cron !== undefined ? { cron: task.cron, timezone: task.timezone } : { every: task.every! },
      handler: task.handler,
      maxConcurrency: task.maxConcurrency,
      enabled: entry.enabled,
      nextDue: stats !== undefined && Number.isFinite(stats.nextDue) ? stats.nextDue : undefined,
      runsActive: stats?.runs ?? entry.runsActive,
      slotsBusy: stats?.slotsBusy ?? 0,
      lastRun: entry.lastRun,
      claimedBy: entry.claimedBy,
    };
  }

  async #view(task: Task, enabled: boolean, runs?: readonly RunRecord[]): Promise<TaskView> {
    const stats = enabled ? this.#o.tasks.taskStats(task.id) : undefined;
    const log = runs ?? (await this.#runs(task.id));
    return {
      id: task.id,
      schedule: task.cron !== undefined ? { cron: task.cron, timezone: task.timezone } : { every: task.every! },
      handler: task.handler,
      maxConcurrency: task.maxConcurrency,
      enabled,
      nextDue: stats !== undefined && Number.isFinite(stats.nextDue) ? stats.nextDue : undefined,
      runsActive: stats?.runs ?? 0,
      slotsBusy: stats?.slotsBusy ?? 0,
      lastRun: log[0],
      // A local store's tasks are this process's: claimed here while enabled.
      ...(enabled ? { claimedBy: this.#process } : {}),
    };
  }

  // ───────────────────────────── threads and processes ─────────────────────────────

  /** Each live thread and what it runs. */
  threads(): Promise<ThreadView[]> {
    return answer(() => {
      const { pool } = this.#o;
      const running = new Map(pool.running().map((r) => [r.threadIndex, r]));
      return pool.stats().perThread.map((t) => {
        const r = running.get(t.index);
        return {
          index: t.index,
          ready: t.ready,
          parked: t.parked,
          running: r === undefined ? undefined : { kind: r.kind, id: r.id, name: r.name, startedAt: r.startedAt, predictedMs: r.predictedMs },
        };
      });
    });
  }

  /**
   * Cancels what thread `threadIndex` runs: an evaluation is canceled as `engine.cancel` does (nacked for
   * redelivery), a task run ends `canceled`. False when the thread runs nothing.
   */
  cancel(threadIndex: number, options?: ActorOptions): Promise<boolean> {
    return answer(() => {
      const by = actor(options);
      if (!Number.isSafeInteger(threadIndex) || threadIndex < 0) throw new InvalidArgumentError('threadIndex', 'a thread index (an integer >= 0)', threadIndex);
      const item = this.#o.pool.running().find((r) => r.threadIndex === threadIndex);
      if (item === undefined) return false;
      const canceled = item.kind === 'eval' ? this.#o.cancelEvaluation(item.id) : this.#o.pool.cancel(item.slot, item.generation);
      if (canceled) this.#changed('admin:cancel', { threadIndex, id: item.id, by });
      return canceled;
    });
  }

  /** The engine processes sharing this backend (in memory: this one; with a shared store, its every live process). */
  processes(): Promise<ProcessView[]> {
    const store = this.#o.store;
    if (store.shared === true && typeof store.clusterProcesses === 'function') {
      return answer(async () => (await store.clusterProcesses!()).map((p) => ({ ...p, claimedTasks: [...p.claimedTasks] })));
    }
    return answer(() => [
      {
        host: this.#process.host,
        pid: this.#process.pid,
        threads: this.#o.pool.threadCount,
        lastSeen: Date.now(),
        claimedTasks: this.#o.scheduler.claimedTaskIds().sort(),
      },
    ]);
  }
}
