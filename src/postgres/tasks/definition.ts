/**
 * A task definition as the shared catalogue stores it: the validated task's fields as V8's structured-clone
 * serialization (`bytea`: a payload's Map stays a Map), and a hash that decides whether a declaration is the same
 * as the stored one. Declarations come from many processes building their own payload objects, so the hash is of a
 * canonical form: plain objects with their keys sorted, every other value as structured clone sees it.
 */
import { createHash } from 'node:crypto';
import { deserialize, serialize } from 'node:v8';
import { InvalidTaskError } from '../../errors.js';
import { validateTask, type Task } from '../../tasks/task.js';

export interface StoredDefinition {
  readonly bytes: Buffer;
  readonly hash: string;
}

/** The fields of a task, in one order (a validated task holds only those that were given). */
const FIELD_ORDER = ['id', 'cron', 'every', 'offset', 'timezone', 'maxConcurrency', 'retry', 'catchUp', 'handler', 'payload'] as const;

/**
 * Encodes a validated task. Throws `InvalidTaskError` (`payload`) for a payload that structured clone can hand to a
 * thread but the database cannot hold (shared memory: a `SharedArrayBuffer` lives in one process only).
 */
export function encodeDefinition(task: Task): StoredDefinition {
  const plain: Record<string, unknown> = {};
  for (const field of FIELD_ORDER) if (Object.hasOwn(task, field)) plain[field] = (task as unknown as Record<string, unknown>)[field];
  let bytes: Buffer;
  let canonicalBytes: Buffer;
  try {
    bytes = serialize(plain);
    canonicalBytes = serialize(canonical(plain, new Map()));
  } catch (error) {
    throw new InvalidTaskError('payload', 'a value the shared task store can hold (structured-cloneable, without shared memory)', task.payload);
  }
  return { bytes, hash: createHash('sha256').update(canonicalBytes).digest('hex') };
}

/** The stored task again, validated (and frozen) as `engine.tasks.add` would have made it. */
export function decodeDefinition(bytes: Buffer): Task {
  return validateTask(deserialize(bytes));
}

/** `value` with every plain object's keys in sorted order (cycles kept as cycles). */
function canonical(value: unknown, seen: Map<object, unknown>): unknown {
  if (value === null || typeof value !== 'object') return value;
  const known = seen.get(value);
  if (known !== undefined) return known;
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    seen.set(value, out);
    for (const item of value) out.push(canonical(item, seen));
    return out;
  }
  if (value instanceof Map) {
    const out = new Map<unknown, unknown>();
    seen.set(value, out);
    for (const [k, v] of value) out.set(canonical(k, seen), canonical(v, seen));
    return out;
  }
  if (value instanceof Set) {
    const out = new Set<unknown>();
    seen.set(value, out);
    for (const item of value) out.add(canonical(item, seen));
    return out;
  }
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return value;
  const out: Record<string, unknown> = {};
  seen.set(value, out);
  for (const key of Object.keys(value).sort()) out[key] = canonical((value as Record<string, unknown>)[key], seen);
  return out;
}
