/**
 * What `Engine.stop()` needs beside the engine: its options, validated, a grace period on the clock, and the
 * outcomes nobody here will settle any more.
 */
import type { BrokerBackend } from '../backend/broker-backend.js';
import type { Clock } from '../clock.js';
import { InvalidArgumentError, InvalidStateError } from '../errors.js';
import type { ResolvedEngineOptions } from './options.js';
import type { ThreadPool } from '../pool/thread-pool.js';
import type { TaskScheduler } from '../tasks/task-scheduler.js';
import type { WorkerSet } from './worker-set.js';

/** `stop()`'s grace period, validated: bad options reject the call and leave the engine as it was. */
export function stopGraceMs(options: unknown): number {
  if (options === undefined) return 5_000;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidArgumentError('options', 'an object like { graceMs } or undefined', options);
  }
  for (const key of Object.keys(options)) {
    if (key !== 'graceMs') throw new InvalidArgumentError(`options.${key}`, 'no such option (stop takes { graceMs })', (options as Record<string, unknown>)[key]);
  }
  const graceMs = (options as { graceMs?: unknown }).graceMs;
  if (graceMs === undefined) return 5_000;
  if (typeof graceMs !== 'number' || !(graceMs >= 0)) throw new InvalidArgumentError('graceMs', 'a number of ms >= 0', graceMs);
  return graceMs;
}

/** Resolves true if `work` settles within `ms` on the clock, false otherwise. */
export async function withinGrace(work: Promise<unknown>, ms: number, clock: Clock): Promise<boolean> {
  let timer: ReturnType<typeof clock.setTimer> | undefined;
  const timeout = new Promise<false>((resolve) => (timer = clock.setTimer(() => resolve(false), ms)));
  const result = await Promise.race([work.then(() => true as const), timeout]);
  if (timer !== undefined) clock.clearTimer(timer);
  return result;
}

/** What is still in the broker, and manual runs still queued, will not be finished by this engine: say so now. */
export function giveUpOutcomes(broker: BrokerBackend, tasks: TaskScheduler): void {
  broker.rejectOutcomes(
    (evaluation) =>
      new InvalidStateError(`Expected evaluation ${JSON.stringify(evaluation.id)} to be finished, but the engine stopped with it still in the broker`, {
        details: { evalId: evaluation.id },
      }),
  );
  tasks.rejectForcedRuns(
    (run) =>
      new InvalidStateError(`Expected run ${JSON.stringify(run.runId)} of task ${JSON.stringify(run.taskId)} to run, but the engine stopped first`, {
        details: { taskId: run.taskId, runId: run.runId },
      }),
  );
}

/** What `stopInOrder` winds down. */
export interface StoppingParts {
  readonly workers: WorkerSet;
  readonly tasks: TaskScheduler;
  readonly pool: ThreadPool;
  readonly options: Pick<ResolvedEngineOptions, 'clock' | 'cancelGraceMs'>;
}

/**
 * Stops the workers, the task runs and the threads, with one deadline for everything in hand (the task runs get no
 * second grace period after the evaluations). Evaluations in hand get `graceMs`, then are canceled through shared
 * memory, and a thread that does not let go is terminated. Resolves whether anything had to be forced.
 */
export async function stopInOrder(parts: StoppingParts, graceMs: number): Promise<boolean> {
  const { workers, tasks, pool } = parts;
  const { clock, cancelGraceMs } = parts.options;
  const deadline = clock.now() + graceMs;
  const workersDone = workers.stop();
  // Runs in flight are canceled at once (they end `canceled` and are logged); cooperative handlers stop within
  // microseconds, others are terminated with their thread after the grace period below.
  let tasksStopped = false;
  const tasksDone = tasks.stop().then(() => {
    tasksStopped = true;
  });
  let forced = false;
  if (!(await withinGrace(workersDone, graceMs, clock))) {
    forced = true;
    workers.cancelAll();
    // Cooperative schedulers stop within microseconds; give them a moment, then take the threads down.
    if (!(await withinGrace(workersDone, Math.min(100, cancelGraceMs), clock))) await pool.stop({ force: true });
  }
  await workersDone;
  const left = deadline - clock.now();
  if (!tasksStopped && (left <= 0 || !(await withinGrace(tasksDone, left, clock)))) {
    forced = true;
    await pool.stop({ force: true });
  }
  await tasksDone;
  await pool.stop({ force: forced });
  return forced;
}
