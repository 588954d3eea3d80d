import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { ItemOutcome, ThreadItem } from '../../src/protocol/messages.js';
import { isResultMessage, isWorkMessage } from '../../src/protocol/messages.js';
import { decodeWork, encodeResults, encodeWork, forEachResult } from '../../src/protocol/wire.js';
import type { ChangeSet } from '../../src/state/types.js';

const change = (index: number): ChangeSet => ({ index, tables: {} }) as unknown as ChangeSet;

const item: fc.Arbitrary<ThreadItem> = fc.oneof(
  fc.record({
    kind: fc.constant('eval' as const),
    seq: fc.nat(),
    slot: fc.nat(),
    generation: fc.nat(),
    attempt: fc.integer({ min: 1, max: 9 }),
    evaluation: fc.record({ id: fc.string({ minLength: 1 }), type: fc.string({ minLength: 1 }), modifyIndex: fc.nat(), payload: fc.jsonValue() }),
    minIndex: fc.nat(),
    syncLimitMs: fc.nat(),
  }),
  fc.record({
    kind: fc.constant('run' as const),
    seq: fc.nat(),
    slot: fc.nat(),
    generation: fc.nat(),
    attempt: fc.integer({ min: 1, max: 9 }),
    run: fc.record({ taskId: fc.string(), runId: fc.string(), scheduledFor: fc.nat(), runAt: fc.nat() }),
    handler: fc.string({ minLength: 1 }),
    payload: fc.jsonValue(),
  }),
);

test('a work message survives a structured clone: change sets in order, then the same items (property)', () => {
  fc.assert(
    fc.property(fc.array(fc.nat(1000), { maxLength: 4 }), fc.array(item, { maxLength: 8 }), (indexes, items) => {
      const message = structuredClone(encodeWork(indexes.map(change), items.map((i) => ({ seq: i.seq, item: i }))));
      assert.ok(isWorkMessage(message));
      const seen: number[] = [];
      const decoded: ThreadItem[] = [];
      assert.equal(decodeWork(message, (c) => seen.push(c.index), decoded), items.length);
      assert.deepEqual(seen, indexes);
      // The generators make null-prototype objects; a clone is what the thread would see.
      assert.deepEqual(decoded, structuredClone(items));
    }),
    { numRuns: 300 },
  );
});

const outcome: fc.Arbitrary<ItemOutcome> = fc.oneof(
  fc.record({ seq: fc.nat(), status: fc.constant('ok' as const), value: fc.jsonValue(), waitedMs: fc.nat(), ms: fc.double({ min: 0, max: 1e6, noNaN: true }) }),
  fc.record({
    seq: fc.nat(),
    status: fc.constant('error' as const),
    error: fc.record({
      name: fc.string(),
      code: fc.option(fc.string(), { nil: undefined }),
      message: fc.string(),
      stack: fc.option(fc.string(), { nil: undefined }),
      details: fc.constant(undefined),
    }),
    retryable: fc.boolean(),
    ms: fc.double({ min: 0, max: 1e6, noNaN: true }),
  }),
  fc.record({ seq: fc.nat(), status: fc.constant('canceled' as const), ms: fc.double({ min: 0, max: 1e6, noNaN: true }) }),
  fc.record({ seq: fc.nat(), status: fc.constant('not-started' as const) }),
);

test('a results message survives a structured clone with every outcome in order (property)', () => {
  fc.assert(
    fc.property(fc.array(outcome, { maxLength: 10 }), (outcomes) => {
      const message = structuredClone(encodeResults(outcomes));
      assert.ok(isResultMessage(message));
      const back: ItemOutcome[] = [];
      forEachResult(message, (seq, status, extra, number, ms) => {
        if (status === 'ok') back.push({ seq, status, value: extra, waitedMs: number, ms });
        else if (status === 'error') back.push({ seq, status, error: extra as never, retryable: number === 1, ms });
        else if (status === 'canceled') back.push({ seq, status, ms });
        else back.push({ seq, status });
      });
      assert.deepEqual(back, structuredClone(outcomes));
    }),
    { numRuns: 300 },
  );
});

test('control messages are objects, never taken for work or results', () => {
  assert.equal(isWorkMessage({ type: 'stop' }), false);
  assert.equal(isResultMessage({ type: 'ready', threadIndex: 0 }), false);
});
