/**
 * The two backends under one suite: the in-memory parts (`memoryBackend()`) on a ManualClock, and the PostgreSQL
 * parts on a schema of their own, also on a ManualClock for their local timers. `advance(ms)` lets `ms` pass for
 * every deadline and delay: the ManualClock moves, and for PostgreSQL the database's deadlines (`lease_until`,
 * `due_at`, database time) are moved back by as much and a reaper pass runs, then the test waits until what came
 * due has been handled. No sleeps: the deadlines are far beyond what real time can reach during a test.
 */
import { pino } from 'pino';
import { Registry } from 'prom-client';
import type { Backend, BackendContext } from '../../../src/backend/backend.js';
import { memoryBackend } from '../../../src/memory/memory-backend.js';
import { ManualClock } from '../../../src/clock.js';
import type { PgBroker } from '../../../src/postgres/broker/pg-broker.js';
import { postgresBackend } from '../../../src/postgres/backend.js';
import type { EvaluatePlan } from '../../../src/state/types.js';
import { adminPool, databaseUrl, dropSchema, schemaName, skipWithoutDatabase } from '../helpers.js';

export const settings = Object.freeze({
  nackTimeoutMs: 600_000,
  deliveryLimit: 2,
  initialNackDelayMs: 100_000,
  subsequentNackDelayMs: 200_000,
});

export interface Subject {
  readonly name: string;
  readonly backend: Backend;
  readonly clock: ManualClock;
  advance(ms: number): Promise<void>;
  close(): Promise<void>;
}

export interface SubjectOptions {
  readonly tables?: readonly string[];
  readonly evaluatePlan?: EvaluatePlan;
}

export interface SubjectFactory {
  readonly name: string;
  readonly skip: string | false;
  make(options?: SubjectOptions): Promise<Subject>;
}

function context(clock: ManualClock, options: SubjectOptions): BackendContext {
  return {
    clock,
    logger: pino({ level: 'silent' }),
    registry: new Registry(),
    tables: options.tables ?? ['allocs'],
    evaluatePlan: options.evaluatePlan,
    broker: { ...settings, knownTypes: ['service', 'a', 'b'], maxPayloadBytes: 1 << 20 },
  };
}

const memory: SubjectFactory = {
  name: 'memory',
  skip: false,
  async make(options = {}) {
    const clock = new ManualClock(1_000_000);
    const backend = memoryBackend().create(context(clock, options));
    backend.open();
    return {
      name: 'memory',
      backend,
      clock,
      async advance(ms) {
        clock.advance(ms);
      },
      async close() {
        backend.close();
      },
    };
  },
};

const postgres: SubjectFactory = {
  name: 'postgres',
  skip: skipWithoutDatabase,
  async make(options = {}) {
    const clock = new ManualClock(1_000_000);
    const schema = schemaName('c');
    const admin = adminPool();
    const backend = postgresBackend({ connectionString: databaseUrl!, schema }).create(context(clock, options));
    await backend.open();
    const broker = backend.broker as PgBroker;
    return {
      name: 'postgres',
      backend,
      clock,
      async advance(ms) {
        await admin.query(
          `UPDATE "${schema}".evals SET lease_until = lease_until - $1::float8 * interval '1 millisecond',
                  due_at = due_at - $1::float8 * interval '1 millisecond' WHERE state IN ('unacked', 'waiting')`,
          [ms],
        );
        clock.advance(ms);
        await broker.idle();
        await backend.reap();
        await broker.idle();
      },
      async close() {
        await backend.close();
        await dropSchema(admin, schema);
        await admin.end();
      },
    };
  },
};

export const subjects: readonly SubjectFactory[] = [memory, postgres];
