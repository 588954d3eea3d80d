/**
 * Size of a payload as it crosses to a thread: the bytes of its structured-clone serialization. Shared memory
 * (`SharedArrayBuffer`, and views over it) is shared, not copied, so it counts as zero bytes — and must not make
 * the measurement throw, which Node's default serializer does (an exception per enqueue is also slow).
 *
 * Serializing every payload to measure it would be a large share of the enqueue → dispatch path, mostly spent on
 * payloads a few dozen bytes long. `payloadFits` first walks small plain data (objects, arrays with their named
 * properties, strings, numbers, booleans, views over shared memory) adding up an upper bound of what the serializer
 * writes for each; when that bound is within the limit the payload fits and nothing is serialized. Anything else — a
 * bigger or deeper value, a Map, a Date, a class instance, a proxy, a function — is measured exactly, by serializing
 * it.
 */
import { Serializer } from 'node:v8';
import { types } from 'node:util';
import { InvalidEvaluationError, PayloadTooLargeError } from './errors.js';

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
  const walk: Walk = { nodes: 0, entries: 0, bytes: HEADER_BYTES, limit: maxBytes };
  try {
    if (vouch(payload, walk, 0)) return true;
  } catch {
    // A getter threw: the serializer will meet the same getter and say what it makes of it.
  }
  const bytes = payloadBytes(payload);
  return bytes === undefined || bytes > maxBytes ? bytes : true;
}

/**
 * The walk gives up (and the exact serializer decides) past these: it must stay cheaper than serializing. Every
 * element and property it visits counts against MAX_ENTRIES, whatever the payload: an array longer than the entries
 * left is not walked at all (a sparse array of length 2^32 - 1 serializes to a few bytes, but a walk by index took
 * about 90 s), and the walk also stops as soon as its running total passes the limit. (Enumerating the keys of a
 * huge object is native and no slower than the serializer that would run instead.)
 */
const MAX_NODES = 64;
const MAX_DEPTH = 8;
/** Properties and elements visited, over the whole walk. */
const MAX_ENTRIES = 512;
/** Upper bounds per item, in bytes, of V8's serialization format (tags, varints of up to 5 bytes, doubles). */
const HEADER_BYTES = 4;
const SCALAR_BYTES = 10;
const STRING_OVERHEAD = 8;
const CONTAINER_OVERHEAD = 17;
/** An element's index as a key (tag and varint): indexes below MAX_ENTRIES, as walked, are small integers. */
const INDEX_KEY_BYTES = 6;
const SHARED_VIEW_BYTES = 40;

interface Walk {
  nodes: number;
  entries: number;
  /** Upper bound of the bytes of everything walked so far. */
  bytes: number;
  readonly limit: number;
}

function stringBound(s: string): number {
  // Two bytes per UTF-16 unit covers both one-byte and two-byte strings, plus tag, length and padding.
  return 2 * s.length + STRING_OVERHEAD;
}

/** Adds to the running bound; false once it is past the limit (the walk then stops: it cannot vouch). */
function add(walk: Walk, bytes: number): boolean {
  walk.bytes += bytes;
  return walk.bytes <= walk.limit;
}

/**
 * True when the walk can vouch that `value`, with everything walked before it, serializes within the limit; false
 * when it cannot tell (too big, too deep, too many entries, or a kind of value it does not model).
 */
function vouch(value: unknown, walk: Walk, depth: number): boolean {
  switch (typeof value) {
    case 'undefined':
    case 'boolean':
    case 'number':
      return add(walk, SCALAR_BYTES);
    case 'string':
      return add(walk, stringBound(value));
    case 'object':
      break;
    default:
      return false; // bigint, symbol, function: let the serializer decide
  }
  if (value === null) return add(walk, SCALAR_BYTES);
  if (++walk.nodes > MAX_NODES || depth >= MAX_DEPTH || types.isProxy(value)) return false;
  if (ArrayBuffer.isView(value)) {
    // Only views over shared memory: the serializer writes an id for the buffer, not its bytes. A view over an
    // ArrayBuffer copies the whole buffer (a pooled Buffer brings its 8 KiB pool) and may be detached: measure it.
    return value.buffer instanceof SharedArrayBuffer && add(walk, SHARED_VIEW_BYTES);
  }
  if (Array.isArray(value)) return Object.getPrototypeOf(value) === Array.prototype && vouchArray(value, walk, depth);
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  if (!add(walk, CONTAINER_OVERHEAD)) return false;
  const record = value as Record<string, unknown>;
  for (const key in record) {
    if (!Object.hasOwn(record, key)) continue;
    if (++walk.entries > MAX_ENTRIES || !add(walk, stringBound(key)) || !vouch(record[key], walk, depth + 1)) return false;
  }
  return true;
}

function vouchArray(list: unknown[], walk: Walk, depth: number): boolean {
  const length = list.length;
  // Its length bounds the walk by index: a longer array is left to the serializer, which writes a holey array as
  // index/value pairs of the elements it has (fast for any length) and a packed one element by element.
  if (length > MAX_ENTRIES - walk.entries) return false;
  walk.entries += length;
  if (!add(walk, CONTAINER_OVERHEAD)) return false;
  // A hole reads as `undefined` and is bounded as one: more than the nothing the serializer writes for it.
  for (let i = 0; i < length; i++) if (!add(walk, INDEX_KEY_BYTES) || !vouch(list[i], walk, depth + 1)) return false;
  // Named properties (`list.note = 'x'`) are serialized after the elements. Own keys list the indexes first, then
  // the names, so the names are the keys after the last index: read back from the end. (`Object.keys` costs a
  // third of a `for…in`, which would also turn every index into a string.)
  const keys = Object.keys(list);
  const record = list as unknown as Record<string, unknown>;
  for (let k = keys.length - 1; k >= 0; k--) {
    const key = keys[k]!;
    if (isIndexBelow(key, length)) break;
    if (++walk.entries > MAX_ENTRIES || !add(walk, stringBound(key)) || !vouch(record[key], walk, depth + 1)) return false;
  }
  return true;
}

/** Whether `key` is a canonical array index below `length` (digits, no leading zero). */
function isIndexBelow(key: string, length: number): boolean {
  if (key.length === 0 || key.length > 10 || (key.length > 1 && key.charCodeAt(0) === 48)) return false;
  let n = 0;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return false;
    n = n * 10 + c;
  }
  return n < length;
}

/** The broker's `validatePayload` for a size limit: structured-cloneable and at most `maxBytes` once serialized. */
export function payloadValidator(maxBytes: number): (payload: unknown) => void {
  return (payload) => {
    const fits = payloadFits(payload, maxBytes);
    if (fits === undefined) throw new InvalidEvaluationError('evaluation.payload', 'a structured-cloneable value', payload);
    if (fits !== true) throw new PayloadTooLargeError(fits, maxBytes);
  };
}
