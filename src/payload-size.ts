/**
 * Size of a payload as it crosses to a thread: the bytes of its structured-clone serialization. Shared memory
 * (`SharedArrayBuffer`, and views over it) is shared, not copied, so it counts as zero bytes — and must not make
 * the measurement throw, which Node's default serializer does (an exception per enqueue is also slow).
 *
 * Serializing every payload to measure it cost 1.5–2 µs of the enqueue → dispatch path, most of it for payloads a
 * few dozen bytes long. `payloadFits` first walks small plain data (objects, arrays, strings, numbers, booleans,
 * views over shared memory) adding up an upper bound of what the serializer writes for each; when that bound is
 * within the limit the payload fits and nothing is serialized. Anything else — a bigger or deeper value, a Map, a
 * Date, a class instance, a proxy, a function — is measured exactly, as before.
 */
import { Serializer } from 'node:v8';
import { types } from 'node:util';

class SizeSerializer extends Serializer {
  #shared = 0;
  _getSharedArrayBufferId(_buffer: SharedArrayBuffer): number {
    return this.#shared++;
  }
}

/** Bytes of `payload`'s serialization, or `undefined` when it cannot be structured-cloned. */
export function payloadBytes(payload: unknown): number | undefined {
  if (payload === undefined) return 0;
  try {
    const serializer = new SizeSerializer();
    serializer.writeHeader();
    serializer.writeValue(payload);
    return serializer.releaseBuffer().byteLength;
  } catch {
    return undefined;
  }
}

/**
 * `true` when `payload` serializes to at most `maxBytes`; otherwise its exact size, or `undefined` when it cannot
 * be structured-cloned.
 */
export function payloadFits(payload: unknown, maxBytes: number): true | number | undefined {
  // A top-level string is bounded like any other value: a 10 MB string payload is 10 MB to copy.
  if (payload === undefined) return true;
  let bound = UNKNOWN;
  try {
    bound = HEADER_BYTES + boundOf(payload, { nodes: 0 }, 0);
  } catch {
    // A getter threw: the serializer will meet the same getter and say what it makes of it.
  }
  if (bound <= maxBytes) return true;
  const bytes = payloadBytes(payload);
  return bytes === undefined || bytes > maxBytes ? bytes : true;
}

/** The walk gives up (and the exact serializer decides) past these: it must stay cheaper than serializing. */
const MAX_NODES = 64;
const MAX_DEPTH = 8;
/** Upper bounds per item, in bytes, of V8's serialization format (tags, varints of up to 5 bytes, doubles). */
const HEADER_BYTES = 4;
const SCALAR_BYTES = 10;
const STRING_OVERHEAD = 8;
const CONTAINER_OVERHEAD = 17;
const INDEX_KEY_BYTES = 6;
const SHARED_VIEW_BYTES = 40;
/** Returned when the walk cannot vouch for a value: the bound can then never be within a limit. */
const UNKNOWN = Number.POSITIVE_INFINITY;

interface Walk {
  nodes: number;
}

function stringBound(s: string): number {
  // Two bytes per UTF-16 unit covers both one-byte and two-byte strings, plus tag, length and padding.
  return 2 * s.length + STRING_OVERHEAD;
}

function boundOf(value: unknown, walk: Walk, depth: number): number {
  switch (typeof value) {
    case 'undefined':
    case 'boolean':
    case 'number':
      return SCALAR_BYTES;
    case 'string':
      return stringBound(value);
    case 'object':
      break;
    default:
      return UNKNOWN; // bigint, symbol, function: let the serializer decide
  }
  if (value === null) return SCALAR_BYTES;
  if (++walk.nodes > MAX_NODES || depth >= MAX_DEPTH || types.isProxy(value)) return UNKNOWN;
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) return UNKNOWN;
    let sum = CONTAINER_OVERHEAD;
    // Holes read as undefined; a sparse array is written as index/value pairs, hence the key bytes per element.
    for (let i = 0; i < value.length && sum !== UNKNOWN; i++) sum += INDEX_KEY_BYTES + boundOf(value[i], walk, depth + 1);
    return sum;
  }
  if (ArrayBuffer.isView(value)) {
    // Only views over shared memory: the serializer writes an id for the buffer, not its bytes. A view over an
    // ArrayBuffer copies the whole buffer (a pooled Buffer brings its 8 KiB pool) and may be detached: measure it.
    return value.buffer instanceof SharedArrayBuffer ? SHARED_VIEW_BYTES : UNKNOWN;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return UNKNOWN;
  let sum = CONTAINER_OVERHEAD;
  const record = value as Record<string, unknown>;
  for (const key in record) {
    if (!Object.hasOwn(record, key)) continue;
    sum += stringBound(key) + boundOf(record[key], walk, depth + 1);
    if (sum === UNKNOWN) return UNKNOWN;
  }
  return sum;
}
