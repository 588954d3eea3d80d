/**
 * One engine process of the demo on PostgreSQL (`npm start -- --postgres URL --processes N` starts N of them): the
 * demo's schedulers, fit check and tables on the shared schema named by its parent. It counts what it did from its
 * broker's events, and reports them when its parent says stop.
 */
import { Registry } from 'prom-client';
import { pino } from 'pino';
import { createEngine } from '../../src/index.js';
import { postgresBackend } from '../../src/postgres/index.js';
import { createFitCheck } from './evaluate-plan.js';
import { tables } from './model.js';

export interface ProcessReport {
  readonly name: string;
  readonly acked: number;
  readonly failed: number;
  readonly failedBy: Readonly<Record<string, number>>;
  readonly nacks: number;
  readonly nackTimeouts: number;
  readonly fitCheck: Readonly<Record<string, number>>;
}

const [url, schema, name, threads, workers, maxPlanAttempts] = process.argv.slice(2);
const fit = createFitCheck();
const engine = createEngine({
  backend: postgresBackend({ connectionString: url!, schema: schema!, pollMs: 250 }),
  threads: Number(threads),
  workers: Number(workers),
  schedulers: {
    service: new URL('./schedulers/service.js', import.meta.url),
    batch: new URL('./schedulers/batch.js', import.meta.url),
  },
  tables,
  evaluatePlan: fit.evaluatePlan,
  maxPlanAttempts: Number(maxPlanAttempts),
  // To stderr (the parent's, inherited): its stdout carries the report. Synchronous, so nothing is lost at exit.
  logger: pino({ level: 'warn' }, pino.destination({ dest: 2, sync: true })).child({ process: name }),
  registry: new Registry(),
});

const counts = { acked: 0, failed: 0, nacks: 0, nackTimeouts: 0 };
const failedBy: Record<string, number> = {};
engine.broker.events.on('broker:ack', () => counts.acked++);
engine.broker.events.on('broker:failed', ({ reason }) => {
  counts.failed++;
  const code = (reason as { code?: string }).code ?? reason.name;
  failedBy[code] = (failedBy[code] ?? 0) + 1;
});
engine.broker.events.on('broker:nack', ({ timedOut }) => {
  counts.nacks++;
  if (timedOut) counts.nackTimeouts++;
});

process.on('message', (message: { type: string }) => {
  if (message.type !== 'stop') return;
  void engine.stop({ graceMs: 2_000 }).then(() => {
    const report: ProcessReport = { name: name!, ...counts, failedBy, fitCheck: { ...fit.stats } };
    process.send?.({ type: 'report', report }, () => process.exit(0));
  });
});

await engine.start();
process.send?.({ type: 'ready' });
