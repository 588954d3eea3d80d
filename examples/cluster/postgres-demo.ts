/**
 * The demo on PostgreSQL: `npm start -- --postgres URL --processes N`. This process is the front: it makes a fresh
 * schema, seeds the nodes, writes the job registrations and enqueues their evaluations through an engine of its own
 * whose workers stay paused (like a web process in front of a cluster). N child processes run the schedulers on the
 * same schema, sharing one broker and one state store. The report shows each process and the total; the schema is
 * dropped at the end.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Pool } from 'pg';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { createEngine } from '../../src/index.js';
import { postgresBackend } from '../../src/postgres/index.js';
import { serveDashboard, type DashboardServer } from './dashboard-server.js';
import type { CliOptions } from './cli.js';
import { auditCapacity, generateNode, seededRandom } from './cluster-state.js';
import { Table, tables, type JobRecord } from './model.js';
import type { ProcessReport } from './postgres-process.js';
import { registration, Registrations } from './registrations.js';

const TICK_MS = 10;
/** How long the end of a run waits for what is in flight, and for the database if it is away. */
const STOP_GRACE_MS = 5_000;
const MAX_PLAN_ATTEMPTS = 10;

interface Child {
  readonly name: string;
  readonly process: ChildProcess;
  readonly report: Promise<ProcessReport>;
}

function startChild(name: string, url: string, schema: string, cli: CliOptions): Promise<Child> {
  const entry = fileURLToPath(new URL('./postgres-process.js', import.meta.url));
  const child = fork(entry, [url, schema, name, String(cli.threads), String(cli.workers), String(MAX_PLAN_ATTEMPTS)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const report = new Promise<ProcessReport>((resolve, reject) => {
    child.on('message', (m: { type: string; report?: ProcessReport }) => m.type === 'report' && resolve(m.report!));
    child.once('exit', (code) => reject(new Error(`process ${name} exited (${code}) without a report`)));
  });
  report.catch(() => undefined);
  return new Promise<Child>((resolve, reject) => {
    child.on('message', (m: { type: string }) => m.type === 'ready' && resolve({ name, process: child, report }));
    child.once('exit', (code) => reject(new Error(`process ${name} exited (${code}) before it ran`)));
  });
}

export async function runPostgresDemo(cli: CliOptions, url: string): Promise<void> {
  const schema = `demo_${randomBytes(4).toString('hex')}`;
  const admin = new Pool({ connectionString: url, max: 1 });
  const random = seededRandom(cli.seed);
  // Logs go to stderr: stdout carries the report (one JSON line with --headless).
  const logger = pino({ level: cli.logLevel === 'info' ? 'warn' : cli.logLevel }, pino.destination({ dest: 2, sync: true }));
  const front = createEngine({
    backend: postgresBackend({ connectionString: url, schema, pollMs: 250 }),
    threads: 1,
    workers: 1,
    schedulers: { service: new URL('./schedulers/service.js', import.meta.url), batch: new URL('./schedulers/batch.js', import.meta.url) },
    tables,
    logger,
    registry: new Registry(),
  });
  // The front only enqueues: its workers never dequeue.
  front.pauseWorkers();
  const children: Child[] = [];
  let dashboard: DashboardServer | undefined;
  try {
    await front.start();
    // The dashboard shows the whole cluster (the broker and the tasks are the schema's), through the front's engine.
    if (cli.dashboardPort !== undefined) {
      dashboard = await serveDashboard(front, cli.dashboardPort);
      process.stderr.write(`dashboard: ${dashboard.url}\n`);
    }
    await front.state.write((txn) => {
      for (let n = 1; n <= cli.nodes; n++) {
        const node = generateNode(random, n);
        txn.put(Table.NODES, node.id, node);
      }
    });
    for (let i = 1; i <= cli.processes; i++) children.push(await startChild(`p${i}`, url, schema, cli));
    process.stderr.write(`${cli.processes} engine processes on schema ${schema}; ${cli.rate} evaluations/s for ${cli.durationS} s\n`);

    /** Evaluations whose admission committed (a retried one, with its same id, counts once). */
    const accepted = new Set<string>();
    const admissions: Promise<unknown>[] = [];
    const handles: Promise<unknown>[] = [];
    const started = performance.now();
    const registrations = new Registrations(random, cli.rate, cli.jobs, started);
    // Registrations due while a commit is on its way wait for the next one: one commit carries them all, in order.
    let due: JobRecord[] = [];
    let writing: Promise<void> | undefined;
    // While the database is away (a restart, a failover) a registration is written and enqueued again at a later
    // tick, not dropped: the write is a put of the same record, and the evaluation keeps its id, so one that was
    // admitted after all (a cut-off COMMIT) is not admitted twice.
    const retryLater = (jobs: readonly JobRecord[], error: unknown, what: string): void => {
      if ((error as { code?: unknown }).code !== 'ERR_BACKEND_UNAVAILABLE') throw error;
      due = [...jobs, ...due];
      logger.warn({ err: error, registrations: jobs.length }, `${what} failed; retrying at the next tick`);
    };
    const flush = async (): Promise<void> => {
      while (due.length > 0) {
        const batch = due;
        due = [];
        let index: number;
        try {
          ({ index } = await front.state.write((txn) => {
            for (const job of batch) txn.put(Table.JOBS, job.id, job);
          }));
        } catch (error) {
          retryLater(batch, error, 'a registration write');
          return;
        }
        for (const job of batch) {
          const evaluation = registration(job, index);
          const handle = front.enqueue(evaluation);
          admissions.push(handle.accepted.then(() => void accepted.add(evaluation.id!), (error: unknown) => retryLater([job], error, 'an enqueue')));
          handles.push(handle.done.catch(() => undefined));
        }
      }
    };
    const timer = setInterval(() => {
      due.push(...registrations.take(performance.now()));
      writing ??= flush().finally(() => (writing = undefined));
    }, TICK_MS);
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(end);
        process.off('SIGINT', done);
        resolve();
      };
      // Infinite (`--duration 0`): until Ctrl-C.
      const end = Number.isFinite(cli.durationS) ? setTimeout(done, cli.durationS * 1000) : undefined;
      process.once('SIGINT', done);
    });
    clearInterval(timer);
    await writing;
    // The last registrations, and any that wait for the database to come back (for up to the stop's grace).
    const deadline = performance.now() + STOP_GRACE_MS;
    await flush();
    await Promise.all(admissions.splice(0));
    while (due.length > 0) {
      if (performance.now() > deadline) throw new Error(`Expected the database back within ${STOP_GRACE_MS} ms to register the last ${due.length} jobs`);
      await new Promise((resolve) => setTimeout(resolve, TICK_MS));
      await flush();
      await Promise.all(admissions.splice(0));
    }
    const enqueued = accepted.size;
    // What is in flight finishes (or waits in the broker, durable): give it the grace of a stop.
    await Promise.race([Promise.all(handles), new Promise((resolve) => setTimeout(resolve, STOP_GRACE_MS))]);
    for (const child of children) child.process.send({ type: 'stop' });
    const reports = await Promise.all(children.map((c) => c.report));
    const elapsedS = (performance.now() - started) / 1000;
    const stats = await front.broker.stats();
    await front.state.waitForIndex(Number((await admin.query(`SELECT index FROM "${schema}".state_counter`)).rows[0].index));
    const capacity = auditCapacity(front.state.snapshot());
    const acked = reports.reduce((n, r) => n + r.acked, 0);
    const failed = reports.reduce((n, r) => n + r.failed, 0);
    const failedBy: Record<string, number> = {};
    for (const r of reports) for (const [code, n] of Object.entries(r.failedBy)) failedBy[code] = (failedBy[code] ?? 0) + n;
    const inBroker = stats.totalReady + stats.totalPending + stats.totalUnacked + stats.totalWaiting + stats.totalFailed;
    const total = {
      enqueued,
      acked,
      failed,
      failedBy,
      superseded: stats.totalCancelable,
      leftInBroker: inBroker,
      lost: enqueued - acked - stats.totalCancelable - (inBroker - stats.totalFailed) - failed,
      perSecond: acked / elapsedS,
      stateIndex: front.state.index,
    };
    const report = { config: { processes: cli.processes, threadsEach: cli.threads, workersEach: cli.workers, rate: cli.rate, durationS: cli.durationS, nodes: cli.nodes, jobs: cli.jobs, schema }, elapsedS, processes: reports, total, capacity };
    if (cli.headless) {
      process.stdout.write(`${JSON.stringify(report)}\n`);
      return;
    }
    const int = (n: number): string => Math.round(n).toLocaleString('en-US');
    const lines = [`tickpool cluster demo on PostgreSQL: ${cli.processes} processes, ${elapsedS.toFixed(1)} s`, ''];
    for (const r of reports) {
      lines.push(`  ${r.name.padEnd(6)} ${int(r.acked).padStart(9)} acked (${int(r.acked / elapsedS)}/s), ${int(r.failed)} failed, ${int(r.nacks)} nacks (${int(r.nackTimeouts)} timed out)`);
    }
    lines.push(
      `  total  ${int(acked).padStart(9)} acked (${int(total.perSecond)}/s), ${int(failed)} failed${reasons(failedBy)}, ${int(total.superseded)} superseded, ${int(total.leftInBroker)} left in the broker, ${int(total.lost)} lost (of ${int(enqueued)} enqueued)`,
      `  state  index ${int(total.stateIndex)}; ${int(capacity.allocs)} allocations on ${int(capacity.nodes)} nodes, ${int(capacity.overcommitted)} overcommitted`,
      '',
    );
    process.stdout.write(lines.join('\n'));
  } finally {
    for (const child of children) if (child.process.exitCode === null) child.process.kill('SIGKILL');
    await dashboard?.close();
    await front.stop();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await admin.end();
  }
}

/** " (3 ERR_PLAN_ATTEMPTS_EXHAUSTED, …)" for the failures' codes, or nothing when none failed. */
function reasons(failedBy: Readonly<Record<string, number>>): string {
  const parts = Object.entries(failedBy).map(([code, n]) => `${n.toLocaleString('en-US')} ${code}`);
  return parts.length === 0 ? '' : ` (${parts.join(', ')})`;
}
