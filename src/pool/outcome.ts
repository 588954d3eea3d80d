/**
 * What the caller of `ThreadPool.dispatch` hears back: when its item was seen to start (`StartObserver`) and what
 * the item came to (`Outcome`), made from the thread's wire form or by the pool itself when no thread could answer.
 */
import { InvalidEvaluationError, InvalidTaskError, fromWire, type TickpoolError, type WireError } from '../errors.js';
import type { ItemOutcome, WorkItem } from '../protocol/messages.js';

/** A value in an outcome is the receiver's own: a fresh copy made for it (decoded from bytes, or cloned by a message). */
export type Outcome =
  | { readonly status: 'ok'; readonly value: unknown; readonly waitedMs: number }
  /** `value`: beside the error of a task handler's returned `RunResult`. */
  | { readonly status: 'error'; readonly error: TickpoolError; readonly retryable: boolean; readonly value?: unknown }
  | { readonly status: 'canceled' }
  /** The thread died with the item on it. */
  | { readonly status: 'lost'; readonly error: TickpoolError };

/** Told when the dispatched item was seen to start on a thread. */
export interface StartObserver {
  /**
   * `at` is the pool's clock. Called once per start of the item: again only when it runs again (its thread died
   * before the item's result could be sent).
   */
  itemStarted(at: number): void;
}

/** The common outcome (a scheduler that returned nothing without waiting), shared instead of allocated per item. */
const OK_EMPTY: Outcome = Object.freeze({ status: 'ok', value: undefined, waitedMs: 0 });

/** Outcomes carry nothing of their own when canceled: one object serves every item. */
export const CANCELED: Outcome = Object.freeze({ status: 'canceled' });

/**
 * The outcome a thread reported, from the fields of its wire form (`forEachResult`): `extra` is the value or the
 * wire error, `number` the waited ms or retryable as 0/1, `value` the value beside an error.
 */
export function outcomeOf(status: Exclude<ItemOutcome['status'], 'not-started'>, extra: unknown, number: number, value?: unknown): Outcome {
  switch (status) {
    case 'ok':
      return extra === undefined && number === 0 ? OK_EMPTY : { status: 'ok', value: extra, waitedMs: number };
    case 'canceled':
      return CANCELED;
    case 'error':
      return value === undefined
        ? { status: 'error', error: fromWire(extra as WireError), retryable: number === 1 }
        : { status: 'error', error: fromWire(extra as WireError), retryable: number === 1, value };
  }
}

/**
 * The outcome of an item that cannot be sent to a thread: what cannot be cloned is the caller's, an evaluation's
 * field or a task's payload (the pool's own fields are numbers and strings), so it is reported as that input being
 * invalid, and not retryable.
 */
export function unsendableOutcome(item: WorkItem, cause: unknown): Outcome {
  const expected = 'a structured-cloneable value (no functions, symbols, or objects holding them), to be sent to a pool thread';
  const error =
    item.kind === 'eval'
      ? new InvalidEvaluationError(`evaluation ${JSON.stringify(item.evaluation.id)}`, expected, item.evaluation)
      : new InvalidTaskError(`payload of task ${JSON.stringify(item.run.taskId)}`, expected, item.payload);
  // The argument errors take no options; keep the clone error as `cause` as every other wrapped failure does.
  Object.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true });
  return { status: 'error', error, retryable: false };
}
