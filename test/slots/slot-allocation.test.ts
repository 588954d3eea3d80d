import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { SlotTable } from '../../src/slots/slot-table.js';

/** Every word of the table, to show that a rejected call changed nothing in shared memory. */
function words(table: SlotTable): number[] {
  return [...new Int32Array(table.buffer)];
}

test('release of a range that was already released throws and changes nothing', () => {
  const table = SlotTable.create({ initialSlots: 16 });
  const a = table.allocate(2);
  const b = table.allocate(3);
  table.release(a, 2);
  assert.throws(() => table.release(a, 2), {
    code: 'ERR_INVALID_ARGUMENT',
    message: /Expected `base` to be the first slot of a range from allocate\(\) that is not yet released, got `0` \(number\)/,
  });
  assert.equal(table.allocated, 3);
  // Had the second release been accepted, the freed range would be handed out twice.
  const x = table.allocate(2);
  const y = table.allocate(2);
  assert.equal(x, a);
  assert.notEqual(y, x);
  assert.ok(y >= b + 3, `allocate(2) must not overlap [${b}, ${b + 3}), got ${y}`);
  assert.equal(table.allocated, 7);
});

test('release with another count than allocated, or from inside a range, throws and keeps the range live', () => {
  const table = SlotTable.create({ initialSlots: 16 });
  const base = table.allocate(4);
  const before = words(table);
  assert.throws(() => table.release(base, 2), {
    code: 'ERR_INVALID_ARGUMENT',
    message: /Expected `count` to be 4 \(the size of the range allocated at slot 0\), got `2` \(number\)/,
  });
  assert.throws(() => table.release(base, 5), { code: 'ERR_INVALID_ARGUMENT' });
  assert.throws(() => table.release(base + 1, 3), { code: 'ERR_INVALID_ARGUMENT' });
  assert.throws(() => table.release(base + 4, 1), { code: 'ERR_INVALID_ARGUMENT' }, 'never allocated');
  assert.deepEqual(words(table), before);
  assert.equal(table.allocated, 4);
  assert.equal(table.allocate(2), base + 4, 'the whole range [0, 4) is still taken');
  table.release(base, 4);
  assert.equal(table.allocated, 2);
});

test('release with a malformed base or count throws ERR_INVALID_ARGUMENT, not a RangeError', () => {
  const table = SlotTable.create({ initialSlots: 4 });
  table.allocate(1);
  for (const [base, count] of [
    [0.5, 1],
    [-3, 1],
    [Number.NaN, 1],
    [0, 0.5],
    [0, Number.NaN],
    [0, -1],
    [1e9, 1],
  ] as const) {
    assert.throws(() => table.release(base, count), { code: 'ERR_INVALID_ARGUMENT' }, `release(${base}, ${count})`);
  }
  assert.equal(table.allocated, 1);
});

test('release of a busy range throws ERR_INVALID_STATE and the range stays live until it is idle', () => {
  const table = SlotTable.create({ initialSlots: 8 });
  const base = table.allocate(3);
  const gen = table.claim(base + 2);
  assert.throws(() => table.release(base, 3), { code: 'ERR_INVALID_STATE' });
  assert.equal(table.allocated, 3);
  assert.equal(table.allocate(1), base + 3, 'the busy range was not freed');
  table.finish(base + 2, gen);
  table.release(base, 3);
  assert.equal(table.allocated, 1);
  assert.throws(() => table.release(base, 3), { code: 'ERR_INVALID_ARGUMENT' }, 'and only once');
});

test('churn across counts reuses freed space: a full table emptied takes one allocation of all of it', () => {
  const table = SlotTable.create({ initialSlots: 100, maxSlots: 100 });
  const bases = Array.from({ length: 10 }, () => table.allocate(10));
  for (const base of bases) table.release(base, 10);
  assert.equal(table.allocated, 0);
  assert.equal(table.allocate(11), 0);
  assert.equal(table.allocate(1), 11);
  assert.equal(table.allocate(88), 12);
  assert.equal(table.allocated, 100);
  assert.throws(() => table.allocate(1), { code: 'ERR_INVALID_STATE' }, 'now it is really full');
});

test('allocate takes the lowest hole that fits, splitting it, before growing', () => {
  const table = SlotTable.create({ initialSlots: 32, maxSlots: 32 });
  const a = table.allocate(3); // 0
  const b = table.allocate(3); // 3
  const c = table.allocate(3); // 6
  table.allocate(1); // 9: keeps the end used
  table.release(a, 3);
  table.release(c, 3);
  assert.equal(table.allocate(4), 10, 'no hole of 4: past the end');
  assert.equal(table.allocate(1), 0, 'the first hole');
  assert.equal(table.allocate(2), 1, 'the rest of the first hole');
  assert.equal(table.allocate(2), 6, 'the second hole');
  assert.equal(table.allocate(1), 8);
  assert.equal(table.allocate(1), 14);
  assert.equal(table.busy(b, 3), 0);
});

test('a released range merges with free neighbours on both sides', () => {
  const table = SlotTable.create({ initialSlots: 16, maxSlots: 16 });
  const a = table.allocate(2); // 0
  const b = table.allocate(3); // 2
  const c = table.allocate(4); // 5
  const tail = table.allocate(7); // 9..16: the table is full
  table.release(a, 2);
  table.release(c, 4);
  table.release(b, 3); // joins [0, 2) and [5, 9) into [0, 9)
  assert.equal(table.allocate(9), 0);
  assert.throws(() => table.allocate(1), { code: 'ERR_INVALID_STATE' });
  assert.equal(tail, 9);
});

test('free space at the end goes back to the end, so a larger request can grow from there', () => {
  const table = SlotTable.create({ initialSlots: 8, maxSlots: 64 });
  const a = table.allocate(4); // 0
  const b = table.allocate(4); // 4
  table.release(b, 4);
  assert.equal(table.allocate(10), 4, 'the freed tail plus new slots');
  assert.ok(table.capacity >= 14);
  table.release(a, 4);
  table.release(4, 10);
  assert.equal(table.allocated, 0);
  assert.equal(table.allocate(64), 0, 'everything went back to one free run');
});

test('create defaults initialSlots to min(1024, maxSlots)', () => {
  assert.equal(SlotTable.create({ maxSlots: 100 }).capacity, 100);
  assert.equal(SlotTable.create({ maxSlots: 1 }).capacity, 1);
  assert.equal(SlotTable.create({ maxSlots: 5000 }).capacity, 1024);
  assert.equal(SlotTable.create().capacity, 1024);
  assert.throws(() => SlotTable.create({ maxSlots: 0 }), { code: 'ERR_INVALID_ARGUMENT', message: /`maxSlots`/ });
  assert.throws(() => SlotTable.create({ maxSlots: 100, initialSlots: 101 }), {
    code: 'ERR_INVALID_ARGUMENT',
    message: /`initialSlots`/,
  });
});

type Op =
  | { readonly kind: 'allocate'; readonly count: number }
  | { readonly kind: 'release'; readonly pick: number }
  | { readonly kind: 'badRelease'; readonly pick: number; readonly shift: number; readonly delta: number }
  | { readonly kind: 'busyRelease'; readonly pick: number };

test('property: random allocate/release never overlaps live ranges, counts them exactly, and frees everything', () => {
  const MAX = 48;
  const op: fc.Arbitrary<Op> = fc.oneof(
    { arbitrary: fc.record({ kind: fc.constant('allocate' as const), count: fc.integer({ min: 1, max: 12 }) }), weight: 4 },
    { arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }), weight: 3 },
    {
      arbitrary: fc.record({
        kind: fc.constant('badRelease' as const),
        pick: fc.nat(),
        shift: fc.integer({ min: -2, max: 2 }),
        delta: fc.integer({ min: -2, max: 2 }),
      }),
      weight: 1,
    },
    { arbitrary: fc.record({ kind: fc.constant('busyRelease' as const), pick: fc.nat() }), weight: 1 },
  );
  fc.assert(
    fc.property(fc.integer({ min: 1, max: MAX }), fc.array(op, { maxLength: 120 }), (initialSlots, ops) => {
      const table = SlotTable.create({ initialSlots, maxSlots: MAX });
      /** The model: which live range (by base) holds each slot; -1 = free. */
      const owner = new Array<number>(MAX).fill(-1);
      const live = new Map<number, number>();
      /** The lowest base of `count` free slots in the model, or -1. */
      const firstFit = (count: number): number => {
        let run = 0;
        for (let slot = 0; slot < MAX; slot++) {
          run = owner[slot] === -1 ? run + 1 : 0;
          if (run === count) return slot - count + 1;
        }
        return -1;
      };
      const liveAt = (pick: number): [number, number] | undefined => {
        const all = [...live];
        return all.length === 0 ? undefined : all[pick % all.length];
      };
      for (const o of ops) {
        if (o.kind === 'allocate') {
          const expected = firstFit(o.count);
          if (expected < 0) {
            assert.throws(() => table.allocate(o.count), { code: 'ERR_INVALID_STATE' });
            continue;
          }
          const base = table.allocate(o.count);
          assert.equal(base, expected, `allocate(${o.count}) takes the lowest free run`);
          for (let slot = base; slot < base + o.count; slot++) {
            assert.equal(owner[slot], -1, `slot ${slot} is handed out while live in range ${owner[slot]}`);
            owner[slot] = base;
          }
          live.set(base, o.count);
        } else if (o.kind === 'release') {
          const range = liveAt(o.pick);
          if (range === undefined) continue;
          const [base, count] = range;
          table.release(base, count);
          live.delete(base);
          for (let slot = base; slot < base + count; slot++) owner[slot] = -1;
        } else if (o.kind === 'badRelease') {
          const range = liveAt(o.pick) ?? [0, 1];
          const base = range[0] + o.shift;
          const count = range[1] + o.delta;
          if (live.get(base) === count) continue; // that is a valid release
          const allocated = table.allocated;
          assert.throws(() => table.release(base, count), { code: 'ERR_INVALID_ARGUMENT' });
          assert.equal(table.allocated, allocated);
        } else {
          const range = liveAt(o.pick);
          if (range === undefined) continue;
          const [base, count] = range;
          const slot = base + (o.pick % count);
          const gen = table.claim(slot);
          assert.throws(() => table.release(base, count), { code: 'ERR_INVALID_STATE' });
          assert.equal(table.finish(slot, gen), true);
        }
        let sum = 0;
        for (const count of live.values()) sum += count;
        assert.equal(table.allocated, sum, '`allocated` is the sum of the live ranges');
      }
      for (const [base, count] of live) table.release(base, count);
      assert.equal(table.allocated, 0);
      assert.equal(table.allocate(MAX), 0, 'after releasing everything the whole table is one free run');
      assert.equal(table.allocated, MAX);
    }),
    { numRuns: 400 },
  );
});
