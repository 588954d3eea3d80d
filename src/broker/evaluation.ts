import { randomId } from './random-id.js';
import { InvalidEvaluationError } from '../errors.js';
import { assertKey } from '../storable-key.js';

/**
 * Glossary (see also docs in DESIGN.md):
 * - evaluation: one unit of scheduling work for one job, handled by the scheduler registered for its `type`.
 * - job key: `namespace` + `jobId`. The broker lets at most one evaluation per job key be ready or unacked.
 * - delivery: one dequeue of an evaluation; it carries a fresh token that ack/nack must present.
 * - `_failed`: the dead-letter queue; evaluations land there past the delivery limit or through `fail()`.
 */
export interface EvaluationInput {
  /**
   * Unique id; a random UUID when absent. Enqueueing an id the broker already holds returns a handle of it (same id,
   * same `done`).
   */
  readonly id?: string;
  /** Namespace of the job; `'default'` when absent. */
  readonly namespace?: string;
  /** The job it belongs to; its `id` when absent (a job of its own). */
  readonly jobId?: string;
  /** Scheduler type: the ready queue the evaluation waits in. `_failed` is reserved. */
  readonly type: string;
  /** 1..100; higher is dequeued first. 50 when absent. */
  readonly priority?: number;
  /** State-store index the evaluation was last modified at; 0 when absent. Newer pending evaluations win. */
  readonly modifyIndex?: number;
  /** State-store index the evaluation was created at; orders a ready queue FIFO within a priority. */
  readonly createIndex?: number;
  /** Free-form cause (`job-register`, `node-update`, …), for logs and the scheduler. */
  readonly triggeredBy?: string;
  /** Hold the evaluation until this epoch ms. */
  readonly waitUntil?: number;
  /** Hold the evaluation for this many ms after enqueue. */
  readonly wait?: number;
  /** Anything structured-cloneable; handed to the scheduler on a pool thread. */
  readonly payload?: unknown;
}

/** An evaluation as the broker holds it and a scheduler receives it: the defaults of `EvaluationInput` filled in. */
export interface Evaluation extends EvaluationInput {
  readonly id: string;
  readonly jobId: string;
  readonly priority: number;
}

/** What an evaluation's absent fields become (the id is a random UUID, the job id the evaluation's id). */
/** Where an evaluation is in the broker (`EvalBroker.inspect`, `broker:remove`). */
export type EvaluationState = 'ready' | 'pending' | 'unacked' | 'waiting' | 'failed' | 'cancelable';

export const evaluationDefaults = Object.freeze({ priority: 50 });

/** Name of the dead-letter queue. Dequeue it like any scheduler type. */
export const FAILED_QUEUE = '_failed';

const EVALUATION_FIELDS = 'id, namespace, jobId, type, priority, modifyIndex, createIndex, triggeredBy, waitUntil, wait, payload';

export const DEFAULT_NAMESPACE = 'default';

/** The last epoch time in ms that a Date holds: the bound of `waitUntil` and `wait`. */
export const MAX_TIME_MS = 8.64e15;

function isIndex(value: unknown): boolean {
  return value === undefined || (Number.isSafeInteger(value) && (value as number) >= 0);
}

/**
 * Whether `payload` survives `structuredClone` (what crossing to a pool thread needs). Primitives answer without
 * cloning; objects are cloned once, which is the only exact test (a function deep inside a Map, a class with a
 * private field, a WeakMap …).
 */
export function isStructuredCloneable(payload: unknown): boolean {
  if (payload === undefined || payload === null) return true;
  switch (typeof payload) {
    case 'string':
    case 'number':
    case 'boolean':
    case 'bigint':
      return true;
    case 'symbol':
    case 'function':
      return false;
    default:
      try {
        structuredClone(payload);
        return true;
      } catch {
        return false;
      }
  }
}

/**
 * The evaluation with `id`, `jobId` and `priority` filled in where they are `undefined`: the input itself when none
 * is (the hot path copies nothing), else a shallow copy. Anything that is not an object is returned as it is, for
 * `assertEvaluation` to refuse.
 */
export function withEvaluationDefaults(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const e = value as Record<string, unknown>;
  const id = e['id'];
  const jobId = e['jobId'];
  const priority = e['priority'];
  if (id !== undefined && jobId !== undefined && priority !== undefined) return value;
  const filled = id === undefined ? randomId() : id;
  // Copied, then filled in: `{ ...e, id, jobId, priority }` means the same, but V8 takes a slow path for a spread
  // followed by more properties (about 1.5 µs a call against 0.05 µs for this).
  const copy: Record<string, unknown> = Object.assign({}, e);
  copy['id'] = filled;
  copy['jobId'] = jobId === undefined ? filled : jobId;
  copy['priority'] = priority === undefined ? evaluationDefaults.priority : priority;
  return copy;
}

/**
 * Throws an `InvalidEvaluationError` naming the first bad field, with what was expected and what was received.
 * The broker never mutates an evaluation (nor copies one that needs no defaults): it reads the fields it orders by
 * once, at enqueue.
 */
export function assertEvaluation(value: unknown, validatePayload?: (payload: unknown) => void): asserts value is Evaluation {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidEvaluationError('evaluation', 'an object', value);
  }
  const e = value as Record<string, unknown>;
  // The whole evaluation crosses to a pool thread, so a field nobody validated could fail every delivery (a
  // function cannot be cloned) or slip past maxPayloadBytes: only the fields below exist. A for-in with a switch
  // allocates nothing on the enqueue path.
  for (const key in e) {
    switch (key) {
      case 'id':
      case 'namespace':
      case 'jobId':
      case 'type':
      case 'priority':
      case 'modifyIndex':
      case 'createIndex':
      case 'triggeredBy':
      case 'waitUntil':
      case 'wait':
      case 'payload':
        continue;
      default:
        throw new InvalidEvaluationError(`evaluation.${key}`, `no such field (an evaluation has ${EVALUATION_FIELDS}; put anything else in payload)`, e[key]);
    }
  }
  // Ids, job ids, namespaces and types are keys a backend stores and matches by equality: one rule for both
  // backends (see storable-key.ts), so that what memory accepts PostgreSQL stores exactly.
  assertKey('evaluation.id', e['id'], InvalidEvaluationError);
  assertKey('evaluation.jobId', e['jobId'], InvalidEvaluationError);
  const type = e['type'];
  if (type === FAILED_QUEUE) throw new InvalidEvaluationError('evaluation.type', `a scheduler type other than \`${FAILED_QUEUE}\``, type);
  assertKey('evaluation.type', type, InvalidEvaluationError);
  const priority = e['priority'];
  if (!Number.isInteger(priority) || (priority as number) < 1 || (priority as number) > 100) {
    throw new InvalidEvaluationError('evaluation.priority', 'an integer from 1 to 100', priority);
  }
  const namespace = e['namespace'];
  if (namespace !== undefined) assertKey('evaluation.namespace', namespace, InvalidEvaluationError);
  if (!isIndex(e['modifyIndex'])) {
    throw new InvalidEvaluationError('evaluation.modifyIndex', 'a safe integer >= 0 or undefined', e['modifyIndex']);
  }
  if (!isIndex(e['createIndex'])) {
    throw new InvalidEvaluationError('evaluation.createIndex', 'a safe integer >= 0 or undefined', e['createIndex']);
  }
  const triggeredBy = e['triggeredBy'];
  if (triggeredBy !== undefined && typeof triggeredBy !== 'string') {
    throw new InvalidEvaluationError('evaluation.triggeredBy', 'a string or undefined', triggeredBy);
  }
  // Times a Date can hold (and PostgreSQL a timestamp): a due time past them is no time, and one backend would
  // wait forever where the other refuses the whole admitting statement.
  const waitUntil = e['waitUntil'];
  if (waitUntil !== undefined && (!Number.isFinite(waitUntil) || (waitUntil as number) > MAX_TIME_MS)) {
    throw new InvalidEvaluationError('evaluation.waitUntil', `a finite epoch time in ms up to ${MAX_TIME_MS} (the last a Date holds) or undefined`, waitUntil);
  }
  const wait = e['wait'];
  if (wait !== undefined && (!Number.isFinite(wait) || (wait as number) < 0 || (wait as number) > MAX_TIME_MS)) {
    throw new InvalidEvaluationError('evaluation.wait', `a finite number of ms from 0 to ${MAX_TIME_MS} or undefined`, wait);
  }
  const payload = e['payload'];
  if (validatePayload !== undefined && payload !== undefined) validatePayload(payload);
  else if (!isStructuredCloneable(payload)) {
    throw new InvalidEvaluationError('evaluation.payload', 'a structured-cloneable value', payload);
  }
}

/**
 * Re-enqueue delay after the `deliveries`-th delivery was nacked (or timed out): none before any delivery, the
 * initial delay after the first, then growing linearly by the subsequent delay (Nomad's `nackReenqueueDelay`).
 */
export function nackDelayMs(deliveries: number, initialMs: number, subsequentMs: number): number {
  if (deliveries <= 0) return 0;
  if (deliveries === 1) return initialMs;
  return (deliveries - 1) * subsequentMs;
}
