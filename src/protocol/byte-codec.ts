/**
 * Records as bytes, for the structures main and the pool threads share in memory (the work queue's items, the
 * threads' result rings, the change log). Imported by both sides.
 *
 * A record is written field by field into a `ByteWriter`'s scratch buffer (numbers, strings, and values), then
 * copied once into shared memory; a `ByteReader` reads the fields back in the same order from any `Uint8Array`, a
 * view of shared memory included. Values are what structured clone would copy, with the same result:
 * - plain data (`undefined`, `null`, booleans, numbers, strings, dense arrays, plain objects) takes a fast path of
 *   one tag byte per value, strings as Latin-1 or UTF-16 code units (so a lone surrogate survives, as it does a
 *   clone), numbers as int32 or float64 (`-0` and `NaN` kept);
 * - shared memory is shared, not copied: a `SharedArrayBuffer`, or a typed array or `DataView` over one, is written
 *   as the number its `SharedBuffers` registry gives it, and read back as a view of the same memory;
 * - anything else (a `Date`, `Map`, `Set`, `RegExp`, `Error`, `BigInt`, a typed array over an `ArrayBuffer`, a sparse
 *   array, an object met twice, which a clone keeps as one) makes the whole value go through V8's serializer,
 *   with views over shared memory as host objects written by registry number.
 * A value none of this can carry (a function, a symbol; a bare `SharedArrayBuffer` inside a value that takes V8's
 * path; shared memory the registry does not know) throws `UnencodableValue`: the caller sends it by message instead.
 */
import { Deserializer, Serializer } from 'node:v8';
import { isSharedArrayBuffer } from 'node:util/types';

/** What main and a thread agree to call a shared buffer: numbers given out by main, known to every thread. */
export interface SharedBuffers {
  /** The buffer's number, or undefined when it has none (then a value holding it cannot be written as bytes). */
  idOf(buffer: SharedArrayBuffer): number | undefined;
  /** The buffer of a number, or undefined when it is not (yet) known here. */
  bufferOf(id: number): SharedArrayBuffer | undefined;
}

/** A value cannot be written as bytes: it must travel by message (structured clone). */
export class UnencodableValue extends Error {
  override readonly name = 'UnencodableValue';
}

/** A record names a shared buffer this side does not know yet (its registration is still on the way). */
export class UnknownSharedBuffer extends Error {
  override readonly name = 'UnknownSharedBuffer';
  readonly id: number;
  constructor(id: number) {
    super(`Expected shared buffer ${id} to be registered`);
    this.id = id;
  }
}

const Tag = Object.freeze({
  UNDEFINED: 0,
  NULL: 1,
  FALSE: 2,
  TRUE: 3,
  INT32: 4,
  FLOAT64: 5,
  LATIN1: 6,
  UTF16: 7,
  ARRAY: 8,
  OBJECT: 9,
  SHARED_BUFFER: 10,
  SHARED_VIEW: 11,
  V8: 12,
});

/** Views over shared memory by kind, as written (index) and rebuilt (constructor). */
const VIEW_KINDS = [
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
  DataView,
] as const;
type ViewKind = (typeof VIEW_KINDS)[number];
const VIEW_INDEX = new Map<unknown, number>(VIEW_KINDS.map((kind, i) => [kind, i]));

/** The fast path gives up (and V8's serializer takes over) past this depth: deeper data is rare and may be cyclic. */
const MAX_DEPTH = 32;

export class ByteWriter {
  #bytes: Uint8Array;
  #view: DataView;
  #at = 0;
  readonly #shared: SharedBuffers;
  /** Objects of the value being written (one met twice sends the value through V8, which keeps the sharing). */
  readonly #seen = new Set<object>();

  constructor(shared: SharedBuffers, initialBytes = 1024) {
    this.#shared = shared;
    this.#bytes = new Uint8Array(initialBytes);
    this.#view = new DataView(this.#bytes.buffer);
  }

  /** Bytes written since the last `reset`. */
  get length(): number {
    return this.#at;
  }

  /** The record written so far (valid until the next write or reset). */
  get bytes(): Uint8Array {
    return this.#bytes.subarray(0, this.#at);
  }

  reset(): void {
    this.#at = 0;
  }

  /** Drops what was written after `length` bytes. */
  truncate(length: number): void {
    if (length < this.#at) this.#at = length;
  }

  u8(n: number): void {
    this.#room(1);
    this.#bytes[this.#at++] = n;
  }

  u32(n: number): void {
    this.#room(4);
    this.#view.setUint32(this.#at, n, true);
    this.#at += 4;
  }

  i32(n: number): void {
    this.#room(4);
    this.#view.setInt32(this.#at, n, true);
    this.#at += 4;
  }

  f64(n: number): void {
    this.#room(8);
    this.#view.setFloat64(this.#at, n, true);
    this.#at += 8;
  }

  /** A string, exactly (every UTF-16 code unit kept). */
  string(s: string): void {
    const n = s.length;
    this.#room(5 + 2 * n);
    const start = this.#at;
    const bytes = this.#bytes;
    bytes[start] = Tag.LATIN1;
    this.#view.setUint32(start + 1, n, true);
    let at = start + 5;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c > 0xff) {
        this.#utf16(s, start);
        return;
      }
      bytes[at++] = c;
    }
    this.#at = at;
  }

  /** Starts a blob whose bytes are written next (a value, say): returns where its length goes (see `endBlob`). */
  startBlob(): number {
    const at = this.#at;
    this.u32(0);
    return at;
  }

  /** Ends the blob started at `at`: its length is what was written since. */
  endBlob(at: number): void {
    this.#view.setUint32(at, this.#at - at - 4, true);
  }

  /** Raw bytes with their length. */
  blob(data: Uint8Array): void {
    this.u32(data.length);
    this.#room(data.length);
    this.#bytes.set(data, this.#at);
    this.#at += data.length;
  }

  /**
   * A value, as structured clone would copy it (see the module comment). Throws `UnencodableValue` when it cannot be
   * written as bytes; the record is then unusable (reset it).
   */
  value(v: unknown): void {
    const start = this.#at;
    this.#seen.clear();
    if (this.#plain(v, 0)) return;
    this.#at = start;
    this.#seen.clear();
    this.#v8(v);
  }

  #utf16(s: string, start: number): void {
    const n = s.length;
    this.#bytes[start] = Tag.UTF16;
    let at = start + 5;
    for (let i = 0; i < n; i++, at += 2) this.#view.setUint16(at, s.charCodeAt(i), true);
    this.#at = at;
  }

  /** Writes `v` on the fast path; false (having written part of it) when it needs V8's serializer. */
  #plain(v: unknown, depth: number): boolean {
    switch (typeof v) {
      case 'undefined':
        this.u8(Tag.UNDEFINED);
        return true;
      case 'boolean':
        this.u8(v ? Tag.TRUE : Tag.FALSE);
        return true;
      case 'number':
        if ((v | 0) === v && !Object.is(v, -0)) {
          this.u8(Tag.INT32);
          this.i32(v);
        } else {
          this.u8(Tag.FLOAT64);
          this.f64(v);
        }
        return true;
      case 'string':
        this.string(v);
        return true;
      case 'object':
        break;
      default:
        return false; // bigint (V8 carries it); a function or a symbol (V8 refuses it, as a clone does)
    }
    if (v === null) {
      this.u8(Tag.NULL);
      return true;
    }
    if (depth >= MAX_DEPTH || this.#seen.has(v)) return false;
    this.#seen.add(v);
    if (Array.isArray(v)) return this.#array(v, depth);
    if (isSharedArrayBuffer(v)) return this.#sharedBuffer(v);
    if (ArrayBuffer.isView(v)) return this.#sharedView(v);
    const proto: unknown = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) return false;
    const keys = Object.keys(v);
    this.u8(Tag.OBJECT);
    this.u32(keys.length);
    const record = v as Record<string, unknown>;
    for (const key of keys) {
      this.string(key);
      if (!this.#plain(record[key], depth + 1)) return false;
    }
    return true;
  }

  #array(v: unknown[], depth: number): boolean {
    if (Object.getPrototypeOf(v) !== Array.prototype) return false;
    const n = v.length;
    // Holes and named properties are kept by a clone: only a plain dense array takes the fast path.
    if (Object.keys(v).length !== n) return false;
    this.u8(Tag.ARRAY);
    this.u32(n);
    for (let i = 0; i < n; i++) if (!this.#plain(v[i], depth + 1)) return false;
    return true;
  }

  #sharedBuffer(buffer: SharedArrayBuffer): boolean {
    const id = this.#shared.idOf(buffer);
    if (id === undefined) throw new UnencodableValue('a SharedArrayBuffer without a registry number');
    this.u8(Tag.SHARED_BUFFER);
    this.u32(id);
    return true;
  }

  /** A view: over shared memory by registry number; over an `ArrayBuffer` it is V8's to copy. */
  #sharedView(view: ArrayBufferView): boolean {
    const buffer = view.buffer;
    if (!isSharedArrayBuffer(buffer)) return false;
    const kind = VIEW_INDEX.get(view.constructor);
    // A subclass of a typed array is cloned as its base kind by a clone; V8's path does that.
    // Named properties on a view are dropped by a clone as by this path, so they need no check.
    if (kind === undefined) return false;
    const id = this.#shared.idOf(buffer);
    if (id === undefined) throw new UnencodableValue('a view over a SharedArrayBuffer without a registry number');
    this.u8(Tag.SHARED_VIEW);
    this.u8(kind);
    this.u32(id);
    this.f64(view.byteOffset);
    // A view over a growable buffer arrives with the length it had when it was written.
    this.f64(view instanceof DataView ? view.byteLength : (view as unknown as ArrayLike<unknown>).length);
    return true;
  }

  #v8(v: unknown): void {
    let bytes: Buffer;
    try {
      bytes = V8Writer.bytesOf(v, this.#shared);
    } catch (error) {
      if (error instanceof UnencodableValue) throw error;
      throw new UnencodableValue(error instanceof Error ? error.message : 'not serializable');
    }
    this.u8(Tag.V8);
    this.blob(bytes);
  }

  #room(n: number): void {
    const need = this.#at + n;
    if (need <= this.#bytes.length) return;
    let size = this.#bytes.length * 2;
    while (size < need) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.#bytes.subarray(0, this.#at));
    this.#bytes = next;
    this.#view = new DataView(next.buffer);
  }
}

export class ByteReader {
  #bytes: Uint8Array;
  #view: DataView;
  #at: number;
  readonly #shared: SharedBuffers;

  constructor(shared: SharedBuffers, bytes: Uint8Array = new Uint8Array(0), at = 0) {
    this.#shared = shared;
    this.#bytes = bytes;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.#at = at;
  }

  /** Reads from `bytes` (a view of shared memory, say) at `at` from now on. */
  reset(bytes: Uint8Array, at: number): void {
    if (bytes !== this.#bytes) {
      this.#bytes = bytes;
      this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }
    this.#at = at;
  }

  get offset(): number {
    return this.#at;
  }

  u8(): number {
    return this.#bytes[this.#at++]!;
  }

  u32(): number {
    const n = this.#view.getUint32(this.#at, true);
    this.#at += 4;
    return n;
  }

  i32(): number {
    const n = this.#view.getInt32(this.#at, true);
    this.#at += 4;
    return n;
  }

  f64(): number {
    const n = this.#view.getFloat64(this.#at, true);
    this.#at += 8;
    return n;
  }

  string(): string {
    const tag = this.u8();
    const n = this.u32();
    const bytes = this.#bytes;
    const start = this.#at;
    if (tag === Tag.LATIN1) {
      this.#at = start + n;
      if (n <= 24) {
        let s = '';
        for (let i = start; i < start + n; i++) s += String.fromCharCode(bytes[i]!);
        return s;
      }
      return Buffer.from(bytes.buffer, bytes.byteOffset + start, n).toString('latin1');
    }
    this.#at = start + 2 * n;
    let s = '';
    for (let i = 0; i < n; i++) s += String.fromCharCode(this.#view.getUint16(start + 2 * i, true));
    return s;
  }

  /**
   * Raw bytes, copied out (they may sit in shared memory that is written again). Small ones share Node's buffer
   * pool (`Buffer.allocUnsafe`, filled at once): a backing store of their own costs several times the copy.
   */
  blob(): Uint8Array {
    const n = this.u32();
    const out = Buffer.allocUnsafe(n);
    out.set(this.#bytes.subarray(this.#at, this.#at + n));
    this.#at += n;
    return out;
  }

  /** A value written by `ByteWriter.value`. Throws `UnknownSharedBuffer` for shared memory not registered here. */
  value(): unknown {
    const tag = this.#bytes[this.#at]!;
    switch (tag) {
      case Tag.UNDEFINED:
        this.#at++;
        return undefined;
      case Tag.NULL:
        this.#at++;
        return null;
      case Tag.FALSE:
        this.#at++;
        return false;
      case Tag.TRUE:
        this.#at++;
        return true;
      case Tag.INT32:
        this.#at++;
        return this.i32();
      case Tag.FLOAT64:
        this.#at++;
        return this.f64();
      case Tag.LATIN1:
      case Tag.UTF16:
        return this.string();
      case Tag.ARRAY: {
        this.#at++;
        const n = this.u32();
        const out = new Array<unknown>(n);
        for (let i = 0; i < n; i++) out[i] = this.value();
        return out;
      }
      case Tag.OBJECT: {
        this.#at++;
        const n = this.u32();
        const out: Record<string, unknown> = {};
        for (let i = 0; i < n; i++) {
          const key = this.string();
          const v = this.value();
          // An own `__proto__` (a clone keeps it as data) must not set the prototype.
          if (key === '__proto__') Object.defineProperty(out, key, { value: v, writable: true, enumerable: true, configurable: true });
          else out[key] = v;
        }
        return out;
      }
      case Tag.SHARED_BUFFER: {
        this.#at++;
        return this.#buffer(this.u32());
      }
      case Tag.SHARED_VIEW: {
        this.#at++;
        const kind = VIEW_KINDS[this.u8()]!;
        const buffer = this.#buffer(this.u32());
        const byteOffset = this.f64();
        const length = this.f64();
        return makeView(kind, buffer, byteOffset, length);
      }
      case Tag.V8: {
        this.#at++;
        const n = this.u32();
        const value = readV8(this.#bytes.subarray(this.#at, this.#at + n), this.#shared);
        this.#at += n;
        return value;
      }
      default:
        throw new RangeError(`Unexpected value tag ${tag} at byte ${this.#at}`);
    }
  }

  #buffer(id: number): SharedArrayBuffer {
    const buffer = this.#shared.bufferOf(id);
    if (buffer === undefined) throw new UnknownSharedBuffer(id);
    return buffer;
  }
}

function makeView(kind: ViewKind, buffer: SharedArrayBuffer, byteOffset: number, length: number): ArrayBufferView {
  if (kind === DataView) return new DataView(buffer, byteOffset, length);
  const Kind = kind as new (buffer: SharedArrayBuffer, byteOffset: number, length: number) => ArrayBufferView;
  return new Kind(buffer, byteOffset, length);
}

/** V8's serializer, with views over shared memory as host objects written by registry number. */
class V8Writer extends Serializer {
  readonly #shared: SharedBuffers;

  constructor(shared: SharedBuffers) {
    super();
    this.#shared = shared;
  }

  /** A serializer cannot be used again once it released its buffer: one per value, on this (rare) path. */
  static bytesOf(v: unknown, shared: SharedBuffers): Buffer {
    const writer = new V8Writer(shared);
    // Node's types leave out the host-object hooks of V8's serializer (`_setTreatArrayBufferViewsAsHostObjects`).
    (writer as unknown as { _setTreatArrayBufferViewsAsHostObjects(flag: boolean): void })._setTreatArrayBufferViewsAsHostObjects(true);
    writer.writeHeader();
    writer.writeValue(v);
    return writer.releaseBuffer();
  }

  _writeHostObject(object: object): void {
    const view = object as ArrayBufferView;
    const kind = VIEW_INDEX.get(view.constructor);
    if (kind === undefined) throw new UnencodableValue('an object V8 cannot serialize');
    this.writeUint32(kind);
    if (isSharedArrayBuffer(view.buffer)) {
      const id = this.#shared.idOf(view.buffer);
      if (id === undefined) throw new UnencodableValue('a view over a SharedArrayBuffer without a registry number');
      this.writeUint32(1);
      this.writeUint32(id);
      this.writeDouble(view.byteOffset);
      this.writeDouble(view instanceof DataView ? view.byteLength : (view as unknown as ArrayLike<unknown>).length);
    } else {
      this.writeUint32(0);
      const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
      this.writeUint32(bytes.length);
      this.writeRawBytes(bytes);
    }
  }

  _getSharedArrayBufferId(): number {
    throw new UnencodableValue('a bare SharedArrayBuffer inside a value that is not plain data');
  }
}

class V8Reader extends Deserializer {
  readonly #shared: SharedBuffers;

  constructor(bytes: Uint8Array, shared: SharedBuffers) {
    super(bytes);
    this.#shared = shared;
  }

  _readHostObject(): unknown {
    const kind = VIEW_KINDS[this.readUint32()]!;
    if (this.readUint32() === 1) {
      const id = this.readUint32();
      const buffer = this.#shared.bufferOf(id);
      if (buffer === undefined) throw new UnknownSharedBuffer(id);
      const byteOffset = this.readDouble();
      const length = this.readDouble();
      return makeView(kind, buffer, byteOffset, length);
    }
    const n = this.readUint32();
    // Copied out: the bytes may sit in shared memory that is reused once the record is read.
    const copy = new Uint8Array(n);
    copy.set(this.readRawBytes(n) as unknown as Uint8Array);
    if (kind === DataView) return new DataView(copy.buffer);
    const Kind = kind as unknown as { readonly BYTES_PER_ELEMENT: number; new (buffer: ArrayBuffer, byteOffset: number, length: number): unknown };
    return new Kind(copy.buffer, 0, n / Kind.BYTES_PER_ELEMENT);
  }
}

function readV8(bytes: Uint8Array, shared: SharedBuffers): unknown {
  const reader = new V8Reader(bytes, shared);
  reader.readHeader();
  return reader.readValue();
}
