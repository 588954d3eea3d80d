/**
 * An evaluation crosses to its thread field by field (records.ts `writeEvaluation`): a property test over every
 * combination of the fields an evaluation may have checks that what the thread reads deep-equals what main wrote,
 * with no field added and none lost.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ByteReader, ByteWriter, type SharedBuffers } from '../../src/protocol/byte-codec.js';
import type { EvalItem, WireEvaluation } from '../../src/protocol/messages.js';
import { readItem, writeItem } from '../../src/protocol/records.js';

const noShared: SharedBuffers = {
  idOf: () => {
    throw new Error('no shared memory in these evaluations');
  },
  bufferOf: () => undefined,
};

function throughRecord(item: EvalItem, seq: number): ReturnType<typeof readItem> {
  const writer = new ByteWriter(noShared, 8);
  writeItem(writer, seq, item);
  const memory = new Uint8Array(new SharedArrayBuffer(writer.length + 8));
  memory.set(writer.bytes, 3);
  return readItem(new ByteReader(noShared, memory, 3), item.slot, item.generation);
}

const key = fc.string({ unit: 'binary', minLength: 1, maxLength: 12 });
const index = fc.maxSafeNat();
const evaluation: fc.Arbitrary<WireEvaluation> = fc.record(
  {
    id: key,
    type: key,
    priority: fc.integer({ min: 1, max: 100 }),
    modifyIndex: index,
    namespace: key,
    jobId: key,
    triggeredBy: fc.string({ unit: 'binary', maxLength: 12 }),
    createIndex: index,
    waitUntil: fc.integer({ min: 0, max: 8.64e15 }),
    wait: fc.nat(),
    payload: fc.jsonValue(),
  },
  { requiredKeys: ['id', 'type', 'priority', 'modifyIndex'] },
);

test('an evaluation reaches its thread with exactly the fields it has, each as written', () => {
  fc.assert(
    fc.property(evaluation, fc.nat({ max: 2 ** 32 - 1 }), fc.nat({ max: 2 ** 32 - 1 }), (e, seq, attempt) => {
      const item: EvalItem = { kind: 'eval', slot: 3, generation: 7, attempt, minIndex: e.modifyIndex, syncLimitMs: 5000, evaluation: e };
      const back = throughRecord(item, seq);
      assert.equal(back.kind, 'eval');
      assert.deepStrictEqual(back, { ...item, seq, evaluation: { ...e } });
    }),
    { numRuns: 500 },
  );
});

test('a payload of null or false is carried; an absent payload stays absent', () => {
  for (const payload of [null, false, 0, '']) {
    const back = throughRecord({ kind: 'eval', slot: 0, generation: 0, attempt: 1, minIndex: 0, syncLimitMs: 0, evaluation: { id: 'e', type: 't', priority: 50, modifyIndex: 0, payload } }, 1);
    assert.ok(back.kind === 'eval' && 'payload' in back.evaluation && back.evaluation.payload === payload);
  }
  const back = throughRecord({ kind: 'eval', slot: 0, generation: 0, attempt: 1, minIndex: 0, syncLimitMs: 0, evaluation: { id: 'e', type: 't', priority: 50, modifyIndex: 0 } }, 1);
  assert.ok(back.kind === 'eval' && !('payload' in back.evaluation));
});
