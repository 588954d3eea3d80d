/**
 * Engine processes of the shared task store, in one test process: each "node" is a task scheduler with a fake
 * executor (the test ends its runs) on its own database pool and its own PostgreSQL task store, all on one schema.
 * Schedules run on a ManualClock the nodes share; leases run on real time against the real database.
 */
import { pino } from 'pino';
import type { Pool } from 'pg';
import { ManualClock } from '../../../src/clock.js';
import { Database } from '../../../src/postgres/database.js';
import { Listener } from '../../../src/postgres/listener.js';
import { migrate } from '../../../src/postgres/migrate.js';
import { schemaNames, type SchemaNames } from '../../../src/postgres/names.js';
import { PgTaskStore } from '../../../src/postgres/tasks/pg-task-store.js';
import { SlotTable } from '../../../src/slots/slot-table.js';
import type { TaskSchedulerOptions } from '../../../src/tasks/scheduler-options.js';
import { TaskScheduler } from '../../../src/tasks/task-scheduler.js';
import { FakeExecutor } from '../../tasks/fixtures.js';
import { adminPool, databaseUrl, dropSchema, schemaName } from '../helpers.js';

export const silent = pino({ level: 'silent' });

export interface Node {
  readonly name: string;
  readonly db: Database;
  readonly store: PgTaskStore;
  readonly scheduler: TaskScheduler;
  readonly executor: FakeExecutor;
  readonly listener: Listener | undefined;
  /** Stops the scheduler (its runs canceled and logged), gives back its claims and leaves; closes its pool. */
  stop(): Promise<void>;
  /** Dies: its pool is ended under it, nothing given back (the database keeps what it last wrote). */
  die(): Promise<void>;
}

export interface Cluster {
  readonly schema: string;
  readonly names: SchemaNames;
  readonly admin: Pool;
  readonly clock: ManualClock;
  readonly nodes: Node[];
  node(options?: NodeOptions): Promise<Node>;
  close(): Promise<void>;
}

export interface NodeOptions {
  readonly claimTtlMs?: number;
  readonly tickMs?: number;
  readonly runLogLimit?: number;
  /** LISTEN for catalogue changes (default true). */
  readonly listen?: boolean;
  readonly name?: string;
}

/** A task scheduler over `store` whose runs go to a fake executor the test ends, on `clock`; not started. */
export function fakeScheduler(store: Pick<TaskSchedulerOptions, 'desiredState'> & { readonly runLog: TaskSchedulerOptions['logWriter'] }, clock: ManualClock): { scheduler: TaskScheduler; executor: FakeExecutor } {
  const executor = new FakeExecutor();
  const scheduler = new TaskScheduler({
    desiredState: store.desiredState,
    logWriter: store.runLog,
    executor,
    clock,
    logger: silent,
    slots: SlotTable.create({ initialSlots: 256 }),
    backoff: { baselineMs: 100, limitMs: 1000, factor: 2 },
  });
  return { scheduler, executor };
}

export function database(applicationName = 'tickpool-test'): Database {
  return new Database({ connectionString: databaseUrl, pool: undefined, applicationName, onIdleError: () => undefined });
}

export async function cluster(start = Date.UTC(2030, 0, 1)): Promise<Cluster> {
  const schema = schemaName('tasks');
  const names = schemaNames(schema);
  const admin = adminPool();
  const setup = database();
  await migrate(setup, names);
  await setup.close();
  const clock = new ManualClock(start);
  const nodes: Node[] = [];
  let count = 0;
  const c: Cluster = {
    schema,
    names,
    admin,
    clock,
    nodes,
    async node(options: NodeOptions = {}): Promise<Node> {
      const name = options.name ?? `node${count++}`;
      const db = database(`tickpool-test-${name}`);
      const listener = options.listen === false ? undefined : new Listener(db, clock, silent);
      const store = new PgTaskStore({ db, names, logger: silent, clock, runLogLimit: options.runLogLimit ?? 100, processName: name, ...(listener === undefined ? {} : { listener }) });
      const { scheduler, executor } = fakeScheduler(store, clock);
      store.open();
      store.attach(scheduler, { claimTtlMs: options.claimTtlMs ?? 2000, tickMs: options.tickMs ?? 200, cancelGraceMs: 100 });
      await listener?.start();
      scheduler.start();
      let ended = false;
      const node: Node = {
        name,
        db,
        store,
        scheduler,
        executor,
        listener,
        async stop() {
          if (ended) return;
          ended = true;
          await scheduler.stop();
          await store.close();
          await listener?.close();
          await db.close();
        },
        async die() {
          if (ended) return;
          ended = true;
          await listener?.close();
          await db.close();
        },
      };
      nodes.push(node);
      return node;
    },
    async close() {
      await Promise.allSettled(nodes.map((n) => n.stop()));
      await dropSchema(admin, schema);
      await admin.end();
    },
  };
  return c;
}

/** Polls `check` until it holds (true), or fails with `what` after `timeoutMs`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Claim rounds the node's keeper has taken in: how the tests bound when something happens, instead of by time. */
export function rounds(node: Node): number {
  return node.store.claimStats()?.rounds ?? 0;
}

export function held(node: Node): number {
  const stats = node.store.claimStats();
  return stats === undefined ? 0 : stats.held;
}
