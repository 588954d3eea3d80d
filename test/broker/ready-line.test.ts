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
  lineMark: number;
}

const before = (a: Node, b: Node): boolean => {
  if (a.priority !== b.priority) return a.priority > b.priority;
  if (a.order !== b.order) return a.order < b.order;
  return a.seq < b.seq;
};

type Op =
  | { readonly k: 'push'; readonly priority: number; readonly order: number; readonly old: boolean }
  | { readonly k: 'pop' }
  | { readonly k: 'remove'; readonly pick: number };

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
  fc.record({ k: fc.constant('remove' as const), pick: fc.nat() }),
);

const node = (priority: number, order: number, seq: number): Node => ({ priority, order, seq, heapIndex: -1, lineMark: 0 });

test('the ready line pops in exactly the order of a binary heap over the same comparator, with removals (property)', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
      const line = new ReadyLine<Node>(before);
      const heap = new PriorityHeap<Node>(before);
      // The nodes in each, by seq: a removal takes the same node out of both.
      const inLine = new Map<number, Node>();
      const inHeap = new Map<number, Node>();
      let seq = 1000;
      let oldSeq = 999;
      for (const o of ops) {
        if (o.k === 'push') {
          const s = o.old ? oldSeq-- : seq++;
          // Two copies: the heap keeps its own index in each node.
          const a = node(o.priority, o.order, s);
          const b = node(o.priority, o.order, s);
          line.push(a);
          heap.push(b);
          inLine.set(s, a);
          inHeap.set(s, b);
        } else if (o.k === 'pop') {
          const a = line.pop();
          const b = heap.pop();
          assert.deepEqual(a === undefined ? undefined : [a.priority, a.order, a.seq], b === undefined ? undefined : [b.priority, b.order, b.seq]);
          if (a !== undefined) inLine.delete(a.seq);
          if (b !== undefined) inHeap.delete(b.seq);
        } else if (inLine.size > 0) {
          const s = [...inLine.keys()][o.pick % inLine.size]!;
          assert.equal(line.remove(inLine.get(s)!), true);
          assert.equal(line.remove(inLine.get(s)!), false, 'a node is removed once');
          assert.equal(heap.remove(inHeap.get(s)!), true);
          inLine.delete(s);
          inHeap.delete(s);
        }
        assert.equal(line.size, heap.size);
        const p = line.peek();
        const q = heap.peek();
        assert.deepEqual(p === undefined ? undefined : p.seq, q === undefined ? undefined : q.seq);
      }
      const rest = line.drain();
      assert.deepEqual(rest.map((n) => n.seq).sort(), [...inHeap.keys()].sort());
      assert.equal(line.size, 0);
      assert.equal(line.pop(), undefined);
    }),
    { numRuns: 500 },
  );
});

/** `before`, counting its calls: a complexity claim checked by counting operations, not by timing. */
function countingBefore(): { before: (a: Node, b: Node) => boolean; comparisons: number } {
  const counter = {
    comparisons: 0,
    before: (a: Node, b: Node): boolean => {
      counter.comparisons++;
      return before(a, b);
    },
  };
  return counter;
}

test('removing a node of a long run is an O(1) mark: no comparison, no move, the node skipped when reached', () => {
  const counter = countingBefore();
  const line = new ReadyLine<Node>(counter.before);
  const nodes = Array.from({ length: 100_000 }, (_, i) => node(50, 0, i));
  for (const n of nodes) line.push(n);
  counter.comparisons = 0;
  // Every other one, from the back: a scan-and-splice removal would move ~2.5e9 slots here.
  for (let i = nodes.length - 1; i >= 0; i -= 2) assert.equal(line.remove(nodes[i]!), true);
  assert.equal(counter.comparisons, 0, 'a removal from the run compares nothing');
  // Each removed node stays where it was, marked, until the run's head passes it: nothing was moved.
  assert.ok(nodes.every((n, i) => n.lineMark === (i % 2 === 1 ? 2 : 1)), 'removed nodes are marked in place, the rest untouched');
  assert.equal(line.size, 50_000);
  for (let i = 0; i < nodes.length; i += 2) assert.equal(line.pop()?.seq, i);
  assert.equal(line.size, 0);
});

test('removing a node that arrived out of order costs O(log n) comparisons in its bucket\'s late heap', () => {
  const counter = countingBefore();
  const line = new ReadyLine<Node>(counter.before);
  line.push(node(50, 1_000_000, 0));
  // Each of these is older than the run's tail: all go to the late heap.
  const late = Array.from({ length: 4_096 }, (_, i) => node(50, i, i + 1));
  for (const n of late.slice().reverse()) line.push(n);
  const bound = 4 * Math.log2(late.length);
  for (const n of late.filter((_, i) => i % 3 === 0)) {
    counter.comparisons = 0;
    assert.equal(line.remove(n), true);
    assert.ok(counter.comparisons <= bound, `one removal took ${counter.comparisons} comparisons, more than ${bound}`);
  }
  const rest = late.filter((_, i) => i % 3 !== 0).map((n) => n.seq);
  for (const seq of rest) assert.equal(line.pop()?.seq, seq);
  assert.equal(line.pop()?.seq, 0);
});

test('a long in-order run is consumed in order and its memory is compacted', () => {
  const line = new ReadyLine<Node>(before);
  for (let i = 0; i < 20_000; i++) line.push(node(50, 0, i));
  for (let i = 0; i < 15_000; i++) assert.equal(line.pop()?.seq, i);
  line.push(node(90, 0, 99_999));
  assert.equal(line.pop()?.seq, 99_999, 'a higher priority goes first');
  for (let i = 15_000; i < 20_000; i++) assert.equal(line.pop()?.seq, i);
  assert.equal(line.size, 0);
  assert.equal(line.peek(), undefined);
});
