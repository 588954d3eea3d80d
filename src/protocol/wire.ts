/**
 * The compact wire form of work and of outcomes. Structured clone pays per object on both sides: wrapping each
 * evaluation in an item object with seven fields more than doubles the cost of a batch, and a message of nested
 * objects (`{ type, changes, batch: { meta, bodies } }`) makes an idle dispatch measurably slower than one flat
 * array, most of it in the thread's wake-to-entry time. So a work
 * message and a results message are each ONE array: numbers inline, and only what must stay an object (a change
 * set, the evaluation, the run, a result value, an error) as an element of it. Both threads import this module.
 */
import type { WireError } from '../errors.js';
import type { ChangeSet } from '../state/types.js';
import type { ItemOutcome, ResultMessage, SequencedItem, ThreadItem, WireEvaluation, WireRun, WorkMessage } from './messages.js';

/*
 * A work message is `[changeCount, ...changes, ...items]`, each item ITEM_STRIDE elements: kind, seq, slot,
 * generation, attempt, minIndex, syncLimitMs, body.
 */
const ITEM_STRIDE = 8;
const KIND_EVAL = 0;
const KIND_RUN = 1;

interface RunBody {
  readonly run: WireRun;
  readonly handler: string;
  readonly payload: unknown;
}

export function encodeWork(changes: readonly ChangeSet[], items: readonly SequencedItem[]): WorkMessage {
  // Sized once: the message is built on every send, and growing it by push copies it as it grows.
  const out = new Array<unknown>(1 + changes.length + items.length * ITEM_STRIDE);
  out[0] = changes.length;
  let at = 1;
  for (let i = 0; i < changes.length; i++) out[at++] = changes[i];
  for (let i = 0; i < items.length; i++) {
    const { seq, item } = items[i]!;
    if (item.kind === 'eval') {
      out[at] = KIND_EVAL;
      out[at + 5] = item.minIndex;
      out[at + 6] = item.syncLimitMs;
      out[at + 7] = item.evaluation;
    } else {
      out[at] = KIND_RUN;
      out[at + 5] = 0;
      out[at + 6] = 0;
      out[at + 7] = { run: item.run, handler: item.handler, payload: item.payload } satisfies RunBody;
    }
    out[at + 1] = seq;
    out[at + 2] = item.slot;
    out[at + 3] = item.generation;
    out[at + 4] = item.attempt;
    at += ITEM_STRIDE;
  }
  return out as unknown as WorkMessage;
}

/** Calls `onChange` for each change set in order, then appends the items to `into`; returns how many items. */
export function decodeWork(message: WorkMessage, onChange: (change: ChangeSet) => void, into: ThreadItem[]): number {
  const changes = message[0] as number;
  for (let i = 1; i <= changes; i++) onChange(message[i] as ChangeSet);
  let count = 0;
  for (let at = changes + 1; at + ITEM_STRIDE <= message.length; at += ITEM_STRIDE, count++) {
    const seq = message[at + 1] as number;
    const slot = message[at + 2] as number;
    const generation = message[at + 3] as number;
    const attempt = message[at + 4] as number;
    if (message[at] === KIND_EVAL) {
      into.push({
        kind: 'eval',
        seq,
        slot,
        generation,
        attempt,
        evaluation: message[at + 7] as WireEvaluation,
        minIndex: message[at + 5] as number,
        syncLimitMs: message[at + 6] as number,
      });
    } else {
      const body = message[at + 7] as RunBody;
      into.push({ kind: 'run', seq, slot, generation, attempt, run: body.run, handler: body.handler, payload: body.payload });
    }
  }
  return count;
}

const RESULT_STRIDE = 5;
const STATUS_OK = 0;
const STATUS_ERROR = 1;
const STATUS_CANCELED = 2;
const STATUS_NOT_STARTED = 3;
/** An error with a value beside it (a task handler's returned `RunResult`): extra is `[error, value]`. */
const STATUS_ERROR_WITH_VALUE = 4;
const STATUSES: readonly ItemOutcome['status'][] = ['ok', 'error', 'canceled', 'not-started', 'error'];

/**
 * `[seq, status, number, extra, ms]` per outcome. The number slot holds waitedMs (ok) or retryable as 0/1 (error);
 * extra holds the value (ok) or error; ms is how long the item held the thread.
 */
export function encodeResults(outcomes: readonly ItemOutcome[]): ResultMessage {
  const out: unknown[] = [];
  for (const o of outcomes) {
    switch (o.status) {
      case 'ok':
        out.push(o.seq, STATUS_OK, o.waitedMs, o.value, o.ms);
        break;
      case 'error':
        if (o.value === undefined) out.push(o.seq, STATUS_ERROR, o.retryable ? 1 : 0, o.error, o.ms);
        else out.push(o.seq, STATUS_ERROR_WITH_VALUE, o.retryable ? 1 : 0, [o.error, o.value], o.ms);
        break;
      case 'canceled':
        out.push(o.seq, STATUS_CANCELED, 0, undefined, o.ms);
        break;
      case 'not-started':
        out.push(o.seq, STATUS_NOT_STARTED, 0, undefined, 0);
        break;
    }
  }
  return out as unknown as ResultMessage;
}

/**
 * Calls `visit` for each outcome of the message, in order, without building intermediate objects. `extra` is the
 * value (ok) or the wire error (error); `value` the value beside an error (a returned `RunResult`), else undefined.
 */
export function forEachResult(
  message: ResultMessage,
  visit: (seq: number, status: ItemOutcome['status'], extra: unknown, number: number, ms: number, value: unknown) => void,
): void {
  for (let at = 0; at + RESULT_STRIDE <= message.length; at += RESULT_STRIDE) {
    const code = message[at + 1] as number;
    const status = STATUSES[code] ?? 'not-started';
    if (code === STATUS_ERROR_WITH_VALUE) {
      const [error, value] = message[at + 3] as [unknown, unknown];
      visit(message[at] as number, status, error, message[at + 2] as number, message[at + 4] as number, value);
    } else visit(message[at] as number, status, message[at + 3], message[at + 2] as number, message[at + 4] as number, undefined);
  }
}

export type { WireError };
