/**
 * The argument checks of the broker calls, one for each argument the in-memory broker (`EvalBroker`) and the
 * PostgreSQL broker (`PgBroker`) both take: a caller that gets an argument wrong gets the same
 * `InvalidArgumentError` (name, expectation, message) from either backend. Each check throws before the call does
 * anything, and none reads more of its argument than it checks.
 */
import { InvalidArgumentError } from '../errors.js';
import { assertKey } from '../storable-key.js';
import type { AckResult } from './outcome-waiters.js';

/** An evaluation id (or another id a call names): any non-empty string. */
export function assertId(name: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || value.length === 0) throw new InvalidArgumentError(name, 'a non-empty string', value);
}

/** A delivery's token: any string (one that matches no delivery is refused by the broker, not here). */
export function assertToken(value: unknown): asserts value is string {
  if (typeof value !== 'string') throw new InvalidArgumentError('token', 'a string', value);
}

/** The token `remove` may take: none for an evaluation that is not in flight. */
export function assertOptionalToken(value: unknown): asserts value is string | undefined {
  if (value !== undefined && typeof value !== 'string') throw new InvalidArgumentError('token', 'a string or undefined', value);
}

/** The scheduler types a dequeue asks for, each `assertType(name, type)` checks. */
function assertTypeList(types: unknown, assertType: (name: string, type: unknown) => void): asserts types is readonly string[] {
  if (!Array.isArray(types) || types.length === 0) {
    throw new InvalidArgumentError('types', 'a non-empty array of scheduler types', types);
  }
  for (let i = 0; i < types.length; i++) assertType(`types[${i}]`, types[i]);
}

/** The scheduler types of an in-memory dequeue: non-empty strings. */
export function assertTypes(types: unknown): asserts types is readonly string[] {
  assertTypeList(types, (name, type) => {
    if (typeof type !== 'string' || type.length === 0) throw new InvalidArgumentError(name, 'a non-empty string', type);
  });
}

/**
 * The scheduler types of a dequeue whose types go into a statement: keys (`storable-key.ts`), as an enqueue's type
 * is. One that a statement cannot carry would fail every fetch of the process, for every dequeue waiting with it.
 */
export function assertKeyTypes(types: unknown): asserts types is readonly string[] {
  assertTypeList(types, (name, type) => assertKey(name, type, InvalidArgumentError));
}

/** How long a dequeue waits (0 waits forever) and the signal that ends its wait. */
export function assertWait(timeoutMs: unknown, signal: unknown): asserts signal is AbortSignal | undefined {
  if (typeof timeoutMs !== 'number' || !Number.isFinite(timeoutMs) || timeoutMs < 0) {
    throw new InvalidArgumentError('timeoutMs', 'a finite number of ms >= 0 (0 waits forever)', timeoutMs);
  }
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new InvalidArgumentError('signal', 'an AbortSignal or undefined', signal);
}

/** The callback of `dequeueWith`. */
export function assertCallback(callback: unknown): asserts callback is (...args: never[]) => unknown {
  if (typeof callback !== 'function') throw new InvalidArgumentError('callback', 'a function', callback);
}

/** The refusal of `dequeueMany`'s `max` (an integer >= 1), or undefined when it is one: the call rejects with it. */
export function maxRefusal(max: number): InvalidArgumentError | undefined {
  return !Number.isSafeInteger(max) || max < 1 ? new InvalidArgumentError('max', 'an integer >= 1', max) : undefined;
}

const ACK_RESULT_KEYS: ReadonlySet<string> = new Set(['value', 'index', 'attempts']);

/** An ack's result: undefined, or `{ value?, index?, attempts? }` and no other field. */
export function assertAckResult(result: unknown): asserts result is AckResult | undefined {
  if (result === undefined) return;
  if (result === null || typeof result !== 'object' || Array.isArray(result)) {
    throw new InvalidArgumentError('result', 'an object { value?, index?, attempts? } or undefined', result);
  }
  const r = result as Record<string, unknown>;
  for (const key in r) if (!ACK_RESULT_KEYS.has(key)) throw new InvalidArgumentError(`result.${key}`, 'no such field (an ack result has value, index, attempts)', r[key]);
  const { index, attempts } = r;
  if (index !== undefined && (!Number.isSafeInteger(index) || (index as number) < 0)) {
    throw new InvalidArgumentError('result.index', 'a state index (a safe integer >= 0) or undefined', index);
  }
  if (attempts !== undefined && (!Number.isSafeInteger(attempts) || (attempts as number) < 1)) {
    throw new InvalidArgumentError('result.attempts', 'an integer >= 1 or undefined', attempts);
  }
}

/** The reason of a nack or a give-back, which may have none. */
export function assertOptionalReason(reason: unknown): asserts reason is Error | undefined {
  if (reason !== undefined && !(reason instanceof Error)) throw new InvalidArgumentError('reason', 'an Error or undefined', reason);
}

/** The reason of a fail, which must have one. */
export function assertReason(reason: unknown): asserts reason is Error {
  if (!(reason instanceof Error)) throw new InvalidArgumentError('reason', 'an Error', reason);
}

/** What `rejectOutcomes` rejects each outcome with. */
export function assertOutcomeReason(reason: unknown): asserts reason is (...args: never[]) => unknown {
  if (typeof reason !== 'function') throw new InvalidArgumentError('reason', 'a function (evaluation) => Error', reason);
}

/** `setEnabled`'s argument. */
export function assertEnabled(enabled: unknown): asserts enabled is boolean {
  if (typeof enabled !== 'boolean') throw new InvalidArgumentError('enabled', 'a boolean', enabled);
}
