/**
 * What main and the pool threads say to each other besides the shared memory they work through (the work queue,
 * the result rings, the change log: see work-queue.ts, result-ring.ts, change-log.ts). Messages are for what is
 * rare: a thread's start and readiness, a replica reset, a stop, the numbers of shared buffers, an item whose payload
 * cannot be written as bytes, a result that does not fit its ring, and the doorbell that tells main results wait in
 * the rings. Discriminated unions, handled with exhaustive switches. Imported by both sides, so it holds types and
 * tiny helpers only.
 */
import type { WireError } from '../errors.js';
import type { ThreadLogInit } from './thread-log.js';
import type { WorkQueueBuffers } from './work-queue.js';
import type { ChangeSet } from '../state/types.js';

/** A module reference resolved on main: an absolute `file:` URL and the export to call. */
export interface ModuleRef {
  readonly url: string;
  readonly exportName: string;
}

/**
 * Evaluation as it crosses to a thread: the fields an evaluation may have (the broker refuses any other at enqueue),
 * each written in a fixed order (records.ts `writeEvaluation`).
 */
export interface WireEvaluation {
  readonly id: string;
  readonly type: string;
  /** 1..100: where it waits in the work queue. */
  readonly priority: number;
  readonly modifyIndex: number;
  readonly namespace?: string;
  readonly jobId?: string;
  readonly triggeredBy?: string;
  readonly createIndex?: number;
  readonly waitUntil?: number;
  readonly wait?: number;
  readonly payload?: unknown;
}

/** Task run as it crosses to a thread. */
export interface WireRun {
  readonly taskId: string;
  readonly runId: string;
  readonly scheduledFor: number;
  readonly runAt: number;
}

interface ItemBase {
  /** Slot and generation the main thread claimed for this item; the thread must `start` them before running. */
  readonly slot: number;
  readonly generation: number;
  readonly attempt: number;
}

export interface EvalItem extends ItemBase {
  readonly kind: 'eval';
  readonly evaluation: WireEvaluation;
  /** The replica must reach this index first (the evaluation's modifyIndex, or a plan's refreshIndex). */
  readonly minIndex: number;
  readonly syncLimitMs: number;
}

export interface RunItem extends ItemBase {
  readonly kind: 'run';
  readonly run: WireRun;
  readonly handler: string;
  readonly payload: unknown;
}

/** What main asks a thread to run. */
export type WorkItem = EvalItem | RunItem;

/** An item as a thread runs it: with the pool's sequence number for it, which its outcome reports. */
export type ThreadItem = WorkItem & { readonly seq: number };

export interface ThreadInit {
  readonly threadIndex: number;
  /** The pool's most threads (the work queue's control words are laid out for them). */
  readonly maxThreads: number;
  readonly slotBuffer: SharedArrayBuffer;
  /** Shared words of every thread (`ThreadBoard`): applied index, messages posted, busy time. */
  readonly boardBuffer: SharedArrayBuffer;
  /** The work queue this thread takes items from. */
  readonly queue: WorkQueueBuffers;
  /** This thread's result ring. */
  readonly results: SharedArrayBuffer;
  /** The change log, and the position in it that `full` is current at. */
  readonly changeLog: SharedArrayBuffer;
  readonly logPosition: number;
  /** The shared buffers items may hold, by the number main gave each (more come as `share` messages). */
  readonly shared: ReadonlyArray<readonly [number, SharedArrayBuffer]>;
  readonly schedulers: Readonly<Record<string, ModuleRef>>;
  readonly handlers: Readonly<Record<string, ModuleRef>>;
  readonly full: ChangeSet;
  /** The thread's log channel: `ctx.logger` writes through the user's logger on main. */
  readonly log: ThreadLogInit;
  /** Modules whose `exportName` registers module hooks (a TypeScript loader) main runs under; see module-hooks.ts. */
  readonly moduleHooks: readonly ModuleRef[];
}

export type MainToThread =
  /** The replica starts over from `full`, current at `position` in the change log (it had fallen a ring behind). */
  | { readonly type: 'reset'; readonly full: ChangeSet; readonly position: number }
  | { readonly type: 'stop' }
  /** Items may hold this buffer from now on, written as `id`. */
  | { readonly type: 'share'; readonly id: number; readonly buffer: SharedArrayBuffer }
  | { readonly type: 'unshare'; readonly id: number }
  /** An item whose payload could not be written as bytes, for this thread to run (it is in no queue). */
  | { readonly type: 'pinned'; readonly item: ThreadItem };

/** `ms`: how long the item held the thread (its own run, waitForIndex included), for the pool's cost model. */
export type ItemOutcome =
  /** `waitedMs`: time spent in waitForIndex before the scheduler ran. */
  | { readonly seq: number; readonly status: 'ok'; readonly value: unknown; readonly waitedMs: number; readonly ms: number }
  /** `value`: a task handler's `RunResult` `{ error, retryable?, value? }` returned (not thrown) keeps its value. */
  | { readonly seq: number; readonly status: 'error'; readonly error: WireError; readonly retryable: boolean; readonly ms: number; readonly value?: unknown }
  /** The slot was canceled while the item ran (or the item moved on past its generation). */
  | { readonly seq: number; readonly status: 'canceled'; readonly ms: number };

/** A registered module that a thread could not load (`error`: the import's own error). */
export interface ModuleLoadFailure {
  readonly kind: 'scheduler' | 'handler';
  readonly name: string;
  readonly url: string;
  readonly exportName: string;
  readonly error: WireError;
}

/** The doorbell message: a number, the cheapest thing to post. */
export const DOORBELL = 0;

export type ThreadToMain =
  /** The doorbell: results wait in this thread's ring (sent only while main armed it). */
  | typeof DOORBELL
  /**
   * An outcome that could not go through the thread's result ring (larger than a quarter of it, or holding shared
   * memory main never numbered), for the item of `slot` at claim `generation`.
   */
  | { readonly type: 'outcome'; readonly slot: number; readonly generation: number; readonly outcome: ItemOutcome }
  /** `loadErrors`: the registered modules this thread could not load (absent when it loaded them all). */
  | { readonly type: 'ready'; readonly threadIndex: number; readonly loadErrors?: readonly ModuleLoadFailure[] }
  /** The replica fell a ring behind the change log (or saw a gap in the feed) and needs a full state. */
  | { readonly type: 'resync'; readonly appliedIndex: number };

export function assertNever(value: never): never {
  throw new Error(`Unexpected message: ${JSON.stringify(value)}`);
}
