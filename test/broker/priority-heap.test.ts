import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { PriorityHeap } from '../../src/broker/priority-heap.js';

interface Node {
  key: number;
  id: number;
  heapIndex: number;
}

const before = (a: Node, b: Node): boolean => a.key < b.key || (a.key === b.key && a.id < b.id);

test('pops in order and keeps every heapIndex pointing at the node', () => {
  const heap = new PriorityHeap<Node>(before);
  const nodes = [5, 3, 9, 1, 7, 3].map((key, id) => ({ key, id, heapIndex: -1 }));
  for (const n of nodes) heap.push(n);
  heap.values().forEach((n, i) => assert.equal(n.heapIndex, i));
  const out: number[] = [];
  for (let n = heap.pop(); n !== undefined; n = heap.pop()) {
    assert.equal(n.heapIndex, -1);
    out.push(n.key);
  }
  assert.deepEqual(out, [1, 3, 3, 5, 7, 9]);
});

test('remove() takes any node out in place, and refuses one that is not there', () => {
  const heap = new PriorityHeap<Node>(before);
  const nodes = Array.from({ length: 20 }, (_, id) => ({ key: (id * 7) % 11, id, heapIndex: -1 }));
  for (const n of nodes) heap.push(n);
  assert.equal(heap.remove(nodes[4]!), true);
  assert.equal(heap.remove(nodes[4]!), false, 'a removed node is not removed twice');
  assert.equal(heap.has(nodes[4]!), false);
  const other = new PriorityHeap<Node>(before);
  const stranger = { key: 0, id: 99, heapIndex: 3 };
  assert.equal(other.remove(stranger), false, 'a node claiming a slot it does not own is refused');
  assert.equal(heap.size, 19);
});

test('property: any mix of push/pop/remove matches a sorted model', () => {
  fc.assert(
    fc.property(
      fc.array(fc.oneof(fc.record({ op: fc.constant('push' as const), key: fc.integer({ min: 0, max: 20 }) }), fc.record({ op: fc.constant('pop' as const) }), fc.record({ op: fc.constant('remove' as const), pick: fc.nat() })), { maxLength: 120 }),
      (ops) => {
        const heap = new PriorityHeap<Node>(before);
        let model: Node[] = [];
        let id = 0;
        for (const op of ops) {
          if (op.op === 'push') {
            const n = { key: op.key, id: id++, heapIndex: -1 };
            heap.push(n);
            model.push(n);
          } else if (op.op === 'pop') {
            model.sort((a, b) => (before(a, b) ? -1 : 1));
            assert.equal(heap.pop(), model.shift());
          } else if (model.length > 0) {
            const victim = model[op.pick % model.length]!;
            assert.equal(heap.remove(victim), true);
            model = model.filter((n) => n !== victim);
          }
          assert.equal(heap.size, model.length);
          heap.values().forEach((n, i) => assert.equal(n.heapIndex, i));
        }
      },
    ),
    { numRuns: 300 },
  );
});
