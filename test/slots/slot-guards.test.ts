import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import fc from 'fast-check';
import { SlotTable } from '../../src/slots/slot-table.js';
import { SlotState, ThreadPhase } from '../../src/slots/slot-layout.js';

/** Every method that takes one slot number, called with `slot` and otherwise valid arguments. */
const BY_SLOT: ReadonlyArray<readonly [string, (table: SlotTable, slot: number) => unknown]> = [
  ['state', (t, s) => t.state(s)],
  ['generation', (t, s) => t.generation(s)],
  ['claim', (t, s) => t.claim(s)],
  ['start', (t, s) => t.start(s, 0, 1)],
  ['cancel', (t, s) => t.cancel(s, 0)],
  ['finish', (t, s) => t.finish(s, 0)],
  ['isCanceled', (t, s) => t.isCanceled(s, 0)],
  ['heartbeat', (t, s) => t.heartbeat(s, 0)],
  ['heartbeats', (t, s) => t.heartbeats(s)],
  ['owner', (t, s) => t.owner(s)],
  ['setPhase', (t, s) => t.setPhase(s, 0, ThreadPhase.SCHEDULING)],
  ['phase', (t, s) => t.phase(s)],
];

/** A table of 4 slots, each in a different state, so that a call that hits some word would change something. */
function busyTable(): SlotTable {
  const table = SlotTable.create({ initialSlots: 4, maxSlots: 4 });
  table.allocate(4);
  table.claim(1);
  table.claim(2);
  table.start(2, 0, 5);
  table.heartbeat(2, 0);
  table.claim(3);
  table.cancel(3, 0);
  return table;
}

const BAD_SLOTS: readonly unknown[] = [0.25, 1.5, -1, -0.5, 4, 5, 2 ** 32, 2 ** 32 + 1, 1e9, Number.NaN, Infinity, -Infinity, '0', '1', null, undefined, 1n];

for (const [name, call] of BY_SLOT) {
  test(`${name} rejects a slot that is not an integer below capacity, touching no word`, () => {
    const table = busyTable();
    const before = [...new Int32Array(table.buffer)];
    for (const slot of BAD_SLOTS) {
      assert.throws(() => call(table, slot as number), (error: unknown) => {
        assert.ok(error instanceof Error);
        assert.equal((error as { code?: unknown }).code, 'ERR_INVALID_ARGUMENT', `${name}(${String(slot)}): ${error.message}`);
        assert.match(error.message, /^Expected `slot` to be an integer from 0 to 3, got /);
        return true;
      });
    }
    assert.deepEqual([...new Int32Array(table.buffer)], before);
    assert.doesNotThrow(() => call(table, 0));
    assert.doesNotThrow(() => call(table, 3));
  });
}

test('claim(0.25) no longer claims through slot 0 heartbeat word', () => {
  const table = SlotTable.create({ initialSlots: 4 });
  table.allocate(1);
  assert.throws(() => table.claim(0.25), { code: 'ERR_INVALID_ARGUMENT', message: /got `0\.25` \(number\)/ });
  assert.equal(table.heartbeats(0), 0);
  assert.equal(table.state(0), SlotState.IDLE);
});

test('property: a non-integer slot is rejected by every slot method', () => {
  fc.assert(
    fc.property(
      fc.double({ noNaN: false }).filter((x) => !Number.isInteger(x)),
      fc.constantFrom(...BY_SLOT),
      (slot, [, call]) => {
        const table = busyTable();
        assert.throws(() => call(table, slot), { code: 'ERR_INVALID_ARGUMENT' });
      },
    ),
    { numRuns: 300 },
  );
});

test('busy rejects a range that is malformed or runs past capacity', () => {
  const table = busyTable();
  assert.equal(table.busy(0, 4), 3);
  assert.equal(table.busy(4, 0), 0, 'an empty range at the end');
  for (const [base, count] of [
    [0.5, 1],
    [-1, 2],
    [0, 5],
    [3, 2],
    [5, 0],
    [0, -1],
    [0, 1.5],
    [Number.NaN, 1],
    [0, Number.NaN],
  ] as const) {
    assert.throws(() => table.busy(base, count), { code: 'ERR_INVALID_ARGUMENT' }, `busy(${base}, ${count})`);
  }
});

test('the slot bound follows growth on the main thread', () => {
  const table = SlotTable.create({ initialSlots: 2, maxSlots: 64 });
  table.allocate(2);
  assert.throws(() => table.state(2), { code: 'ERR_INVALID_ARGUMENT' });
  const base = table.allocate(30);
  assert.equal(table.claim(base + 29), 0);
  assert.equal(table.state(31), SlotState.CLAIMED);
});

test('attach rejects anything but a SharedArrayBuffer of whole slots', () => {
  const notShared: readonly unknown[] = [undefined, null, 16, {}, [], new ArrayBuffer(16), new Int32Array(new SharedArrayBuffer(16))];
  for (const buffer of notShared) {
    assert.throws(() => SlotTable.attach(buffer as SharedArrayBuffer), {
      code: 'ERR_INVALID_ARGUMENT',
      message: /^Expected `buffer` to be a SharedArrayBuffer/,
    });
  }
  assert.throws(() => SlotTable.attach(new SharedArrayBuffer(0)), {
    code: 'ERR_INVALID_ARGUMENT',
    message: /^Expected `buffer\.byteLength` to be a positive multiple of 16 .*, got `0` \(number\)$/,
  });
  assert.throws(() => SlotTable.attach(new SharedArrayBuffer(20)), { code: 'ERR_INVALID_ARGUMENT', message: /`20`/ });
  assert.throws(() => SlotTable.attach(new SharedArrayBuffer(16, { maxByteLength: 40 })), {
    code: 'ERR_INVALID_ARGUMENT',
    message: /^Expected `buffer\.maxByteLength` to be .*, got `40` \(number\)$/,
  });
  assert.throws(() => SlotTable.attach(new SharedArrayBuffer(16, { maxByteLength: 2 ** 30 + 16 })), {
    code: 'ERR_INVALID_ARGUMENT',
  });
  // What `create` makes, and a fixed-size buffer of whole slots, are fine.
  const main = SlotTable.create({ initialSlots: 4, maxSlots: 8 });
  const slot = main.allocate(1);
  const gen = main.claim(slot);
  const seen = SlotTable.attach(main.buffer);
  assert.equal(seen.state(slot), SlotState.CLAIMED);
  assert.equal(seen.start(slot, gen, 2), true);
  assert.equal(main.state(slot), SlotState.RUNNING);
  assert.equal(SlotTable.attach(new SharedArrayBuffer(64)).capacity, 4);
});

test('a table attached on a thread before the buffer grew accepts the new slots and still rejects bad ones', async () => {
  const table = SlotTable.create({ initialSlots: 4, maxSlots: 256 });
  table.allocate(4);
  const worker = new Worker(
    `const { workerData, parentPort } = require('node:worker_threads');
     import(workerData.module).then(({ SlotTable }) => {
       const table = SlotTable.attach(workerData.buffer);
       parentPort.on('message', ({ slot, generation }) => {
         const codeOf = (f) => { try { f(); return 'none'; } catch (error) { return error.code ?? error.name; } };
         parentPort.postMessage({
           capacityBefore: workerData.capacity,
           started: table.start(slot, generation, 7),
           beyond: codeOf(() => table.state(table.capacity)),
           fraction: codeOf(() => table.state(slot + 0.5)),
         });
       });
       parentPort.postMessage('attached');
     });`,
    {
      eval: true,
      workerData: {
        buffer: table.buffer,
        capacity: table.capacity,
        module: new URL('../../src/slots/slot-table.js', import.meta.url).href,
      },
    },
  );
  try {
    const messages: unknown[] = [];
    const next = (): Promise<unknown> =>
      new Promise((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
      });
    messages.push(await next());
    assert.equal(messages[0], 'attached');
    const base = table.allocate(100); // grows the buffer well past what the thread saw
    const slot = base + 99;
    const generation = table.claim(slot);
    worker.postMessage({ slot, generation });
    const reply = (await next()) as { capacityBefore: number; started: boolean; beyond: string; fraction: string };
    assert.equal(reply.capacityBefore, 4);
    assert.equal(reply.started, true, 'the thread starts a slot past the capacity it attached with');
    assert.equal(reply.beyond, 'ERR_INVALID_ARGUMENT');
    assert.equal(reply.fraction, 'ERR_INVALID_ARGUMENT');
    assert.equal(table.state(slot), SlotState.RUNNING);
    assert.equal(table.owner(slot), 7);
  } finally {
    await worker.terminate();
  }
});
