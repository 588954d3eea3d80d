/**
 * `postgresBackend()`: the factory of PostgreSQL backends. Each engine it is given to gets its own parts (a broker,
 * a state store with its replica, a plan committer, a reaper, a LISTEN connection) on one shared schema; any number
 * of engine processes on any number of machines may share it, tasks included: they are declared into a shared
 * catalogue and claimed by the processes in fair shares (`tasks/`).
 */
import type { Backend, BackendContext, BackendFactory } from '../backend/backend.js';
import { InvalidOptionError } from '../errors.js';
import { childLogger } from '../observability/logger.js';
import { assertKey } from '../storable-key.js';
import { backendError, Database } from './database.js';
import { Listener } from './listener.js';
import { migrate } from './migrate.js';
import { schemaNames, type SchemaNames } from './names.js';
import { resolvePostgresOptions, type PostgresBackendOptions, type ResolvedPostgresOptions } from './options.js';
import { PgBroker } from './broker/pg-broker.js';
import { Reaper } from './broker/reaper.js';
import { PgPlans } from './pg-plans.js';
import { PgState } from './pg-state.js';
import { checkClaimSettings, PgTaskStore } from './tasks/pg-task-store.js';

/** The PostgreSQL backend's parts, with their own types (`engine.broker` is a `PgBroker`, and so on). */
export interface PostgresBackend extends Backend {
  readonly broker: PgBroker;
  readonly state: PgState;
  readonly plans: PgPlans;
  readonly tasks: PgTaskStore;
  /** This backend instance's id: the origin of what it enqueues, the holder of what it dequeues. */
  readonly nodeId: string;
  /** The schema it runs on. */
  readonly schema: string;
  /** Runs a reaper pass now (expired leases, delays that are over); for operators and tests. */
  reap(): Promise<void>;
  open(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A backend on PostgreSQL for `createEngine({ backend })`. The options are checked here (typed errors, nothing
 * connects): `connectionString` or `pool` (a `pg.Pool` the caller owns), `schema` (default `tickpool`), `pollMs`
 * (default 1000). `engine.start()` connects, migrates and joins; `engine.stop()` gives back what the process holds.
 */
export function postgresBackend(options: PostgresBackendOptions): BackendFactory<PostgresBackend> {
  const resolved = resolvePostgresOptions(options);
  return Object.freeze({
    name: 'postgres',
    create: (context: BackendContext): PostgresBackend => createPostgresBackend(resolved, context),
  });
}

function createPostgresBackend(o: ResolvedPostgresOptions, context: BackendContext): PostgresBackend {
  // Before anything is made: an engine refused here owns nothing yet.
  if (context.claims !== undefined) checkClaimSettings(context.claims);
  // A table's name is stored with each of its records' keys: the keys' rule, as the in-memory state store applies it.
  context.tables.forEach((table, i) => assertKey(`tables[${i}]`, table, InvalidOptionError));
  const names: SchemaNames = schemaNames(o.schema);
  const nodeId = PgBroker.newNodeId();
  const logger = childLogger(context.logger, { component: 'postgres' });
  const { clock } = context;
  const db = new Database({
    connectionString: o.connectionString,
    pool: o.pool,
    applicationName: `tickpool ${nodeId}`,
    onIdleError: (error) => logger.warn({ err: error }, 'an idle PostgreSQL connection failed'),
  });
  const listener = new Listener(db, clock, logger);
  const state = new PgState(db, names, context.tables, clock, logger, o.pollMs);
  const broker = new PgBroker({ db, names, clock, logger, listener, settings: context.broker, pollMs: o.pollMs, nodeId });
  const plans = new PgPlans({ db, names, state, broker, logger, evaluatePlan: context.evaluatePlan, nodeId });
  state.writer = (ops) => plans.write(ops);
  broker.onDelivery = (evaluation) => {
    // The thread runs it on a replica at its modifyIndex or beyond: make sure this replica is on its way there.
    if ((evaluation.modifyIndex ?? 0) > state.index) state.hint();
  };
  const reaper = new Reaper(db, names, clock, logger, o.pollMs, broker.leaseSettings, nodeId, {
    reaped: (token) => broker.reaped(token),
    ready: () => broker.kick(),
  });
  broker.subscribe();
  listener.subscribe(names.channels.state, { onNotify: () => state.hint(), onConnect: () => state.hint() });
  const tasks = new PgTaskStore({ db, names, logger, clock, runLogLimit: o.runLogLimit, listener });

  let opened = false;
  let closed = false;
  return {
    broker,
    state,
    plans,
    tasks,
    nodeId,
    schema: o.schema,
    reap: () => reaper.runNow(),
    async open(): Promise<void> {
      await migrate(db, names);
      try {
        await listener.start();
      } catch (error) {
        throw backendError(error, 'LISTEN');
      }
      await state.load();
      opened = true;
      state.start();
      broker.open();
      plans.open();
      reaper.start();
      tasks.open();
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      // First: its claims are given back while the database is still there (the task scheduler has stopped).
      await tasks.close();
      await plans.stop();
      await reaper.close();
      await broker.close();
      await state.close();
      await listener.close();
      await db.close();
      if (!opened) logger.debug('PostgreSQL backend closed without having opened');
    },
  };
}
