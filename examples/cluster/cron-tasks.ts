/**
 * The demo's periodic work, InfluxDB-style tasks on the same pool as the evaluations (`engine.tasks`):
 *
 * - `downsample-node-metrics`, every second (20 ms after the second ends, so the writer has closed it): reduces
 *   the last second of generated node metrics to a summary; at most 2 runs in flight; retried when the second was
 *   not complete yet;
 * - `gc-finished-allocs`, every 5 seconds: finds finished batch allocations on a pool thread; the main thread
 *   submits the plan it returns to the plan applier.
 *
 * Counts runs on time and late (due → start over `lateMs`), attempts, retries and final statuses from the task
 * scheduler's events.
 */
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';
import type { Engine, Plan } from '../../src/index.js';
import type { Logger } from '../../src/observability/logger.js';
import { Table, type NodeRecord } from './model.js';
import type { NodeMetricsStream } from './node-metrics.js';
import type { SecondSummary } from './tasks/downsample.js';

export const Handlers = Object.freeze({ DOWNSAMPLE: 'downsample', GC: 'gc' });
export const TaskIds = Object.freeze({ DOWNSAMPLE: 'downsample-node-metrics', GC: 'gc-finished-allocs' });

/** How often the stream's per-node baselines follow the allocated capacity in the state store. */
const BASELINE_MS = 250;

export interface CronTasksOptions {
  readonly engine: Engine;
  readonly stream: NodeMetricsStream;
  readonly logger: Logger;
  /** A run that starts more than this after its due time counts as late, ms. */
  readonly lateMs: number;
}

export class CronTasks {
  readonly #o: CronTasksOptions;
  #baseline: NodeJS.Timeout | undefined;
  /** Due → start of first attempts, ns. */
  readonly delay: RecordableHistogram = createHistogram();
  runsStarted = 0;
  onTime = 0;
  late = 0;
  attempts = 0;
  retries = 0;
  readonly finished = { success: 0, failed: 0, canceled: 0 };
  readonly failures: Record<string, number> = {};
  lastSummary: SecondSummary | undefined;
  readonly gc = { runs: 0, finishedFound: 0, collected: 0, rejectedWrites: 0 };

  constructor(options: CronTasksOptions) {
    this.#o = options;
    const { engine, lateMs } = options;
    engine.tasks.events.on('task:run:start', ({ attempt, delayMs }) => {
      this.attempts++;
      if (attempt !== 1) return;
      this.runsStarted++;
      if (delayMs > lateMs) this.late++;
      else this.onTime++;
      this.delay.record(Math.max(1, Math.round(delayMs * 1e6)));
    });
    engine.tasks.events.on('task:run:retry', () => this.retries++);
    engine.tasks.events.on('task:run:finish', ({ taskId, status, error, value }) => {
      this.finished[status]++;
      if (error !== undefined && status === 'failed') {
        const key = `${taskId}: ${error.message.replace(/\d+/g, 'N')}`;
        this.failures[key] = (this.failures[key] ?? 0) + 1;
      }
      if (status !== 'success') return;
      if (taskId === TaskIds.DOWNSAMPLE) this.#onSummary(value as SecondSummary);
      else if (taskId === TaskIds.GC) this.#onGc(value as { plan: Plan | undefined; finished: number });
    });
  }

  /** Adds (stores and claims) both tasks and starts the metrics stream. */
  start(): void {
    const { engine, stream } = this.#o;
    this.#followAllocations();
    stream.start();
    this.#baseline = setInterval(() => this.#followAllocations(), BASELINE_MS);
    engine.tasks.add({
      id: TaskIds.DOWNSAMPLE,
      every: '1s',
      offset: '20ms',
      maxConcurrency: 2,
      retry: 3,
      handler: Handlers.DOWNSAMPLE,
      payload: { stream: stream.ref },
    });
    engine.tasks.add({ id: TaskIds.GC, every: '5s', maxConcurrency: 1, handler: Handlers.GC });
  }

  /** Stops the stream; the engine's `stop()` cancels the runs in flight. */
  stop(): void {
    if (this.#baseline !== undefined) clearInterval(this.#baseline);
    this.#baseline = undefined;
    this.#o.stream.stop();
  }

  #followAllocations(): void {
    const { engine, stream } = this.#o;
    for (const { value: node } of engine.state.snapshot().list<NodeRecord>(Table.NODES)) {
      const index = Number(node.id.slice('node-'.length)) - 1;
      if (index >= 0 && index < stream.ref.nodes) stream.setBase(index, node.usedCpuMhz / node.cpuMhz, node.usedMemoryMb / node.memoryMb);
    }
  }

  #onSummary(summary: SecondSummary): void {
    this.lastSummary = summary;
    this.#o.logger.debug({ summary }, 'node metrics downsampled');
  }

  #onGc({ plan, finished }: { plan: Plan | undefined; finished: number }): void {
    this.gc.runs++;
    this.gc.finishedFound += finished;
    if (plan === undefined) return;
    this.#o.engine.plans.submit(plan).then(
      ({ rejected }) => {
        const deletes = plan.writes.filter((w) => w.table === Table.ALLOCS).length;
        const rejectedDeletes = rejected.filter((w) => w.table === Table.ALLOCS).length;
        this.gc.collected += deletes - rejectedDeletes;
        this.gc.rejectedWrites += rejected.length;
        this.#o.logger.debug({ collected: deletes - rejectedDeletes, rejected: rejected.length }, 'finished allocations collected');
      },
      // The engine stopped before the plan was applied: the next run collects them.
      (error: unknown) => this.#o.logger.debug({ err: error }, 'gc plan not applied'),
    );
  }
}
