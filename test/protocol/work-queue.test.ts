/**
 * The work queue: what threads take comes out highest priority first, FIFO within a priority; an entry whose item
 * was canceled before it started, or whose slot has a newer claim, is skipped; a full level leaves the item to main.
 * Parking: a thread parks only when nothing is there, and main's wake reaches it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { RING_ENTRIES, WorkQueueReader, WorkQueueWriter } from '../../src/protocol/work-queue.js';
import { SlotTable } from '../../src/slots/slot-table.js';

function setup(threads = 2): { writer: WorkQueueWriter; readers: WorkQueueReader[]; slots: SlotTable } {
  const slots = SlotTable.create({ initialSlots: 64 });
  const writer = new WorkQueueWriter(threads, 64);
  const readers = Array.from({ length: threads }, (_, t) => new WorkQueueReader(writer.buffers, t, threads));
  return { writer, readers, slots };
}

const body = (n: number): Uint8Array => Uint8Array.from({ length: n }, (_, i) => i & 0xff);

test('property: takes come out by priority, then in publish order; canceled and superseded entries are skipped', () => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ priority: fc.integer({ min: 1, max: 100 }), size: fc.nat(600), fate: fc.constantFrom('run', 'run', 'run', 'cancel', 'reclaim') }), { maxLength: 120 }),
      (items) => {
        const { writer, readers, slots } = setup();
        const published: Array<{ slot: number; generation: number; priority: number; order: number; size: number; runs: boolean }> = [];
        items.forEach((it, order) => {
          const slot = slots.allocate(1);
          let generation = slots.claim(slot);
          assert.equal(writer.publish(slot, generation, it.priority, body(it.size)), true);
          let runs = true;
          if (it.fate === 'cancel') {
            slots.cancel(slot, generation);
            runs = false;
          } else if (it.fate === 'reclaim') {
            // The item was settled and the slot claimed again for a new item, published at once: the old entry is stale.
            slots.cancel(slot, generation);
            slots.finish(slot, generation);
            generation = slots.claim(slot);
            assert.equal(writer.publish(slot, generation, it.priority, body(it.size)), true);
          }
          if (runs) published.push({ slot, generation, priority: it.priority, order, size: it.size, runs });
        });
        const expected = [...published].sort((a, b) => b.priority - a.priority || a.order - b.order);
        const taken: number[] = [];
        for (let i = 0; ; i++) {
          const reader = readers[i % readers.length]!;
          const entry = reader.take((slot, generation) => slots.start(slot, generation, 1));
          if (entry === undefined) break;
          assert.deepEqual([...reader.body(entry.slot)], [...body(published.find((p) => p.slot === entry.slot)!.size)]);
          taken.push(entry.slot);
        }
        assert.deepEqual(taken, expected.map((p) => p.slot));
        assert.equal(readers[0]!.hasWork, false);
      },
    ),
    { numRuns: 300 },
  );
});

test('a full level refuses a publish; republish goes once threads made room', () => {
  const { writer, readers, slots } = setup(1);
  const all: Array<[number, number]> = [];
  for (let i = 0; i < RING_ENTRIES; i++) {
    const slot = slots.allocate(1);
    const generation = slots.claim(slot);
    assert.equal(writer.publish(slot, generation, 7, body(4)), true);
    all.push([slot, generation]);
  }
  const extra = slots.allocate(1);
  const extraGeneration = slots.claim(extra);
  assert.equal(writer.publish(extra, extraGeneration, 7, body(4)), false);
  assert.notEqual(readers[0]!.take((s, g) => slots.start(s, g, 1)), undefined);
  assert.equal(writer.republish(extra, extraGeneration, 7), true);
  assert.equal(writer.waiting(), RING_ENTRIES);
});

test('a thread parks only when there is nothing to take; main wakes a parked thread', async () => {
  const { writer, readers, slots } = setup(1);
  const reader = readers[0]!;
  const slot = slots.allocate(1);
  writer.publish(slot, slots.claim(slot), 50, body(1));
  assert.equal(reader.park(), undefined, 'work is there: no park');
  assert.equal(writer.parked, 0);
  reader.take((s, g) => slots.start(s, g, 1));
  const parked = reader.park();
  assert.ok(parked !== undefined);
  assert.equal(writer.parked, 1);
  assert.equal(writer.wake(1), 1);
  await parked;
  assert.equal(writer.parked, 0);
  assert.deepEqual(writer.parkState(0), { parked: false, taken: 1 });
});
