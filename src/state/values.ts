import { isSharedArrayBuffer } from 'node:util/types';
import { InvalidArgumentError } from '../errors.js';

/**
 * Ownership of stored values. The store keeps values that nobody else can change: a value given to `put` is copied
 * with `structuredClone` (which also proves it can cross to a pool thread) and the copy is frozen. Values the store
 * already owns are remembered here, so writing back a value read from a snapshot costs nothing.
 *
 * Shared memory is refused rather than copied. A copy of a `SharedArrayBuffer` (or of a view on one) is the same
 * memory, so the caller could still change a committed value under every snapshot holding it; and the change stream
 * would share it with every pool thread, where any scheduler could write into main's state and every other replica.
 * A deep copy into a fresh `SharedArrayBuffer` would still be shared with the threads; one into a plain
 * `ArrayBuffer` would quietly change what the caller stored (`Atomics.wait` no longer works on it). Refusing costs
 * nothing: the check rides on the freeze, which visits every object of the copy anyway.
 */
const owned = new WeakSet<object>();

export const cloneableHint = 'a structured-cloneable value (no functions, symbols or `undefined`)';
export const sharedMemoryHint =
  'a value without shared memory (a SharedArrayBuffer, or a view on one, stays shared with the caller and the pool threads after a copy)';

/** The error class to report a bad value with (`InvalidArgumentError` or a subclass such as `InvalidPlanError`). */
export type ValueErrorClass = new (name: string, expected: string, received: unknown) => InvalidArgumentError;

/** Returns a value safe to store: the value itself when it is a primitive or already owned, else a frozen clone. */
export function ownValue(value: unknown, name: string, ErrorClass: ValueErrorClass = InvalidArgumentError): unknown {
  if (value === undefined || typeof value === 'symbol' || typeof value === 'function') {
    // `undefined` is refused too: on the change stream it means "deleted".
    throw new ErrorClass(name, cloneableHint, value);
  }
  if (value === null || typeof value !== 'object') return value;
  if (owned.has(value)) return value;
  let copy: unknown;
  try {
    copy = structuredClone(value);
  } catch {
    throw new ErrorClass(name, cloneableHint, value);
  }
  if (copy === null || typeof copy !== 'object') return copy;
  if (!deepFreeze(copy, true)) throw new ErrorClass(name, sharedMemoryHint, value);
  owned.add(copy);
  return copy;
}

/**
 * Takes ownership of a value nobody else holds (one that just came through `postMessage` or `structuredClone`):
 * freezes it deeply and remembers it. No copy.
 */
export function adoptValue<T>(value: T): T {
  if (value === null || typeof value !== 'object' || owned.has(value)) return value;
  deepFreeze(value, false);
  owned.add(value);
  return value;
}

/**
 * Freezes `root` deeply. With `refuseShared`, stops and returns false at the first shared memory it meets (the value
 * is then discarded half frozen, which is harmless for a fresh copy nobody else holds).
 */
function deepFreeze(root: object, refuseShared: boolean): boolean {
  // Iterative, so deep values cannot overflow the stack. In a fresh clone nothing is frozen before we reach it,
  // so "already frozen" doubles as "already visited" and handles cycles.
  const stack: object[] = [root];
  for (;;) {
    const value = stack.pop();
    if (value === undefined) return true;
    if (Object.isFrozen(value)) continue;
    // Typed arrays and buffers cannot be frozen (Object.freeze throws on them); they are read-only by contract.
    if (ArrayBuffer.isView(value)) {
      if (refuseShared && isSharedArrayBuffer(value.buffer)) return false;
      continue;
    }
    if (isSharedArrayBuffer(value)) {
      if (refuseShared) return false;
      continue;
    }
    if (value instanceof ArrayBuffer) continue;
    Object.freeze(value);
    if (value instanceof Map) {
      for (const [k, v] of value) {
        if (k !== null && typeof k === 'object') stack.push(k);
        if (v !== null && typeof v === 'object') stack.push(v);
      }
    } else if (value instanceof Set) {
      for (const v of value) if (v !== null && typeof v === 'object') stack.push(v);
    }
    for (const v of Object.values(value)) if (v !== null && typeof v === 'object') stack.push(v as object);
  }
}
