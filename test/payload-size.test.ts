import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { payloadBytes, payloadFits } from '../src/payload-size.js';

const shared = new Float64Array(new SharedArrayBuffer(64));

/** Small plain data, the kind the fast walk vouches for (with views over shared memory mixed in). */
const plain: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.string({ unit: 'grapheme' }),
    fc.string({ unit: 'binary' }),
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.constant(undefined),
    fc.constant(shared),
    fc.array(tie('value'), { maxLength: 6 }),
    fc.dictionary(fc.string({ maxLength: 8 }), tie('value'), { maxKeys: 6 }),
    // Holey arrays (written as index/value pairs) and arrays with named properties (written after the elements).
    fc.sparseArray(tie('value'), { maxLength: 40, maxNumElements: 6 }),
    fc
      // A named property called `length` would set the array's length (to anything: a RangeError), not name one.
      .tuple(fc.array(tie('value'), { maxLength: 4 }), fc.dictionary(fc.string({ maxLength: 8 }).filter((k) => k !== 'length'), tie('value'), { maxKeys: 3 }))
      .map(([elements, named]) => Object.assign(elements, named)),
  ),
})).value;

test('payloadFits agrees with the exact size at every limit around it (property)', () => {
  fc.assert(
    fc.property(plain, fc.integer({ min: -40, max: 40 }), (payload, delta) => {
      const exact = payloadBytes(payload);
      assert.notEqual(exact, undefined);
      const limit = Math.max(0, exact! + delta);
      const fits = payloadFits(payload, limit);
      if (payload === undefined) assert.equal(fits, true);
      else if (exact! <= limit) assert.equal(fits, true, `${exact} bytes within ${limit}`);
      else assert.equal(fits, exact, `${exact} bytes over ${limit} must be reported exactly`);
    }),
    { numRuns: 1000 },
  );
});

test('what the walk cannot vouch for is measured exactly, and what cannot be cloned is undefined', () => {
  const big = { text: 'x'.repeat(10_000) };
  assert.equal(payloadFits(big, 1_000), payloadBytes(big));
  assert.equal(payloadFits({ at: new Date(0), tags: new Set([1, 2]) }, 1_000_000), true);
  assert.equal(payloadFits({ f: () => 1 }, 1_000_000), undefined);
  assert.equal(payloadFits({ s: Symbol('x') }, 1_000_000), undefined);
  assert.equal(payloadFits({ p: new Proxy({}, {}) }, 1_000_000), undefined);
  assert.equal(payloadFits(new (class Thing {})(), 1_000_000), true, 'a class instance clones as a plain object');
  const throwing = Object.defineProperty({}, 'boom', {
    enumerable: true,
    get() {
      throw new Error('getter');
    },
  });
  assert.equal(payloadFits(throwing, 1_000_000), undefined);
  // Top-level values are measured too, not only objects.
  assert.equal(payloadFits('x'.repeat(10_000), 1_000), payloadBytes('x'.repeat(10_000)));
  assert.ok((payloadBytes('x'.repeat(10_000)) ?? 0) > 10_000);
  assert.equal(payloadFits(12345678901234567890n, 1_000), true);
  assert.equal(payloadFits(() => 1, 1_000_000), undefined);
  // A view over an ArrayBuffer copies the whole buffer: a 1-byte view of a 4 KiB buffer is over a 1 KiB limit.
  const view = new Uint8Array(new ArrayBuffer(4096), 0, 1);
  assert.equal(payloadFits({ view }, 1024), payloadBytes({ view }));
  assert.ok((payloadBytes({ view }) ?? 0) > 4096);
});

test('named properties of an array count: a big one is measured, not waved through', () => {
  const list: number[] & { blob?: string } = [1, 2, 3];
  list.blob = 'x'.repeat(5_000);
  const exact = payloadBytes(list)!;
  assert.ok(exact > 5_000);
  assert.equal(payloadFits(list, 1024), exact);
  assert.equal(payloadFits({ list }, 1024), payloadBytes({ list }));
  const holey: unknown[] & { note?: string } = [1, , 3]; // eslint-disable-line no-sparse-arrays
  holey.note = 'y'.repeat(2_000);
  assert.equal(payloadFits(holey, 1024), payloadBytes(holey));
});

test('the walk is bounded: a huge sparse array is not walked index by index', () => {
  // A walk by index reads every hole, and a hole reads through to Array.prototype: count the reads of one of them.
  let holeReads = 0;
  const probe = 999_999;
  Object.defineProperty(Array.prototype, probe, {
    configurable: true,
    get() {
      holeReads++;
      return undefined;
    },
  });
  try {
    const sparse: unknown[] = [];
    sparse.length = probe + 1;
    assert.equal(payloadFits(sparse, 1_048_576), true);
    assert.equal(payloadFits({ a: sparse }, 1_048_576), true);
    assert.equal(holeReads, 0, 'no hole was read');
  } finally {
    delete (Array.prototype as unknown as Record<number, unknown>)[probe];
  }
  // Walked by index, 2^32 - 1 holes took about 90 s; serialized, they are a few bytes.
  const huge: unknown[] = [];
  huge.length = 2 ** 32 - 1;
  assert.equal(payloadFits(huge, 1_048_576), true);
  const tooMany = Array.from({ length: 100_000 }, (_, i) => i);
  assert.equal(payloadFits(tooMany, 1_024), payloadBytes(tooMany));
  assert.equal(payloadFits(tooMany, 10_000_000), true);
  // Many small keys: the walk stops at its entry budget and the serializer answers.
  const wide = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`k${i}`, i]));
  assert.equal(payloadFits(wide, 1_000_000), true);
  assert.equal(payloadFits(wide, 1_000), payloadBytes(wide));
});
