import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { DeadlineQueue, type DeadlineNode } from '../../src/broker/deadline-queue.js';
import { ManualClock } from '../../src/clock.js';

interface Node extends DeadlineNode {
  name: string;
}

function node(name: string): Node {
  return { name, due: 0, deadlineIndex: -1, deadlineSeq: 0 };
}

test('fires when now >= due, in due order, ties in scheduling order', () => {
  const clock = new ManualClock(0);
  const fired: Array<[string, number]> = [];
  const q = new DeadlineQueue<Node>(clock, (n) => fired.push([n.name, clock.now()]));
  const [a, b, c, d] = ['a', 'b', 'c', 'd'].map(node) as [Node, Node, Node, Node];
  q.schedule(c, 30);
  q.schedule(a, 10);
  q.schedule(b, 30);
  q.schedule(d, 20);
  clock.advance(9);
  assert.deepEqual(fired, []);
  clock.advance(1);
  assert.deepEqual(fired, [['a', 10]]);
  clock.advance(100);
  assert.deepEqual(fired, [['a', 10], ['d', 20], ['c', 30], ['b', 30]]);
  assert.equal(q.size, 0);
});

test('keeps one clock timer however many deadlines it holds, and re-arms only for an earlier one', () => {
  const clock = new ManualClock(0);
  const q = new DeadlineQueue<Node>(clock, () => {});
  const nodes = Array.from({ length: 1000 }, (_, i) => node(`n${i}`));
  nodes.forEach((n, i) => q.schedule(n, 1000 + i));
  assert.equal(clock.pendingTimers, 1);
  assert.equal(clock.nextTimerDue(), 1000);
  q.schedule(node('early'), 5);
  assert.equal(clock.pendingTimers, 1);
  assert.equal(clock.nextTimerDue(), 5, 'moved to the earlier deadline');
});

test('cancel leaves the timer armed (lazy); an early fire re-arms for the next deadline', () => {
  const clock = new ManualClock(0);
  const fired: string[] = [];
  const q = new DeadlineQueue<Node>(clock, (n) => fired.push(n.name));
  const a = node('a');
  const b = node('b');
  q.schedule(a, 10);
  q.schedule(b, 50);
  assert.equal(q.cancel(a), true);
  assert.equal(q.cancel(a), false);
  assert.equal(clock.nextTimerDue(), 10, 'not re-armed on cancel');
  clock.advance(10);
  assert.deepEqual(fired, []);
  assert.equal(clock.nextTimerDue(), 50, 're-armed for what is left');
  clock.advance(40);
  assert.deepEqual(fired, ['b']);
  assert.equal(clock.pendingTimers, 0);
});

test('a queue whose timer keeps the process alive disarms once its last node is canceled; an unref one stays lazy', () => {
  const clock = new ManualClock(0);
  const kept = new DeadlineQueue<Node>(clock, () => undefined, { unref: false });
  const a = node('a');
  const b = node('b');
  kept.schedule(a, 10);
  kept.schedule(b, 20);
  kept.cancel(a);
  assert.equal(clock.pendingTimers, 1, 'still armed while a node waits');
  kept.cancel(b);
  assert.equal(clock.pendingTimers, 0, 'nothing left to fire: nothing keeps the process open');
  const lazy = new DeadlineQueue<Node>(clock, () => undefined);
  lazy.schedule(a, 10);
  lazy.cancel(a);
  assert.equal(clock.pendingTimers, 1, 'the unref queue keeps its timer (no clearTimeout per ack)');
});

test('rescheduling moves a node; clear() disarms', () => {
  const clock = new ManualClock(0);
  const fired: string[] = [];
  const q = new DeadlineQueue<Node>(clock, (n) => fired.push(n.name));
  const a = node('a');
  q.schedule(a, 10);
  q.schedule(a, 100);
  assert.equal(q.size, 1);
  clock.advance(50);
  assert.deepEqual(fired, []);
  assert.deepEqual(q.clear(), [a]);
  assert.equal(clock.pendingTimers, 0);
  clock.advance(100);
  assert.deepEqual(fired, []);
});

test('a node scheduled from a callback for a time already due fires in the same pass', () => {
  const clock = new ManualClock(0);
  const fired: string[] = [];
  const late = node('late');
  const q = new DeadlineQueue<Node>(clock, (n) => {
    fired.push(n.name);
    if (n.name === 'first') q.schedule(late, clock.now());
  });
  q.schedule(node('first'), 10);
  clock.advance(10);
  assert.deepEqual(fired, ['first', 'late']);
});

test('property: random schedule/cancel/advance fire exactly the due nodes, in order', () => {
  fc.assert(
    fc.property(
      fc.array(fc.oneof(fc.record({ op: fc.constant('schedule' as const), n: fc.nat(15), at: fc.nat(200) }), fc.record({ op: fc.constant('cancel' as const), n: fc.nat(15) }), fc.record({ op: fc.constant('advance' as const), ms: fc.nat(120) })), { maxLength: 80 }),
      (ops) => {
        const clock = new ManualClock(0);
        const nodes = Array.from({ length: 16 }, (_, i) => node(String(i)));
        const model = new Map<Node, number>();
        const fired: Node[] = [];
        const q = new DeadlineQueue<Node>(clock, (n) => {
          assert.ok(n.due <= clock.now(), 'never early');
          fired.push(n);
        });
        for (const op of ops) {
          if (op.op === 'schedule') {
            q.schedule(nodes[op.n]!, clock.now() + op.at);
            model.set(nodes[op.n]!, clock.now() + op.at);
          } else if (op.op === 'cancel') {
            assert.equal(q.cancel(nodes[op.n]!), model.delete(nodes[op.n]!));
          } else {
            fired.length = 0;
            const target = clock.now() + op.ms;
            const due = [...model].filter(([, at]) => at <= target).sort((x, y) => x[1] - y[1]);
            clock.advance(op.ms);
            assert.deepEqual(fired.map((n) => n.due), due.map(([, at]) => at));
            for (const [n] of due) model.delete(n);
          }
          assert.equal(q.size, model.size);
          assert.ok(clock.pendingTimers <= 1, 'one timer at most');
          if (model.size > 0) assert.ok(clock.nextTimerDue()! <= Math.min(...model.values()), 'armed no later than the earliest deadline');
        }
      },
    ),
    { numRuns: 300 },
  );
});
