/**
 * A thread's result ring: records appended by one side come out on the other in order, exactly, across the ring's
 * end; a record that does not fit is refused (the thread then sends it by message) and changes nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ResultRingReader, ResultRingWriter, createResultRing } from '../../src/protocol/result-ring.js';

const bytesOf = (n: number, seed: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => (seed + i) & 0xff);

test('property: whatever is appended comes out once, in order, byte for byte; what does not fit is refused', () => {
  fc.assert(
    fc.property(fc.array(fc.oneof(fc.record({ append: fc.nat(400) }), fc.record({ drain: fc.constant(true) })), { maxLength: 200 }), (steps) => {
      const buffer = createResultRing(2048);
      const writer = new ResultRingWriter(buffer);
      const reader = new ResultRingReader(buffer);
      const sent: Uint8Array[] = [];
      let received = 0;
      let seed = 0;
      for (const s of steps) {
        if ('append' in s) {
          const record = bytesOf(s.append, seed++);
          if (writer.append(record)) sent.push(record);
        } else {
          reader.drain((ring, at, length) => {
            assert.deepEqual(ring.slice(at, at + length), sent[received], `record ${received}`);
            received++;
          });
          assert.equal(received, sent.length);
          assert.equal(reader.pending, false);
        }
      }
    }),
    { numRuns: 300 },
  );
});

test('a record over a quarter of the ring is refused; a full ring refuses until main drains it', () => {
  const buffer = createResultRing(1024);
  const writer = new ResultRingWriter(buffer);
  const reader = new ResultRingReader(buffer);
  assert.equal(writer.append(new Uint8Array(300)), false);
  let appended = 0;
  while (writer.append(new Uint8Array(100))) appended++;
  assert.ok(appended >= 8);
  assert.equal(reader.drain(() => undefined), appended);
  assert.equal(writer.append(new Uint8Array(100)), true);
});
