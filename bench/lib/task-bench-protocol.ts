/**
 * What the PostgreSQL task bench (`bench/postgres-tasks.bench.ts`) and its engine processes
 * (`bench/fixtures/pg-task-process.ts`) say to each other over IPC, and the tasks both sides agree on.
 * One request at a time per process; each is answered by exactly one reply.
 */
import type { TaskInput } from '../../src/index.js';

/** How a process is set up (its argv[2], as JSON). */
export interface ProcessConfig {
  /** `postgres`: an engine on the shared schema; `memory`: the in-memory backend, the tick baseline. */
  readonly backend: 'postgres' | 'memory';
  readonly url: string;
  readonly schema: string;
  readonly claimTtlMs: number;
}

/** `count` tasks `every: everyMs`, their due times spread evenly over the period by their offsets. */
export interface TaskShape {
  readonly count: number;
  readonly everyMs: number;
}

/** Task `i`'s offset: the due times of a shape's tasks spread evenly over its period. */
const offsetOf = (shape: TaskShape, i: number): number => Math.floor((i * shape.everyMs) / shape.count);

/**
 * Task `i` of a shape. Without offsets every task of one `every` is due at the same instant (periods are aligned
 * to the epoch): the spread makes the load a steady rate, count / period, instead of one burst per period.
 */
export function taskOf(shape: TaskShape, i: number): TaskInput {
  return { id: `t${i}`, every: shape.everyMs, offset: offsetOf(shape, i), maxConcurrency: 1, handler: 'entry' };
}

/**
 * The `latestCompleted` to declare task `i` with so that its first run is its next due time after `now`. Scheduled
 * times are multiples of the period and the offset only shifts when each runs: declared as of `now`, every task's
 * first scheduled time would be the same next multiple, and nothing would be due until then (up to a period away).
 */
export function latestCompletedOf(shape: TaskShape, i: number, now: number): number {
  return Math.floor((now - offsetOf(shape, i)) / shape.everyMs) * shape.everyMs;
}

/** Ticks recorded since `record-ticks`: the synchronous time of each `tick()` and how many tasks it found due. */
export interface TickRecord {
  readonly us: number[];
  readonly due: number[];
  /** Main-thread event-loop utilization over the recording, in [0, 1]. */
  readonly elu: number;
}

/** Runs whose handler was entered here: parallel arrays, one element per run. */
export interface EntryRecord {
  readonly taskId: string[];
  /** The run's due time, `scheduledFor + offset`, epoch ms. */
  readonly runAt: number[];
  /** Wall time at which the handler was entered on its pool thread, epoch ms (µs precision). */
  readonly enteredAt: number[];
}

export type Request =
  | { readonly type: 'start' }
  | { readonly type: 'declare'; readonly shape: TaskShape }
  | { readonly type: 'record-ticks' }
  | { readonly type: 'ticks' }
  | { readonly type: 'entries'; readonly from: number; readonly to: number }
  | { readonly type: 'held' }
  | { readonly type: 'claims' }
  | { readonly type: 'first-runs'; readonly taskIds: readonly string[]; readonly since: number }
  | { readonly type: 'stop' };

export type Reply =
  | { readonly type: 'ready'; readonly pid: number }
  | { readonly type: 'started'; readonly at: number }
  | { readonly type: 'declared'; readonly ms: number }
  | { readonly type: 'recording' }
  | { readonly type: 'ticks'; readonly ticks: TickRecord }
  | { readonly type: 'entries'; readonly entries: EntryRecord }
  | { readonly type: 'held'; readonly taskIds: string[] }
  /** Tasks held now; when the task scheduler started (and its claim keeper with it) and last claimed one, epoch ms. */
  | { readonly type: 'claims'; readonly held: number; readonly runningAt: number; readonly lastClaimAt: number }
  /** For each task asked about that ran here since `since`: its first handler entry, epoch ms. */
  | { readonly type: 'first-runs'; readonly first: Record<string, number> }
  | { readonly type: 'stopped' }
  | { readonly type: 'failed'; readonly message: string };
