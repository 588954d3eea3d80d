import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import fc from 'fast-check';
import { SlotTable } from '../../src/slots/slot-table.js';
import { SlotState } from '../../src/slots/slot-layout.js';

test('claim → start → finish moves through the states and bumps the generation', () => {
  const table = SlotTable.create({ initialSlots: 4 });
  const slot = table.allocate(1);
  const gen = table.claim(slot);
  assert.equal(gen, 0);
  assert.equal(table.state(slot), SlotState.CLAIMED);
  assert.equal(table.claim(slot), -1, 'a claimed slot cannot be claimed again');
  assert.equal(table.start(slot, gen, 3), true);
  assert.equal(table.state(slot), SlotState.RUNNING);
  assert.equal(table.owner(slot), 3);
  table.heartbeat(slot, gen);
  table.heartbeat(slot, gen);
  assert.equal(table.heartbeats(slot), 2);
  assert.equal(table.finish(slot, gen), true);
  assert.equal(table.state(slot), SlotState.IDLE);
  assert.equal(table.generation(slot), 1);
  assert.equal(table.heartbeats(slot), 0);
  assert.equal(table.finish(slot, gen), false, 'a second completion of the same generation is stale');
});

test('a start for an old generation fails after the slot was finished and claimed again', () => {
  const table = SlotTable.create();
  const slot = table.allocate(1);
  const old = table.claim(slot);
  assert.equal(table.cancel(slot, old), true);
  assert.equal(table.start(slot, old), false, 'a canceled item is skipped');
  assert.equal(table.finish(slot, old), true);
  const fresh = table.claim(slot);
  assert.equal(fresh, old + 1);
  assert.equal(table.start(slot, old), false, 'the stale start cannot take the new claim');
  assert.equal(table.isCanceled(slot, old), true, 'the old item reads as canceled');
  assert.equal(table.isCanceled(slot, fresh), false);
  table.heartbeat(slot, old);
  assert.equal(table.heartbeats(slot), 0, 'a stale heartbeat is ignored');
  assert.equal(table.start(slot, fresh), true);
});

test('the buffer grows on allocation and threads see the growth', async () => {
  const table = SlotTable.create({ initialSlots: 1, maxSlots: 1024 });
  const bases = Array.from({ length: 100 }, () => table.allocate(3));
  assert.equal(new Set(bases).size, 100);
  assert.ok(table.capacity >= 300);
  const last = bases[99]!;
  const gen = table.claim(last);
  // A real thread attaches to the same memory and starts the last slot.
  const worker = new Worker(
    `const { workerData, parentPort } = require('node:worker_threads');
     const words = new Int32Array(workerData.buffer);
     const at = workerData.slot * 4;
     const expected = (workerData.gen << 2) | 1;
     parentPort.postMessage(Atomics.compareExchange(words, at, expected, (workerData.gen << 2) | 2) === expected);`,
    { eval: true, workerData: { buffer: table.buffer, slot: last, gen } },
  );
  const started = await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await worker.terminate();
  assert.equal(started, true);
  assert.equal(table.state(last), SlotState.RUNNING);
});

test('release requires idle slots and recycles the range', () => {
  const table = SlotTable.create();
  const base = table.allocate(2);
  const gen = table.claim(base + 1);
  assert.throws(() => table.release(base, 2), { code: 'ERR_INVALID_STATE' });
  table.finish(base + 1, gen);
  table.release(base, 2);
  assert.equal(table.allocated, 0);
  assert.equal(table.allocate(2), base);
  assert.throws(() => table.allocate(0), { code: 'ERR_INVALID_ARGUMENT' });
  assert.throws(() => SlotTable.create({ maxSlots: 4, initialSlots: 8 }), { code: 'ERR_INVALID_ARGUMENT' });
});

test('property: random operations keep every slot in a state its model allows', () => {
  const op = fc.oneof(
    fc.record({ kind: fc.constant('claim' as const), slot: fc.nat(3) }),
    fc.record({ kind: fc.constant('start' as const), slot: fc.nat(3), stale: fc.boolean() }),
    fc.record({ kind: fc.constant('cancel' as const), slot: fc.nat(3), stale: fc.boolean() }),
    fc.record({ kind: fc.constant('finish' as const), slot: fc.nat(3), stale: fc.boolean() }),
  );
  fc.assert(
    fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
      const table = SlotTable.create({ initialSlots: 4 });
      table.allocate(4);
      const model = Array.from({ length: 4 }, () => ({ state: SlotState.IDLE as number, gen: 0 }));
      for (const o of ops) {
        const m = model[o.slot]!;
        const gen = 'stale' in o && o.stale ? m.gen - 1 : m.gen;
        if (o.kind === 'claim') {
          const got = table.claim(o.slot);
          if (m.state === SlotState.IDLE) {
            assert.equal(got, m.gen);
            m.state = SlotState.CLAIMED;
          } else assert.equal(got, -1);
        } else if (o.kind === 'start') {
          const ok = table.start(o.slot, gen);
          assert.equal(ok, gen === m.gen && m.state === SlotState.CLAIMED);
          if (ok) m.state = SlotState.RUNNING;
        } else if (o.kind === 'cancel') {
          const ok = table.cancel(o.slot, gen);
          assert.equal(ok, gen === m.gen && (m.state === SlotState.CLAIMED || m.state === SlotState.RUNNING));
          if (ok) m.state = SlotState.CANCEL;
        } else {
          const ok = table.finish(o.slot, gen);
          assert.equal(ok, gen === m.gen && m.state !== SlotState.IDLE);
          if (ok) {
            m.state = SlotState.IDLE;
            m.gen++;
          }
        }
        assert.equal(table.state(o.slot), m.state);
        assert.equal(table.generation(o.slot), m.gen);
      }
    }),
    { numRuns: 300 },
  );
});
