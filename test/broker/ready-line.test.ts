import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { PriorityHeap } from '../../src/broker/priority-heap.js';
import { ReadyLine } from '../../src/broker/ready-line.js';

/** A stand-in for the broker's entry: the same fields the ready order reads. */
interface Node {
  readonly priority: number;
  readonly order: number;
  readonly seq: number;
  heapIndex: number;
}

const before = (a: Node, b: Node): boolean => {
  if (a.priority !== b.priority) return a.priority > b.priority;
  if (a.order !== b.order) return a.order < b.order;
  return a.seq < b.seq;
};

type Op = { readonly k: 'push'; readonly priority: number; readonly order: number; readonly old: boolean } | { readonly k: 'pop' };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    k: fc.constant('push' as const),
    priority: fc.constantFrom(1, 2, 50, 99, 100),
    // Mostly 0 (then enqueue order decides), sometimes an explicit createIndex that may be older than the tail.
    order: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 20 })),
    // A requeued entry keeps its old enqueue order: it arrives "late".
    old: fc.boolean(),
  }),
  fc.constant({ k: 'pop' as const }),
);

test('the ready line pops in exactly the order of a binary heap over the same comparator (property)', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
      const line = new ReadyLine<Node>(before);
      const heap = new PriorityHeap<Node>(before);
      let seq = 1000;
      let oldSeq = 999;
      for (const o of ops) {
        if (o.k === 'push') {
          const s = o.old ? oldSeq-- : seq++;
          // Two copies: the heap keeps its own index in each node.
          line.push({ priority: o.priority, order: o.order, seq: s, heapIndex: -1 });
          heap.push({ priority: o.priority, order: o.order, seq: s, heapIndex: -1 });
        } else {
          const a = line.pop();
          const b = heap.pop();
          assert.deepEqual(a === undefined ? undefined : [a.priority, a.order, a.seq], b === undefined ? undefined : [b.priority, b.order, b.seq]);
        }
        assert.equal(line.size, heap.size);
        const p = line.peek();
        const q = heap.peek();
        assert.deepEqual(p === undefined ? undefined : p.seq, q === undefined ? undefined : q.seq);
      }
      const rest = line.drain();
      assert.equal(rest.length, heap.size);
      assert.equal(line.size, 0);
      assert.equal(line.pop(), undefined);
    }),
    { numRuns: 500 },
  );
});

test('a long in-order run is consumed in order and its memory is compacted', () => {
  const line = new ReadyLine<Node>(before);
  for (let i = 0; i < 20_000; i++) line.push({ priority: 50, order: 0, seq: i, heapIndex: -1 });
  for (let i = 0; i < 15_000; i++) assert.equal(line.pop()?.seq, i);
  line.push({ priority: 90, order: 0, seq: 99_999, heapIndex: -1 });
  assert.equal(line.pop()?.seq, 99_999, 'a higher priority goes first');
  for (let i = 15_000; i < 20_000; i++) assert.equal(line.pop()?.seq, i);
  assert.equal(line.size, 0);
  assert.equal(line.peek(), undefined);
});
