/**
 * The compact wire form of work items and their outcomes. Structured clone pays per object: wrapping each
 * evaluation in an item object with seven fields more than doubled the cost of a batch (0.46 → 0.21 µs per item
 * measured here), and the main thread pays that cost on the dispatch hot path. So the numbers of a batch travel in
 * one flat array, and only what must stay an object (the evaluation, the run, a result value, an error) travels
 * as one. Both threads import this module.
 */
import type { WireError } from '../errors.js';
import type { ItemOutcome, WireEvaluation, WireRun, WorkItem } from './messages.js';

/** Numbers per item: kind, seq, slot, generation, attempt, minIndex, syncLimitMs. */
const ITEM_STRIDE = 7;
const KIND_EVAL = 0;
const KIND_RUN = 1;

/** A batch of items: `meta` holds ITEM_STRIDE numbers per item, `bodies` one object per item. */
export interface WorkBatch {
  readonly meta: number[];
  readonly bodies: unknown[];
}

interface RunBody {
  readonly run: WireRun;
  readonly handler: string;
  readonly payload: unknown;
}

export function encodeItems(items: Iterable<WorkItem>): WorkBatch {
  const meta: number[] = [];
  const bodies: unknown[] = [];
  for (const item of items) {
    if (item.kind === 'eval') {
      meta.push(KIND_EVAL, item.seq, item.slot, item.generation, item.attempt, item.minIndex, item.syncLimitMs);
      bodies.push(item.evaluation);
    } else {
      meta.push(KIND_RUN, item.seq, item.slot, item.generation, item.attempt, 0, 0);
      bodies.push({ run: item.run, handler: item.handler, payload: item.payload } satisfies RunBody);
    }
  }
  return { meta, bodies };
}

export function decodeItems(batch: WorkBatch, into: WorkItem[]): void {
  const { meta, bodies } = batch;
  for (let i = 0, at = 0; i < bodies.length; i++, at += ITEM_STRIDE) {
    const seq = meta[at + 1]!;
    const slot = meta[at + 2]!;
    const generation = meta[at + 3]!;
    const attempt = meta[at + 4]!;
    if (meta[at] === KIND_EVAL) {
      into.push({
        kind: 'eval',
        seq,
        slot,
        generation,
        attempt,
        evaluation: bodies[i] as WireEvaluation,
        minIndex: meta[at + 5]!,
        syncLimitMs: meta[at + 6]!,
      });
    } else {
      const body = bodies[i] as RunBody;
      into.push({ kind: 'run', seq, slot, generation, attempt, run: body.run, handler: body.handler, payload: body.payload });
    }
  }
}

/** Numbers per outcome: seq, status, and waitedMs (ok) or retryable (error). */
const RESULT_STRIDE = 3;
const STATUS_OK = 0;
const STATUS_ERROR = 1;
const STATUS_CANCELED = 2;

/** Outcomes: `meta` holds RESULT_STRIDE numbers each; `extra[k]` is the value or error of outcome `extraAt[k]`. */
export interface ResultBatch {
  readonly meta: number[];
  readonly extraAt: number[];
  readonly extra: unknown[];
}

export function encodeResults(outcomes: readonly ItemOutcome[]): ResultBatch {
  const meta: number[] = [];
  const extraAt: number[] = [];
  const extra: unknown[] = [];
  for (let i = 0; i < outcomes.length; i++) {
    const o = outcomes[i]!;
    switch (o.status) {
      case 'ok':
        meta.push(o.seq, STATUS_OK, o.waitedMs);
        if (o.value !== undefined) {
          extraAt.push(i);
          extra.push(o.value);
        }
        break;
      case 'error':
        meta.push(o.seq, STATUS_ERROR, o.retryable ? 1 : 0);
        extraAt.push(i);
        extra.push(o.error);
        break;
      case 'canceled':
        meta.push(o.seq, STATUS_CANCELED, 0);
        break;
    }
  }
  return { meta, extraAt, extra };
}

/** Calls `visit` for each outcome of the batch, in order, without building intermediate objects. */
export function forEachResult(
  batch: ResultBatch,
  visit: (seq: number, status: ItemOutcome['status'], extra: unknown, number: number) => void,
): void {
  const { meta, extraAt, extra } = batch;
  let next = 0;
  for (let i = 0, at = 0; at < meta.length; i++, at += RESULT_STRIDE) {
    let value: unknown;
    if (next < extraAt.length && extraAt[next] === i) value = extra[next++];
    const status = meta[at + 1] === STATUS_OK ? 'ok' : meta[at + 1] === STATUS_ERROR ? 'error' : 'canceled';
    visit(meta[at]!, status, value, meta[at + 2]!);
  }
}

export type { WireError };
