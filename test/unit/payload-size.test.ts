import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { payloadBytes, payloadFits } from '../../src/payload-size.js';

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
