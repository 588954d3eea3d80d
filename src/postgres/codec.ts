/**
 * How values cross the database. Evaluations, payloads, record values and scheduler values are structured-cloneable
 * (that is what crossing to a pool thread already requires), so they are stored as V8's structured-clone
 * serialization (`bytea`): a Map stays a Map, a typed array a typed array, exactly what `postMessage` would carry.
 * Errors are stored as JSON (`jsonb`), with their code and details, and rebuilt as their own classes where the
 * broker made them, so `instanceof DeliveryLimitError` holds in any process.
 */
import { deserialize, serialize } from 'node:v8';
import {
  AbortedError,
  DeliveryLimitError,
  fromWire,
  InvalidStateError,
  NackTimeoutReachedError,
  PlanAttemptsExhaustedError,
  SupersededError,
  TickpoolError,
  UnknownSchedulerError,
  type WireError,
} from '../errors.js';

export function encodeValue(value: unknown): Buffer {
  return serialize(value);
}

/**
 * `value` encoded for the database, or the caller's typed error naming `name`: the serializer refuses shared memory
 * (a SharedArrayBuffer cannot leave the process). Called where a value comes in, so that a value that cannot be
 * stored is refused alone, never inside a statement that carries others.
 */
export function encodeStorable(value: unknown, name: string, ErrorClass: new (name: string, expected: string, received: unknown) => Error): Buffer {
  try {
    return serialize(value);
  } catch {
    throw new ErrorClass(name, 'a value that can be stored in the database (structured-cloneable, no shared memory)', value);
  }
}

export function decodeValue(bytes: Buffer): unknown {
  return deserialize(bytes);
}

/** An error as stored: its wire form plus its cause, recursively (JSON-safe). */
export interface StoredError {
  readonly name?: string;
  readonly code?: string;
  readonly message?: string;
  readonly stack?: string;
  readonly details?: Record<string, unknown>;
  readonly cause?: StoredError;
}

const MAX_CAUSES = 8;

/**
 * `text` as `jsonb` can hold it: jsonb refuses the escape of a NUL (`\u0000`) and of a lone surrogate, and a
 * statement carrying one fails whole. An error's text is for reading, not a key: the character it cannot hold
 * becomes U+FFFD, rather than the nack, fail or run write that carries the error failing (with the others of its
 * batch).
 */
function jsonbText(text: string): string {
  const wellFormed = text.isWellFormed() ? text : text.toWellFormed();
  return wellFormed.includes('\u0000') ? wellFormed.replaceAll('\u0000', '\uFFFD') : wellFormed;
}

/** JSON.stringify's replacer that makes every string and every key `jsonbText`. */
function jsonbSafe(_key: string, value: unknown): unknown {
  if (typeof value === 'string') return jsonbText(value);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const entries = Object.entries(value as Record<string, unknown>);
  return entries.some(([k]) => jsonbText(k) !== k) ? Object.fromEntries(entries.map(([k, v]) => [jsonbText(k), v])) : value;
}

/** `error` as JSON for a `jsonb` column; details that do not survive JSON are dropped, never thrown on. */
export function encodeError(error: unknown, depth = 0): StoredError {
  if (!(error instanceof Error)) return { name: 'Error', message: jsonbText(String(error)) };
  const code = (error as { code?: unknown }).code;
  const details = (error as { details?: unknown }).details;
  let safeDetails: Record<string, unknown> | undefined;
  if (details !== null && typeof details === 'object') {
    try {
      safeDetails = JSON.parse(JSON.stringify(details, jsonbSafe)) as Record<string, unknown>;
    } catch {
      safeDetails = undefined;
    }
  }
  const cause = (error as { cause?: unknown }).cause;
  return {
    name: jsonbText(String(error.name)),
    ...(typeof code === 'string' ? { code: jsonbText(code) } : {}),
    message: jsonbText(String(error.message)),
    ...(error.stack === undefined ? {} : { stack: jsonbText(String(error.stack)) }),
    ...(safeDetails === undefined ? {} : { details: safeDetails }),
    ...(cause !== undefined && depth < MAX_CAUSES ? { cause: encodeError(cause, depth + 1) } : {}),
  };
}

function withCause<E extends Error>(error: E, cause: unknown): E {
  if (cause !== undefined) Object.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true, enumerable: false });
  return error;
}

const str = (value: unknown): string => (typeof value === 'string' ? value : String(value));
const num = (value: unknown): number => (typeof value === 'number' ? value : Number(value));

/** The error again: the broker's own outcome errors as their classes, anything else as a `RemoteError`. */
export function decodeError(stored: StoredError): Error {
  const d = stored.details ?? {};
  const cause = stored.cause === undefined ? undefined : decodeError(stored.cause);
  let error: TickpoolError;
  switch (stored.code) {
    case 'ERR_DELIVERY_LIMIT':
      error = new DeliveryLimitError(str(d['evalId']), num(d['deliveries']), num(d['limit']));
      break;
    case 'ERR_SUPERSEDED':
      error = new SupersededError(str(d['evalId']), str(d['supersededBy']));
      break;
    case 'ERR_NACK_TIMEOUT_REACHED':
      error = new NackTimeoutReachedError(str(d['evalId']));
      break;
    case 'ERR_UNKNOWN_SCHEDULER':
      error = new UnknownSchedulerError(str(d['type']), []);
      break;
    case 'ERR_PLAN_ATTEMPTS_EXHAUSTED':
      error = new PlanAttemptsExhaustedError(str(d['evalId']), num(d['attempts']), '');
      break;
    case 'ERR_ABORTED':
      error = new AbortedError('the evaluation');
      break;
    case 'ERR_INVALID_STATE':
      error = new InvalidStateError(stored.message ?? '', { details: d });
      break;
    default: {
      const wire: WireError = {
        name: stored.name ?? 'Error',
        code: stored.code,
        message: stored.message ?? '',
        stack: stored.stack,
        details: stored.details,
      };
      return withCause(fromWire(wire), cause);
    }
  }
  // The stored message is the one its maker wrote (it may name what only that process knew, like the known types).
  if (stored.message !== undefined) error.message = stored.message;
  if (stored.stack !== undefined) error.stack = stored.stack;
  return withCause(error, cause);
}
