import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { DueCalendar } from '../../src/tasks/due-calendar.js';

function drain(calendar: DueCalendar, now: number): number[] {
  const out: number[] = [];
  for (let task = calendar.popDue(now); task >= 0; task = calendar.popDue(now)) out.push(task);
  return out;
}

test('popDue hands out due tasks by due time, then in insertion order', () => {
  const calendar = new DueCalendar();
  calendar.set(5, 300);
  calendar.set(1, 100);
  calendar.set(2, 200);
  calendar.set(3, 100);
  calendar.set(4, 400);
  assert.equal(calendar.earliest(), 100);
  assert.deepEqual(drain(calendar, 300), [1, 3, 2, 5]);
  assert.equal(calendar.size, 1);
  assert.equal(calendar.earliest(), 400);
  assert.equal(calendar.popDue(399), -1);
});

test('set moves a task, delete removes it, and emptied instants leave at once', () => {
  const calendar = new DueCalendar();
  calendar.set(1, 100);
  calendar.set(2, 200);
  calendar.set(1, 300);
  assert.equal(calendar.dueOf(1), 300);
  assert.equal(calendar.earliest(), 200);
  assert.ok(calendar.delete(2));
  assert.ok(!calendar.delete(2));
  assert.equal(calendar.earliest(), 300, 'the empty instant 200 is gone, so no timer would wake for it');
  assert.equal(calendar.instants, 1);
  assert.deepEqual(drain(calendar, 1_000), [1]);
  assert.equal(calendar.earliest(), Infinity);
});

test('a task moved back to the instant being drained is not handed out twice in one pass', () => {
  const calendar = new DueCalendar();
  calendar.set(1, 100);
  calendar.set(2, 100);
  const first = calendar.popDue(100);
  assert.equal(first, 1);
  calendar.set(1, 100); // e.g. a misbehaving component puts it back at the same instant
  calendar.delete(2); // and another task leaves while the instant drains
  assert.equal(calendar.popDue(100), 1, 'it comes back as a new entry, after the drained instant');
  assert.equal(calendar.popDue(100), -1);
});

test('matches a sorted-list model under random set/delete/pop (property)', () => {
  type Op = { kind: 'set'; task: number; due: number } | { kind: 'delete'; task: number } | { kind: 'pop'; now: number };
  const op = fc.oneof(
    fc.record({ kind: fc.constant('set' as const), task: fc.nat(30), due: fc.integer({ min: 0, max: 50 }) }),
    fc.record({ kind: fc.constant('delete' as const), task: fc.nat(30) }),
    fc.record({ kind: fc.constant('pop' as const), now: fc.integer({ min: 0, max: 50 }) }),
  );
  fc.assert(
    fc.property(fc.array(op, { maxLength: 200 }), (ops: Op[]) => {
      const calendar = new DueCalendar();
      // Model: task → [due, insertion sequence].
      const model = new Map<number, [number, number]>();
      let seq = 0;
      for (const o of ops) {
        if (o.kind === 'set') {
          const had = model.get(o.task);
          if (had === undefined || had[0] !== o.due) model.set(o.task, [o.due, seq++]);
          calendar.set(o.task, o.due);
        } else if (o.kind === 'delete') {
          assert.equal(calendar.delete(o.task), model.delete(o.task));
        } else {
          const expected = [...model.entries()]
            .filter(([, [due]]) => due <= o.now)
            .sort((a, b) => a[1][0] - b[1][0] || a[1][1] - b[1][1])
            .map(([task]) => task);
          for (const task of expected) model.delete(task);
          assert.deepEqual(drain(calendar, o.now), expected);
        }
        assert.equal(calendar.size, model.size);
        const earliest = Math.min(...[...model.values()].map(([due]) => due));
        assert.equal(calendar.earliest(), earliest);
      }
    }),
    { numRuns: 300 },
  );
});
