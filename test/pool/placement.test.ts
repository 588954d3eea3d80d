/**
 * The pool's placement decision (src/pool/placement.ts) as the pure function it is: which queued items go to which
 * thread, given what each thread holds. Examples first, then properties over random loads and queues.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { busiestThread, hasRoom, overran, placeQueued, takeBackCount, type PlacementLimits, type ThreadLoad } from '../../src/pool/placement.js';

interface Item {
  readonly id: number;
  readonly kind: string;
  /** Predicted ms, or undefined for an item that needs no place (it started elsewhere or settled). */
  readonly cost: number | undefined;
}

const cost = (item: Item): number | undefined => item.cost;
const idle: ThreadLoad = Object.freeze({ assigned: 0, loadMs: 0, runningMs: 0, overrun: false });
const running = (runningMs: number, waiting: number[] = [], overrun = false): ThreadLoad => ({
  assigned: 1 + waiting.length,
  loadMs: waiting.reduce((sum, ms) => sum + ms, runningMs),
  runningMs,
  overrun,
});
const limits = (budgetMs = 2, batchSize = 128): PlacementLimits => ({ budgetMs, batchSize });
let nextId = 0;
const items = (...costs: Array<number | undefined>): Item[] => costs.map((c) => ({ id: nextId++, kind: 'k', cost: c }));
const ids = (given: readonly Item[][]): number[][] => given.map((list) => list.map((item) => item.id));

test('a thread with nothing assigned takes an item at once, however long it is predicted to take', () => {
  const queue = items(1000, 1000);
  const { given, next } = placeQueued(queue, 0, cost, [idle, idle], limits());
  assert.deepEqual(ids(given), [[queue[0]!.id], [queue[1]!.id]]);
  assert.equal(next, 2);
});

test('behind a running item a thread takes what fits in the budget, and the fill stops at the first item that fits nowhere', () => {
  // Running 1 ms; 0.5 ms items: 0.5, 1.0, 1.5 and 2.0 ms would wait behind it, 2.5 would not fit.
  const queue = items(0.5, 0.5, 0.5, 0.5, 0.5, 0.5);
  const { given, next } = placeQueued(queue, 0, cost, [running(1)], limits(2));
  assert.deepEqual(ids(given), [queue.slice(0, 4).map((i) => i.id)]);
  assert.equal(next, 4, 'the fifth and sixth wait on main');
  // What already waits there counts: 1.5 ms waiting leaves room for one more 0.5 ms item only.
  assert.equal(placeQueued(queue, 0, cost, [running(1, [1.5])], limits(2)).next, 1);
});

test('batchSize bounds the items on a thread whatever they cost; an idle thread still takes one with batchSize 1', () => {
  const queue = items(0, 0, 0, 0, 0);
  assert.deepEqual(placeQueued(queue, 0, cost, [running(0, [0])], limits(2, 4)).next, 2);
  const one = placeQueued(queue, 0, cost, [idle, idle], limits(2, 1));
  assert.equal(one.next, 2);
  assert.deepEqual(one.given.map((g) => g.length), [1, 1]);
});

test('a thread whose running item overran takes nothing more; an idle one beside it takes the items', () => {
  const queue = items(0.1, 0.1);
  assert.equal(placeQueued(queue, 0, cost, [running(1, [], true)], limits()).next, 0);
  const { given } = placeQueued(queue, 0, cost, [running(1, [], true), idle], limits());
  assert.deepEqual(ids(given), [[], queue.map((i) => i.id)]);
});

test('each item goes to the least loaded thread with room: the fill levels the threads', () => {
  const queue = items(0.4, 0.4, 0.4, 0.4);
  const { given } = placeQueued(queue, 0, cost, [running(1, [0.6]), running(1)], limits());
  // Loads 1.6 and 1: the second takes two (1.4, 1.8), then the first is lowest (1.6 < 1.8).
  assert.deepEqual(ids(given), [[queue[2]!.id], [queue[0]!.id, queue[1]!.id, queue[3]!.id]]);
});

test('on equal load the thread with fewer items wins, so an idle thread is never passed over for a busy one', () => {
  // A busy thread predicted to need no time at all has the idle thread's load, 0.
  const queue = items(0);
  assert.deepEqual(ids(placeQueued(queue, 0, cost, [running(0), idle], limits()).given), [[], [queue[0]!.id]]);
  // Same load and items: the first.
  assert.deepEqual(ids(placeQueued(queue, 0, cost, [idle, idle], limits()).given), [[queue[0]!.id], []]);
});

test('a later, cheaper item never overtakes one that fits nowhere', () => {
  const queue = items(5, 0.1, 0.1);
  const { given, next } = placeQueued(queue, 0, cost, [running(1)], limits(2));
  assert.deepEqual(ids(given), [[]]);
  assert.equal(next, 0);
});

test('items that need no place are passed over and consumed; the fill starts at head', () => {
  const queue = items(0.1, undefined, 0.1, undefined, 5, undefined);
  const { given, next } = placeQueued(queue, 1, cost, [running(1)], limits(2));
  assert.deepEqual(ids(given), [[queue[2]!.id]]);
  assert.equal(next, 4, 'stops at the 5 ms item; the one after it is left for a later fill');
  assert.equal(placeQueued(items(undefined, undefined), 0, cost, [], limits()).next, 2, 'no thread needed to pass over');
  assert.equal(placeQueued(items(0), 0, cost, [], limits()).next, 0, 'no thread: nothing placed');
});

test('hasRoom and overran: the rules at their bounds', () => {
  const l = limits(2, 3);
  assert.equal(hasRoom(0, 0, 0, true, 1e9, l), true, 'nothing assigned: always');
  assert.equal(hasRoom(1, 1, 1, false, 2, l), true, 'exactly the budget waits');
  assert.equal(hasRoom(1, 1, 1, false, 2.0001, l), false);
  assert.equal(hasRoom(2, 1, 1, false, 0, l), true);
  assert.equal(hasRoom(3, 1, 1, false, 0, l), false, 'batchSize items assigned');
  assert.equal(hasRoom(1, 1, 1, true, 0, l), false, 'overran');
  assert.equal(overran(2, 1, 3.0001, 2), true);
  assert.equal(overran(2, 1, 3, 2), false, 'exactly its prediction plus the budget');
  assert.equal(overran(1, 1, 1e9, 2), false, 'nothing waits behind it');
  assert.equal(overran(2, 1, Number.NaN, 2), false, 'not seen to start yet');
});

test('busiestThread and takeBackCount: a free thread takes half of what waits behind the busiest other one', () => {
  const threads = [{ assigned: 0 }, { assigned: 3 }, { assigned: 5 }, { assigned: 5 }];
  assert.equal(busiestThread(threads, 0), 2, 'the first of the busiest');
  assert.equal(busiestThread(threads, 2), 3, 'not itself');
  assert.equal(busiestThread([{ assigned: 0 }, { assigned: 1 }], 0), -1, 'one running item, nothing waiting: nothing to take');
  assert.deepEqual([2, 3, 4, 5, 9].map(takeBackCount), [1, 1, 1, 2, 4]);
});

// ── Properties ──────────────────────────────────────────────────────────────────────────────────────────────────

const costs = fc.constantFrom<number | undefined>(0, 0.003, 0.04, 0.5, 1, 1.5, 2, 5, 1000, undefined);
const threadLoad = fc.oneof(
  fc.constant(idle),
  fc.record({ runningMs: costs, waiting: fc.array(costs, { maxLength: 6 }), overrun: fc.boolean() }).map(({ runningMs, waiting, overrun }) =>
    running(runningMs ?? 0, waiting.map((w) => w ?? 0), overrun),
  ),
);
const scenario = fc.record({
  threads: fc.array(threadLoad, { minLength: 1, maxLength: 4 }),
  queue: fc.array(fc.record({ kind: fc.constantFrom('a', 'b', 'c'), cost: costs }), { maxLength: 40 }),
  head: fc.nat(5),
  budgetMs: fc.constantFrom(0, 0.5, 2, 10),
  batchSize: fc.integer({ min: 1, max: 8 }),
});

test('property: every item is placed at most once, in queue order, and only a prefix of the queue is consumed', () => {
  fc.assert(
    fc.property(scenario, ({ threads, queue: raw, head: rawHead, budgetMs, batchSize }) => {
      const queue: Item[] = raw.map((r, id) => ({ id, ...r }));
      const head = Math.min(rawHead, queue.length);
      const { given, next } = placeQueued(queue, head, cost, threads, { budgetMs, batchSize });
      assert.equal(given.length, threads.length);
      assert.ok(next >= head && next <= queue.length);
      const placed = given.flat().map((item) => item.id);
      assert.equal(new Set(placed).size, placed.length, 'no item twice');
      // Exactly the items of [head, next) that need a place are placed: nothing before head, nothing after next.
      const expected = queue.slice(head, next).filter((item) => item.cost !== undefined).map((item) => item.id);
      assert.deepEqual([...placed].sort((a, b) => a - b), expected);
      // Each thread gets its items oldest first, so items of one kind keep their order on each thread and overall.
      for (const list of given) for (let i = 1; i < list.length; i++) assert.ok(list[i - 1]!.id < list[i]!.id);
    }),
    { numRuns: 500 },
  );
});

test('property: nothing waits on a thread beyond the budget or batchSize unless it is the first item there, and the fill stops only where no thread has room', () => {
  fc.assert(
    fc.property(scenario, ({ threads, queue: raw, budgetMs, batchSize }) => {
      const queue: Item[] = raw.map((r, id) => ({ id, ...r }));
      const { given, next } = placeQueued(queue, 0, cost, threads, { budgetMs, batchSize });
      const final = threads.map((t, i) => {
        let { assigned, loadMs, runningMs } = t;
        for (const item of given[i]!) {
          const ms = item.cost!;
          if (assigned === 0) runningMs = ms;
          else {
            // This item waits behind the running one: the work waiting there, itself included, is within the budget.
            assert.ok(!t.overrun, 'nothing is queued behind an overrunning item');
            assert.ok(assigned < batchSize, `thread ${i} holds at most batchSize items`);
            assert.ok(loadMs - runningMs + ms <= budgetMs, `thread ${i}: ${loadMs - runningMs + ms} ms would wait, budget ${budgetMs}`);
          }
          assigned++;
          loadMs += ms;
        }
        return { assigned, loadMs, runningMs, overrun: t.overrun };
      });
      const blocked = queue[next];
      if (blocked !== undefined) {
        assert.notEqual(blocked.cost, undefined, 'an item that needs no place never stops the fill');
        for (const t of final) {
          const room = t.assigned === 0 || (!t.overrun && t.assigned < batchSize && t.loadMs - t.runningMs + blocked.cost! <= budgetMs);
          assert.ok(!room, 'the fill stopped although a thread had room for the next item');
        }
      }
    }),
    { numRuns: 500 },
  );
});

test('property: while the plan leaves a thread with nothing, no item is put behind another thread\'s running item', () => {
  fc.assert(
    fc.property(scenario, ({ threads, queue: raw, budgetMs, batchSize }) => {
      const queue: Item[] = raw.map((r, id) => ({ id, ...r }));
      const { given } = placeQueued(queue, 0, cost, threads, { budgetMs, batchSize });
      const leftIdle = threads.some((t, i) => t.assigned === 0 && given[i]!.length === 0);
      if (!leftIdle) return;
      threads.forEach((t, i) => {
        const waiting = given[i]!.length - (t.assigned === 0 ? 1 : 0);
        assert.ok(waiting <= 0, `thread ${i} was given ${waiting} item(s) to wait while a thread stays idle`);
      });
    }),
    { numRuns: 500 },
  );
});
