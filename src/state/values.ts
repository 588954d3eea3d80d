import { InvalidArgumentError } from '../errors.js';

/**
 * Ownership of stored values. The store keeps values that nobody else can change: a value given to `put` is copied
 * with `structuredClone` (which also proves it can cross to a pool thread) and the copy is frozen. Values the store
 * already owns are remembered here, so writing back a value read from a snapshot costs nothing.
 */
const owned = new WeakSet<object>();

export const cloneableHint = 'a structured-cloneable value (no functions, symbols or `undefined`)';

/** Returns a value safe to store: the value itself when it is a primitive or already owned, else a frozen clone. */
export function ownValue(value: unknown, name: string): unknown {
  if (value === undefined || typeof value === 'symbol' || typeof value === 'function') {
    // `undefined` is refused too: on the change stream it means "deleted".
    throw new InvalidArgumentError(name, cloneableHint, value);
  }
  if (value === null || typeof value !== 'object') return value;
  if (owned.has(value)) return value;
  let copy: unknown;
  try {
    copy = structuredClone(value);
  } catch {
    throw new InvalidArgumentError(name, cloneableHint, value);
  }
  return adoptValue(copy);
}

/**
 * Takes ownership of a value nobody else holds (one that just came through `postMessage` or `structuredClone`):
 * freezes it deeply and remembers it. No copy.
 */
export function adoptValue<T>(value: T): T {
  if (value === null || typeof value !== 'object' || owned.has(value)) return value;
  deepFreeze(value);
  owned.add(value);
  return value;
}

function deepFreeze(root: object): void {
  // Iterative, so deep values cannot overflow the stack. In a fresh clone nothing is frozen before we reach it,
  // so "already frozen" doubles as "already visited" and handles cycles.
  const stack: object[] = [root];
  for (;;) {
    const value = stack.pop();
    if (value === undefined) return;
    if (Object.isFrozen(value)) continue;
    // Typed arrays and buffers cannot be frozen (Object.freeze throws on them); they are read-only by contract.
    if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer || value instanceof SharedArrayBuffer) continue;
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
