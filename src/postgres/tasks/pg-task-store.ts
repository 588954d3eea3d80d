/**
 * The PostgreSQL task store: tasks shared by every engine process on one schema. `engine.tasks.add` declares a task
 * into the shared catalogue (idempotent: the same id and definition changes nothing), the claim keeper decides which
 * tasks this process runs, and every run's writes go through the fenced functions of the schema (`task_fence`).
 */
import { hostname } from 'node:os';
import type { CatalogueTask, ClaimSettings, SharedTaskBackend, StoreProcess } from '../../backend/task-backend.js';
import { systemClock, type Clock } from '../../clock.js';
import { InvalidArgumentError, InvalidOptionError, InvalidStateError, InvalidTaskError } from '../../errors.js';
import type { Logger } from '../../observability/logger.js';
import { assertKey, isStorableKey } from '../../storable-key.js';
import type { TaskScheduler } from '../../tasks/task-scheduler.js';
import type { Task, TaskMeta } from '../../tasks/task.js';
import type { Database } from '../database.js';
import type { Listener } from '../listener.js';
import type { SchemaNames } from '../names.js';
import { ClaimKeeper, leaseTiming, type ClaimKeeperStats } from './claim-keeper.js';
import { decodeDefinition, encodeDefinition } from './definition.js';
import { HeldClaims } from './held-claims.js';
import { PgDesiredState } from './pg-desired-state.js';
import { PgRunLog } from './pg-run-log.js';
import { taskQueries } from './queries.js';
import { runRecord, type RunLogRow } from './run-record.js';
import { RunWrites } from './run-writes.js';
import type { TaskStoreContext } from './store-context.js';

export interface PgTaskStoreOptions {
  readonly db: Database;
  readonly names: SchemaNames;
  readonly logger: Logger;
  /** The engine's clock: a declared task starts after `meta.latestCompleted`, or after its now. */
  readonly clock: Clock;
  /** Run log entries kept per task. */
  readonly runLogLimit: number;
  /** Notifications of catalogue changes and given-back claims (a hint; the keeper's rounds are the backstop). */
  readonly listener?: Listener;
  /** Real time of the leases. Default the system clock. */
  readonly leaseClock?: Clock;
  /** A readable name of this process in claims and run logs. Default `host/pid`. */
  readonly processName?: string;
}

/**
 * Throws `InvalidOptionError` (`claimTtlMs`) when the lease is too short: a process cut off cancels its runs at half
 * the lease, and a handler that ignores the cancel is terminated `cancelGraceMs` later; both must fit in the half
 * lease before another process may claim the task.
 */
export function checkClaimSettings(settings: ClaimSettings): void {
  const { claimTtlMs, tickMs, cancelGraceMs } = settings;
  const { leaseMs } = leaseTiming(claimTtlMs, tickMs);
  if (!(leaseMs / 2 > cancelGraceMs)) {
    const least = Math.ceil((2 * cancelGraceMs + 1) / 0.8);
    throw new InvalidOptionError('claimTtlMs', `at least ${least} ms with a shared backend (half its lease must exceed cancelGraceMs, ${cancelGraceMs} ms)`, claimTtlMs);
  }
}

export class PgTaskStore implements SharedTaskBackend<PgDesiredState, PgRunLog> {
  readonly shared = true as const;
  readonly desiredState: PgDesiredState;
  readonly runLog: PgRunLog;
  readonly #o: PgTaskStoreOptions;
  readonly #context: TaskStoreContext;
  #keeper: ClaimKeeper | undefined;
  #closed = false;
  /** Settles once the backend has opened (the schema is migrated) or closed without opening. */
  readonly #opened: Promise<void>;
  #open!: () => void;
  #neverOpened!: (error: Error) => void;

  constructor(options: PgTaskStoreOptions) {
    this.#o = options;
    const queries = taskQueries(options.names.S);
    this.#context = {
      db: options.db,
      queries,
      claims: new HeldClaims(),
      writes: new RunWrites(options.db, queries, options.runLogLimit),
      runLogLimit: options.runLogLimit,
      logger: options.logger,
      staleClaim: () => this.#keeper?.recheck(),
    };
    this.#opened = new Promise<void>((resolve, reject) => {
      this.#open = resolve;
      this.#neverOpened = reject;
    });
    // Declarations made before the engine starts wait for it; nobody may await them at all.
    this.#opened.catch(() => undefined);
    this.desiredState = new PgDesiredState(this.#context);
    this.runLog = new PgRunLog(this.#context);
    options.listener?.subscribe(options.names.channel('tasks'), {
      onNotify: () => this.#keeper?.kick(),
      onConnect: () => this.#keeper?.kick(),
    });
  }

  /** The claim keeper's view: this process's membership, its claims and its share. */
  claimStats(): ClaimKeeperStats | undefined {
    return this.#keeper?.stats();
  }

  attach(scheduler: TaskScheduler, settings: ClaimSettings): void {
    if (this.#keeper !== undefined) throw new InvalidStateError('Expected a PostgreSQL task store to be attached to one task scheduler, but it already is');
    checkClaimSettings(settings);
    const { claimTtlMs, tickMs } = settings;
    const keeper = new ClaimKeeper({
      context: this.#context,
      scheduler,
      claimTtlMs,
      tickMs,
      leaseClock: this.#o.leaseClock ?? systemClock,
      processName: this.#o.processName ?? `${hostname()}/${process.pid}`,
      identity: { host: hostname(), pid: process.pid, threads: settings.threads ?? (() => null) },
      logger: this.#o.logger,
    });
    this.#keeper = keeper;
    scheduler.events.on('task:state', ({ state }) => {
      if (state === 'running') keeper.start();
      else keeper.pause();
    });
    if (scheduler.state === 'running') keeper.start();
  }

  /** The backend has opened: the schema is there, declarations and removals go ahead. */
  open(): void {
    this.#open();
  }

  /**
   * Declares a task (see `SharedTaskBackend`). Made before the engine has started, it waits for the start (and
   * rejects with `InvalidStateError` when the engine stops without having started).
   */
  declareTask(task: Task, meta: TaskMeta): Promise<void> {
    if (this.#closed) return Promise.reject(new InvalidStateError('Expected an open task store to declare a task into, but it is closed'));
    // Thrown here, synchronously: a payload that cannot be stored is bad input, like a malformed task. The id too,
    // for a task that did not come through `validateTask`.
    assertKey('id', task.id, InvalidTaskError);
    const definition = encodeDefinition(task);
    const start = meta.latestCompleted ?? this.#o.clock.now();
    return this.#opened
      .then(() => this.#o.db.query<{ outcome: string }>(
        this.#context.queries.declare,
        [task.id, definition.bytes, definition.hash, task.retry ?? 0, start, meta.latestCompleted ?? null],
        'a task declaration',
      ))
      .then(([row]) => {
        // Claim it, or take its new definition, without waiting for the next round.
        if (row?.outcome !== 'same') this.#keeper?.kick();
      });
  }

  /** Deletes a task everywhere (see `SharedTaskBackend`); a bad id is thrown synchronously. */
  removeTask(taskId: string): Promise<boolean> {
    if (typeof taskId !== 'string' || taskId.length === 0) throw new InvalidArgumentError('taskId', 'a task id', taskId);
    // No task has an id that is not a key (storable-key.ts): there is none to remove, and text could not carry it.
    if (!isStorableKey(taskId)) return Promise.resolve(false);
    return this.#remove(taskId);
  }

  async #remove(taskId: string): Promise<boolean> {
    await this.#opened;
    const [row] = await this.#o.db.query<{ removed: boolean }>(this.#context.queries.remove, [taskId], 'a task removal');
    await this.#keeper?.drop(taskId);
    return row?.removed === true;
  }

  /** Every live member of the schema, oldest first, with the tasks it claims. */
  async clusterProcesses(): Promise<StoreProcess[]> {
    await this.#opened;
    const rows = await this.#o.db.query<{ host: string | null; pid: number | null; threads: number | null; last_seen: number | string; claimed: string[] }>(
      this.#context.queries.members,
      [],
      'the processes of the task store',
    );
    return rows.map((row) => ({
      host: row.host ?? '',
      pid: row.pid ?? 0,
      threads: row.threads ?? 0,
      lastSeen: Math.round(Number(row.last_seen)),
      claimedTasks: [...row.claimed],
    }));
  }

  /** The catalogue (or the task `taskId` alone) with each task's claim, runs in flight and newest logged run. */
  async catalogue(taskId?: string): Promise<CatalogueTask[]> {
    if (taskId !== undefined && !isStorableKey(taskId)) return [];
    await this.#opened;
    const rows = await this.#o.db.query<CatalogueRow>(this.#context.queries.catalogue, [taskId ?? null], 'the task catalogue');
    const tasks: CatalogueTask[] = [];
    for (const row of rows) {
      let task: Task;
      try {
        task = decodeDefinition(row.definition);
      } catch (error) {
        // A definition another version wrote that this one cannot read: not listed, as it could not run here.
        this.#o.logger.warn({ err: error, taskId: row.id }, 'a stored task definition is not valid here; it is not listed');
        continue;
      }
      tasks.push({
        task,
        enabled: !row.disabled,
        claimedBy: row.member === null ? undefined : { host: row.host ?? '', pid: row.pid ?? 0 },
        runsActive: row.active,
        lastRun: row.run_id === null ? undefined : runRecord({ ...row, run_id: row.run_id }),
      });
    }
    return tasks;
  }

  /** Disables a task everywhere (see `SharedTaskBackend`); a bad id is thrown synchronously. */
  disableTask(taskId: string): Promise<boolean> {
    if (typeof taskId !== 'string' || taskId.length === 0) throw new InvalidArgumentError('taskId', 'a task id', taskId);
    if (!isStorableKey(taskId)) return Promise.resolve(false);
    return this.#disable(taskId);
  }

  async #disable(taskId: string): Promise<boolean> {
    await this.#opened;
    const [row] = await this.#o.db.query<{ found: boolean }>(this.#context.queries.disable, [taskId], 'disabling a task');
    if (row?.found !== true) return false;
    await this.#keeper?.disable(taskId);
    return true;
  }

  /** Enables a disabled task again from `now` on (see `SharedTaskBackend`); a bad id is thrown synchronously. */
  enableTask(taskId: string, now: number): Promise<boolean> {
    if (typeof taskId !== 'string' || taskId.length === 0) throw new InvalidArgumentError('taskId', 'a task id', taskId);
    if (!isStorableKey(taskId)) return Promise.resolve(false);
    return this.#enable(taskId, now);
  }

  async #enable(taskId: string, now: number): Promise<boolean> {
    await this.#opened;
    const [row] = await this.#o.db.query<{ found: boolean }>(this.#context.queries.enable, [taskId, now], 'enabling a task');
    if (row?.found !== true) return false;
    this.#keeper?.kick();
    return true;
  }

  /** Gives back this process's claims and leaves (after the scheduler stopped); the database stays open. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#neverOpened(new InvalidStateError('Expected the engine to start before its tasks were declared or removed, but it stopped'));
    await this.#keeper?.close();
  }
}

/** A row of the catalogue query: the task and its newest run log row (whose columns are null when it has none). */
type CatalogueRow = Omit<RunLogRow, 'run_id'> & {
  readonly id: string;
  readonly definition: Buffer;
  readonly disabled: boolean;
  readonly member: string | null;
  readonly host: string | null;
  readonly pid: number | null;
  readonly active: number;
  readonly run_id: string | null;
};
