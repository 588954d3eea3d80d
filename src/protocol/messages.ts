/**
 * Messages between the main thread and pool threads: discriminated unions, handled with exhaustive switches.
 * Imported by both sides, so it holds types and tiny helpers only.
 *
 * One work message carries the change sets a thread has not seen yet followed by new items. A port delivers
 * messages in order, so a thread always applies every commit that preceded an item before it runs that item.
 * Work and outcomes travel as the flat arrays of `wire.ts` (told apart from the other messages, which are objects,
 * by being arrays); `WorkItem` and `ItemOutcome` are their decoded shape.
 */
import type { WireError } from '../errors.js';
import type { ThreadLogInit } from './thread-log.js';
import type { ChangeSet } from '../state/types.js';

/** A module reference resolved on main: an absolute `file:` URL and the export to call. */
export interface ModuleRef {
  readonly url: string;
  readonly exportName: string;
}

/** Evaluation as it crosses to a thread (structured clone of what the broker holds). */
export interface WireEvaluation {
  readonly id: string;
  readonly type: string;
  readonly modifyIndex: number;
  readonly [field: string]: unknown;
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

/**
 * What main's pool encodes: an item beside the pool's sequence number for it (the key of the pending promise on
 * main). The pool numbers its own record of the item, never the caller's object.
 */
export interface SequencedItem {
  readonly seq: number;
  readonly item: WorkItem;
}

/** An item as a thread decodes it: flat, with the sequence number its outcome reports. */
export type ThreadItem = WorkItem & { readonly seq: number };

/**
 * `[changeCount, ...changes, ...items]` (the layout is `wire.ts`'s). Told apart from main's other messages
 * (objects) by being an array.
 */
export type WorkMessage = readonly unknown[] & { readonly __work: never };

/** Outcomes as `wire.ts` lays them out. Told apart from a thread's other messages by being an array. */
export type ResultMessage = readonly unknown[] & { readonly __results: never };

export interface ThreadInit {
  readonly threadIndex: number;
  readonly slotBuffer: SharedArrayBuffer;
  /** Shared words of every thread (`ThreadBoard`): committed index, applied index, busy time. */
  readonly boardBuffer: SharedArrayBuffer;
  readonly schedulers: Readonly<Record<string, ModuleRef>>;
  readonly handlers: Readonly<Record<string, ModuleRef>>;
  readonly full: ChangeSet;
  /** The thread's log channel: `ctx.logger` writes through the user's logger on main. */
  readonly log: ThreadLogInit;
  /** Modules whose `exportName` registers module hooks (a TypeScript loader) main runs under; see module-hooks.ts. */
  readonly moduleHooks: readonly ModuleRef[];
  /** How long the thread polls the board for more work once it runs out, µs (0: it never polls). */
  readonly idleSpinUs: number;
}

export type MainToThread = WorkMessage | { readonly type: 'reset'; readonly full: ChangeSet } | { readonly type: 'stop' };

/** `ms`: how long the item held the thread (its own run, waitForIndex included), for the pool's cost model. */
export type ItemOutcome =
  /** `waitedMs`: time spent in waitForIndex before the scheduler ran. */
  | { readonly seq: number; readonly status: 'ok'; readonly value: unknown; readonly waitedMs: number; readonly ms: number }
  /** `value`: a task handler's `RunResult` `{ error, retryable?, value? }` returned (not thrown) keeps its value. */
  | { readonly seq: number; readonly status: 'error'; readonly error: WireError; readonly retryable: boolean; readonly ms: number; readonly value?: unknown }
  /** The slot was canceled while the item ran (or the item moved on past its generation). */
  | { readonly seq: number; readonly status: 'canceled'; readonly ms: number }
  /**
   * The thread did not start the item: its start CAS failed, because the item was canceled before it started or
   * because another thread it was also sent to started it first.
   */
  | { readonly seq: number; readonly status: 'not-started' };

/** A registered module that a thread could not load (`error`: the import's own error). */
export interface ModuleLoadFailure {
  readonly kind: 'scheduler' | 'handler';
  readonly name: string;
  readonly url: string;
  readonly exportName: string;
  readonly error: WireError;
}

export type ThreadToMain =
  | ResultMessage
  /** `loadErrors`: the registered modules this thread could not load (absent when it loaded them all). */
  | { readonly type: 'ready'; readonly threadIndex: number; readonly loadErrors?: readonly ModuleLoadFailure[] }
  /** The replica saw a gap in the change stream and needs a full state. */
  | { readonly type: 'resync'; readonly appliedIndex: number };

/** A work message (an array), as opposed to main's control messages (objects). */
export function isWorkMessage(message: MainToThread): message is WorkMessage {
  return Array.isArray(message);
}

/** A results message (an array), as opposed to a thread's control messages (objects). */
export function isResultMessage(message: ThreadToMain): message is ResultMessage {
  return Array.isArray(message);
}

export function assertNever(value: never): never {
  throw new Error(`Unexpected message: ${JSON.stringify(value)}`);
}
