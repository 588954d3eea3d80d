/**
 * The byte codec copies a value as structured clone would: property tests over arbitrary data (plain and not) check
 * that what it reads back deep-equals `structuredClone` of what it wrote, shared memory stays shared, and what a
 * clone cannot carry (a function, a symbol) is refused as unencodable.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ByteReader, ByteWriter, UnencodableValue, UnknownSharedBuffer, type SharedBuffers } from '../../src/protocol/byte-codec.js';

/** A registry that numbers buffers as it meets them (as main's does). */
function registry(): SharedBuffers & { readonly buffers: SharedArrayBuffer[] } {
  const buffers: SharedArrayBuffer[] = [];
  return {
    buffers,
    idOf(buffer) {
      let id = buffers.indexOf(buffer);
      if (id < 0) id = buffers.push(buffer) - 1;
      return id;
    },
    bufferOf: (id) => buffers[id],
  };
}

function roundTrip(value: unknown, shared: SharedBuffers = registry()): unknown {
  const writer = new ByteWriter(shared, 8);
  writer.value(value);
  // Into shared memory and back, at an offset, as the queues do.
  const memory = new Uint8Array(new SharedArrayBuffer(writer.length + 16));
  memory.set(writer.bytes, 7);
  return new ByteReader(shared, memory, 7).value();
}

const plain = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constantFrom(undefined, null, true, false, 0, -0, Number.NaN, Infinity, -Infinity, 2 ** 31, -(2 ** 31), 0.1),
    fc.integer(),
    fc.double(),
    fc.string({ unit: 'binary' }),
    fc.string({ unit: 'grapheme' }),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(fc.string(), tie('value'), { maxKeys: 5 }),
  ),
})).value;

test('plain data comes back as a clone of it', () => {
  fc.assert(
    fc.property(plain, (value) => {
      assert.deepStrictEqual(roundTrip(value), structuredClone(value));
    }),
    { numRuns: 2000 },
  );
});

test('data a clone carries that is not plain comes back as its clone (through V8)', () => {
  const other = fc.oneof(
    fc.date({ noInvalidDate: true }),
    fc.bigInt(),
    fc.array(fc.integer(), { maxLength: 4 }).map((a) => new Map(a.map((x, i) => [x, i]))),
    fc.array(fc.string(), { maxLength: 4 }).map((a) => new Set(a)),
    fc.uint8Array({ maxLength: 8 }),
    fc.float64Array({ maxLength: 4 }),
    fc.constant(new Error('boom')),
    fc.constant(/a+b/gi),
  );
  fc.assert(
    fc.property(fc.oneof(other, fc.record({ a: other, b: plain }), fc.array(other, { maxLength: 3 })), (value) => {
      assert.deepStrictEqual(roundTrip(value), structuredClone(value));
    }),
    { numRuns: 500 },
  );
});

test('shared memory stays shared: a SharedArrayBuffer and views over it arrive as the same memory', () => {
  const shared = registry();
  const buffer = new SharedArrayBuffer(64);
  const payload = { gate: new Int32Array(buffer, 8, 4), raw: buffer, bytes: new DataView(buffer, 16, 8), list: [new Float64Array(buffer, 32, 2)] };
  const back = roundTrip(payload, shared) as typeof payload;
  assert.equal(back.raw, buffer);
  assert.ok(back.gate instanceof Int32Array && back.gate.buffer === buffer && back.gate.byteOffset === 8 && back.gate.length === 4);
  Atomics.store(back.gate, 0, 42);
  assert.equal(Atomics.load(payload.gate, 0), 42);
  assert.ok(back.bytes instanceof DataView && back.bytes.byteLength === 8);
  assert.ok(back.list[0] instanceof Float64Array && back.list[0].buffer === buffer);
  // Inside data that goes through V8 too.
  const inMap = roundTrip(new Map([['gate', payload.gate]]), shared) as Map<string, Int32Array>;
  assert.equal(inMap.get('gate')!.buffer, buffer);
});

test('an object met twice is one object again, as with a clone (and a cycle is carried)', () => {
  const shared = { n: 1 };
  const back = roundTrip({ a: shared, b: shared }) as { a: object; b: object };
  assert.equal(back.a, back.b);
  const cycle: Record<string, unknown> = { name: 'loop' };
  cycle['self'] = cycle;
  const looped = roundTrip(cycle) as Record<string, unknown>;
  assert.equal(looped['self'], looped);
});

test('an own __proto__ key is data, not a prototype; strings keep lone surrogates', () => {
  const value = JSON.parse('{"__proto__": {"polluted": true}, "x": 1}') as Record<string, unknown>;
  const back = roundTrip(value) as Record<string, unknown>;
  assert.equal(Object.getPrototypeOf(back), Object.prototype);
  assert.deepEqual(Object.keys(back), ['__proto__', 'x']);
  assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
  assert.equal(roundTrip('lone \uD800 surrogate'), 'lone \uD800 surrogate');
});

test('what a clone refuses is refused as unencodable; unregistered shared memory too', () => {
  for (const value of [() => 1, Symbol('s'), { f: () => 1 }, new Map([[1, () => 1]])]) {
    assert.throws(() => new ByteWriter(registry()).value(value), UnencodableValue);
  }
  const none: SharedBuffers = { idOf: () => undefined, bufferOf: () => undefined };
  assert.throws(() => new ByteWriter(none).value({ gate: new Int32Array(new SharedArrayBuffer(4)) }), UnencodableValue);
  // A reader that does not know a buffer yet says which one.
  const writerSide = registry();
  const writer = new ByteWriter(writerSide);
  writer.value(new Int32Array(new SharedArrayBuffer(4)));
  assert.throws(() => new ByteReader(none, writer.bytes, 0).value(), (error: unknown) => error instanceof UnknownSharedBuffer && error.id === 0);
});

test('fields and values read back in the order they were written', () => {
  const shared = registry();
  const writer = new ByteWriter(shared, 4);
  writer.u32(7);
  writer.string('fan');
  writer.f64(0.25);
  writer.value({ ms: 0.2 });
  writer.i32(-3);
  writer.blob(new Uint8Array([1, 2, 3]));
  const reader = new ByteReader(shared, writer.bytes, 0);
  assert.equal(reader.u32(), 7);
  assert.equal(reader.string(), 'fan');
  assert.equal(reader.f64(), 0.25);
  assert.deepEqual(reader.value(), { ms: 0.2 });
  assert.equal(reader.i32(), -3);
  assert.deepEqual([...reader.blob()], [1, 2, 3]);
  assert.equal(reader.offset, writer.length);
});
