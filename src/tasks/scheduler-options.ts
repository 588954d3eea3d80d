import { resolveBackoffOptions, type BackoffOptions, type ResolvedBackoffOptions } from '../backoff.js';
import type { Clock } from '../clock.js';
import { InvalidOptionError } from '../errors.js';
import { createDefaultLogger, isLogger, type Logger } from '../observability/logger.js';
import { isRegistry, Registry } from '../observability/metrics.js';
import { SlotTable } from '../slots/slot-table.js';
import { MemoryRunLog } from './memory-run-log.js';
import { clockOption, hasMethods } from '../option-checks.js';
import type { DesiredState, Executor, LogWriter } from './types.js';

export interface TaskSchedulerOptions {
  /** Creates and finishes runs (InfluxDB's `DesiredState`); e.g. a `MemoryDesiredState`. */
  readonly desiredState: DesiredState;
  /** Executes runs; the engine's `PoolExecutor` runs them on pool threads. */
  readonly executor: Executor;
  /** Records run state changes. Default a `MemoryRunLog` (queryable, 100 runs per task). */
  readonly logWriter?: LogWriter;
  /** The scheduler's time before the first `tick`, epoch ms. Default `clock.now()`. */
  readonly now?: number;
  /** Time source of the ticker, retry backoff and log timestamps. Default the system clock. */
  readonly clock?: Clock;
  /** pino logger. Default a pino logger at `warn`. */
  readonly logger?: Logger;
  /** prom-client registry for the scheduler's metrics. Default a fresh registry. */
  readonly registry?: Registry;
  /**
   * The ticker (`start()`) sleeps until the earliest due time. With `tickMs > 0` it also wakes at least every
   * `tickMs` while tasks are claimed (InfluxDB ticked every second), which bounds how late runs get when the wall
   * clock jumps forward or the machine was suspended; such a tick with nothing due costs O(1). Default 0: due
   * times only.
   */
  readonly tickMs?: number;
  /** Slot table for runner slots (shared with pool threads). Default a new one. */
  readonly slots?: SlotTable;
  /** Backoff between attempts of a retried run, and after desired-state errors. */
  readonly backoff?: BackoffOptions;
}

export interface ResolvedTaskSchedulerOptions {
  readonly desiredState: DesiredState;
  readonly executor: Executor;
  readonly logWriter: LogWriter;
  readonly now: number;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly tickMs: number;
  readonly slots: SlotTable;
  readonly backoff: ResolvedBackoffOptions;
}

export const taskSchedulerDefaults = Object.freeze({ tickMs: 0 });

/** Validates `options` (typed errors naming the option, expected vs received) and fills in defaults. */
export function resolveTaskSchedulerOptions(options: unknown): ResolvedTaskSchedulerOptions {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidOptionError('options', 'an object of task scheduler options', options);
  }
  const o = options as Record<string, unknown>;
  const desiredState = o['desiredState'] as DesiredState;
  if (!hasMethods(desiredState, ['createNextRun', 'finishRun'])) {
    throw new InvalidOptionError('desiredState', 'a DesiredState (createNextRun, finishRun)', desiredState);
  }
  const executor = o['executor'] as Executor;
  if (!hasMethods(executor, ['execute'])) throw new InvalidOptionError('executor', 'an Executor (execute)', executor);
  const logWriter = (o['logWriter'] ?? new MemoryRunLog()) as LogWriter;
  if (!hasMethods(logWriter, ['updateRunState'])) {
    throw new InvalidOptionError('logWriter', 'a LogWriter (updateRunState)', logWriter);
  }
  const clock = clockOption(o['clock']);
  const now = o['now'] ?? clock.now();
  if (typeof now !== 'number' || !Number.isFinite(now)) throw new InvalidOptionError('now', 'a finite time in epoch ms', now);
  const logger = o['logger'] ?? createDefaultLogger();
  if (!isLogger(logger)) throw new InvalidOptionError('logger', 'a pino Logger', logger);
  const registry = o['registry'] ?? new Registry();
  if (!isRegistry(registry)) throw new InvalidOptionError('registry', 'a prom-client Registry', registry);
  const tickMs = o['tickMs'] ?? taskSchedulerDefaults.tickMs;
  if (typeof tickMs !== 'number' || !Number.isInteger(tickMs) || tickMs < 0) {
    throw new InvalidOptionError('tickMs', 'an integer of ms >= 0', tickMs);
  }
  const slots = o['slots'] ?? SlotTable.create();
  if (!(slots instanceof SlotTable)) throw new InvalidOptionError('slots', 'a SlotTable', slots);
  const backoff = resolveBackoffOptions(o['backoff']);
  return { desiredState, executor, logWriter, now, clock, logger, registry, tickMs, slots, backoff };
}
